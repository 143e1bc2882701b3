"""`netbench worker --topology`: bad input is one line and exit 2 before anything is touched; a host's per-peer
classes follow the topology's paths; what a peer writes to the rendezvous store is checked, never trusted."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from netbench.cli.app import main
from netbench.orchestrator.multihost.host_topology import HostTopology, HostTopologyError
from netbench.orchestrator.multihost.peer_addresses import PeerAddressError, exchange, parse_entry
from netbench.topology import load_topology

SITES = """
[[sites]]
name = "east"
nodes = 2
lan_bw = "1gbit"
[[sites]]
name = "west"
nodes = 1
lan_bw = "1gbit"
lan_delay = "2ms"
[[wan]]
between = ["east", "west"]
bw = "100mbit"
delay = "10ms"
reverse = { bw = "50mbit" }
"""


@pytest.fixture
def sites_file(tmp_path: Path) -> Path:
    path = tmp_path / "sites.toml"
    path.write_text(SITES)
    return path


def _worker(argv: list[str], monkeypatch, world: int = 3) -> tuple[int, str]:
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29999",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(["worker", "--iface", "lo", *argv])
    return exited.value.code, err.getvalue()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--topology", "{tmp}/missing.toml"], "cannot be read"),
        (["--topology", "{tmp}/bad.toml"], "invalid TOML"),
        (["--topology", "{tmp}/field.toml"], "lan_bw"),
        (["--topology", "{sites}", "--bw", "100mbit"], "drop --bw"),
        (["--topology", "{sites}", "--rank-order", "0,0,1"], "--rank-order"),
        (["--rank-order", "interleaved"], "needs --topology"),
    ],
)
def test_bad_topology_input_is_one_line_and_exit_2(
    argv, expected, sites_file: Path, tmp_path: Path, monkeypatch
) -> None:
    (tmp_path / "bad.toml").write_text("[[sites]\n")
    (tmp_path / "field.toml").write_text(SITES.replace('lan_bw = "1gbit"', 'lan_bw = "fast"', 1))
    args = [a.replace("{tmp}", str(tmp_path)).replace("{sites}", str(sites_file)) for a in argv]
    code, err = _worker(args, monkeypatch)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


def test_a_topology_of_another_size_than_the_world_exits_2(sites_file: Path, monkeypatch) -> None:
    code, err = _worker(["--topology", str(sites_file)], monkeypatch, world=2)
    assert code == 2 and "3 nodes, but torchrun started 2" in err and len(err.strip().splitlines()) == 1, err


def test_several_nodes_on_one_host_exit_2(sites_file: Path, monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    for name, value in {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}.items():
        monkeypatch.setenv(name, value)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(["worker", "--iface", "lo", "--topology", str(sites_file)])
    assert exited.value.code == 2 and "one node per host" in err.getvalue(), err.getvalue()


def test_each_peer_class_is_the_path_between_the_nodes(sites_file: Path) -> None:
    """n0 -> n1 stays in the site (1gbit, no delay); n0 -> n2 crosses the WAN (100mbit, 10 ms + n2's 0 ms downlink)."""
    host = HostTopology.for_rank(load_topology(sites_file), "topology", 3, 1, 0)
    shaping = host.shaping({1: ["10.0.0.2"], 2: ["10.0.0.3", "10.0.1.3"]}, own={"10.0.0.1"})
    by_node = {p.node: p for p in shaping.peers}
    assert by_node["n1"].path.rate_bps == 1e9 and by_node["n1"].path.delay_s == 0
    assert by_node["n2"].path.rate_bps == 100e6 and by_node["n2"].path.delay_s == pytest.approx(0.010)
    assert by_node["n2"].addresses == ("10.0.0.3", "10.0.1.3") and shaping.uplink.rate_bps == 1e9
    west = HostTopology.for_rank(
        load_topology(sites_file), "topology", 3, 1, 2
    )  # the reverse WAN direction and n2's lan delay
    back = {p.node: p.path for p in west.shaping({0: ["10.0.0.1"], 1: ["10.0.0.2"]}, own={"10.0.0.3"}).peers}
    assert back["n0"].rate_bps == 50e6 and back["n0"].delay_s == pytest.approx(0.012)
    interleaved = HostTopology.for_rank(load_topology(sites_file), "interleaved", 3, 1, 1)  # rank 1 runs on west's n2
    assert interleaved.node == 2


def test_one_egress_shaper_serves_where_every_path_is_the_hosts_uplink(sites_file: Path, tmp_path: Path) -> None:
    """A one-switch graph of equal links (and the hosts' star) needs no per-peer classes; a WAN trunk does."""
    from netbench.orchestrator.multihost.torchrun import star_of_hosts
    from netbench.topology import DirectionSpec

    one_switch = tmp_path / "lan.toml"
    one_switch.write_text('[[sites]]\nname = "lan"\nnodes = 3\nlan_bw = "100mbit"\n')
    lan = HostTopology.for_rank(load_topology(one_switch), "topology", 3, 1, 1)
    assert lan.uniform_egress() == lan.topology.access_link(1).forward
    assert lan.uniform_egress().rate_bps == 100e6
    delayed = tmp_path / "delayed.toml"
    delayed.write_text('[[sites]]\nname = "lan"\nnodes = 3\nlan_bw = "100mbit"\nlan_delay = "2ms"\n')
    delayed_lan = HostTopology.for_rank(load_topology(delayed), "topology", 3, 1, 0)
    assert delayed_lan.uniform_egress().delay_s == 0.002  # a site's LAN delay sits on each uplink: still one shaper
    assert HostTopology.for_rank(load_topology(sites_file), "topology", 3, 1, 0).uniform_egress() is None
    shaped = DirectionSpec(rate_bps=20e6, delay_s=0.005)
    hosts = star_of_hosts(4, 2, 5, "lo", shaped)  # rank 5 of 2 workers per node: node 2
    assert (hosts.node, hosts.shaped, hosts.uniform_egress()) == (2, True, shaped)
    assert not star_of_hosts(4, 1, 0, "lo", None, 1e9).shaped


def test_an_address_two_nodes_claim_is_refused(sites_file: Path) -> None:
    host = HostTopology.for_rank(load_topology(sites_file), "topology", 3, 1, 0)
    with pytest.raises(HostTopologyError, match="both list address 10.0.0.2"):
        host.shaping({1: ["10.0.0.2"], 2: ["10.0.0.2"]}, own={"10.0.0.1"})


class _Store:
    """The two calls of a c10d store that the exchange uses, over a dict."""

    def __init__(self, entries: dict[str, bytes]) -> None:
        self.entries = entries

    def set(self, key: str, value: str) -> None:
        self.entries[key] = value.encode()

    def wait(self, keys: list[str], timeout) -> None:
        missing = [k for k in keys if k not in self.entries]
        if missing:
            raise RuntimeError(f"wait timeout after {timeout}, keys: {missing[0]}")

    def get(self, key: str) -> bytes:
        return self.entries[key]


def test_peer_entries_are_json_checked_and_a_missing_peer_is_one_line() -> None:
    store = _Store({"netbench/peer-addresses/0/1": json.dumps({"rank": 1, "addresses": ["198.18.0.2"]}).encode()})
    assert exchange(store, 0, ["198.18.0.1"], [1], 1.0) == {1: ["198.18.0.2"]}
    assert json.loads(store.entries["netbench/peer-addresses/0/0"]) == {"rank": 0, "addresses": ["198.18.0.1"]}
    with pytest.raises(PeerAddressError, match="within 1 s"):
        exchange(store, 0, ["198.18.0.1"], [2], 1.0)
    bad = [
        b"\x80\x04K\x01.",  # a pickle: never unpickled, just not JSON
        json.dumps({"rank": 1, "addresses": ["127.0.0.1"]}).encode(),
        json.dumps({"rank": 1, "addresses": ["not-an-address"]}).encode(),
        json.dumps({"rank": 1, "addresses": ["10.0.0.1"] * 17}).encode(),
        json.dumps({"rank": 1, "addresses": ["10.0.0.1"], "run": "x"}).encode(),
        json.dumps({"rank": 2, "addresses": ["10.0.0.1"]}).encode(),
        b" " * 5000,
    ]
    for raw in bad:
        with pytest.raises(PeerAddressError) as refused:
            parse_entry(raw, 1)
        assert "rank 1" in str(refused.value) and "\n" not in str(refused.value)
