"""Topologies built for real: two sites joined by a WAN link, racks under a spine (bad input: test_bad_input.py).

Traffic between two nodes crosses exactly the links of its path: the WAN's delay shows in the round trip across
sites and not within one, the WAN's rate caps goodput across it, and two flows that cross one trunk share it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from pyroute2 import IPRoute

from netbench.emulation import netns, tmpfolders
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.probe import measure_goodput, measure_rtt
from netbench.emulation.spec import ClusterSpec
from netbench.emulation.trunks import TrunkCounters
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import racks, uniform_sites

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]
LAN = DirectionSpec(rate_bps=1e9)
WAN = DirectionSpec(rate_bps=100e6, delay_s=0.010)


def two_sites() -> ClusterSpec:
    return ClusterSpec(nodes=4, up=LAN, down=LAN, topology=uniform_sites(2, 2, LAN, LAN, WAN))


def ours(run_id: str) -> list[str]:
    return [n for n in netns.list_netns() if RunNames(run_id).owns(n)]


@pytest.fixture(scope="module")
def sites_cluster():
    with Cluster(two_sites()) as cluster:
        yield cluster
        cluster.down()


def test_round_trip_across_sites_is_twice_the_wan_delay_and_within_a_site_near_zero(sites_cluster: Cluster) -> None:
    n0, n1, n2, _ = sites_cluster.nodes
    across, within = measure_rtt(n0, n2, count=10), measure_rtt(n0, n1, count=10)
    assert across["lost"] == within["lost"] == 0
    assert across["rtt_ms"] == pytest.approx(20.0, rel=0.10)
    assert within["rtt_ms"] < 2.0


def test_goodput_across_the_wan_is_its_rate(sites_cluster: Cluster) -> None:
    n0, _, n2, _ = sites_cluster.nodes
    goodput, _, _ = measure_goodput(n0, n2, seconds=2)
    assert 0.85 * WAN.rate_bps <= goodput <= WAN.rate_bps


def test_two_flows_crossing_one_trunk_share_it(sites_cluster: Cluster) -> None:
    n0, n1, n2, n3 = sites_cluster.nodes
    rates: dict[str, float] = {}

    def flow(name: str, client, server) -> None:
        rates[name] = measure_goodput(client, server, seconds=3)[0]

    threads = [
        threading.Thread(target=flow, args=("n0->n2", n0, n2)),
        threading.Thread(target=flow, args=("n1->n3", n1, n3)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 0.85 * WAN.rate_bps <= sum(rates.values()) <= WAN.rate_bps, rates  # together they fill the one trunk
    # Neither has it to itself. How two TCP flows split one trunk is TCP's business, not the emulator's: each flow's
    # steady window starts with its own iperf3 client, and on a busy host the clients start up to a second apart, so
    # the first has the trunk alone for part of its window (17.8 / 78.2 Mbit/s of 100 seen with other work running).
    for rate in rates.values():
        assert 0.1 * WAN.rate_bps <= rate <= 0.9 * WAN.rate_bps, rates


def test_trunk_counters_count_the_bytes_that_cross(sites_cluster: Cluster) -> None:
    counters = TrunkCounters(sites_cluster.fabric)
    counters.sample(0)
    n0, n1, n2, _ = sites_cluster.nodes
    measure_goodput(n0, n1, seconds=1)  # within a site: the trunk stays quiet
    counters.sample(1)
    goodput, _, window = measure_goodput(n0, n2, seconds=1)
    counters.sample(2)
    rows = {(r["step"], r["direction"]): r["tx_bytes"] for r in counters.rows()}
    assert rows[(1, "fwd")] < 100_000  # a few ARP and stray frames at most
    assert rows[(2, "fwd")] >= goodput / 8 * window  # n0 -> n2 data crossed east to west (at least what was counted)
    assert rows[(2, "rev")] < rows[(2, "fwd")]  # acknowledgements only


def test_nodes_and_switches_have_no_route_out(sites_cluster: Cluster) -> None:
    def routes() -> list[str]:
        with IPRoute() as ipr:
            return [r.get_attr("RTA_DST") or "default" for r in ipr.get_routes(table=254)]

    subnet = sites_cluster.names.subnet
    for node in sites_cluster.nodes:
        assert node.call(routes) == [str(subnet.network_address)]
    for switch in sites_cluster.switches:
        found = switch.call(routes)
        assert (
            "default" not in found
            and len(found) == 4
            and all(a in [n.address for n in sites_cluster.nodes] for a in found)
        )


def test_racks_route_through_the_spine_and_leave_nothing_behind() -> None:
    access = DirectionSpec(rate_bps=100e6)
    spec = ClusterSpec(nodes=4, up=access, down=access, topology=racks(2, 2, access, access, oversubscription=4.0))
    with Cluster(spec) as cluster:
        run_id = cluster.names.run_id
        assert len(ours(run_id)) == 4 + 3  # the nodes, two racks and the spine
        spine = cluster.switches[spec.topology.switches.index("spine")]
        before = cluster.switches[0].call(_tx_bytes, "t0")
        seen_by_spine = spine.call(_forwarded)
        goodput, _, _ = measure_goodput(cluster.nodes[0], cluster.nodes[2], seconds=2)
        assert spine.call(_forwarded) - seen_by_spine > 1000  # the spine forwarded the flow
        assert cluster.switches[0].call(_tx_bytes, "t0") - before > 1_000_000
        assert 0.85 * 50e6 <= goodput <= 50e6  # each rack's uplink: 2 x 100mbit / 4
        within, _, _ = measure_goodput(cluster.nodes[0], cluster.nodes[1], seconds=1)
        assert within >= 0.85 * 100e6  # within a rack the uplink is not crossed
    assert ours(run_id) == []


def test_teardown_removes_every_switch_and_delay_line() -> None:
    with Cluster(two_sites()) as cluster:
        run_id = cluster.names.run_id
        pids = cluster.impairment.pids
        assert len(ours(run_id)) == 6 and len(pids) == 2  # a delay line in each site sends its WAN direction
        counters = tmpfolders.leftovers({run_id}, "delayline").get(run_id, [])
        assert len(counters) == 2  # each line's counters in a folder of its own
    assert ours(run_id) == []
    assert tmpfolders.leftovers({run_id}) == {}  # the counters and the nodes' TMPDIR alike
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


@pytest.mark.slow
def test_netbench_run_on_a_two_site_file_records_the_topology(tmp_path: Path) -> None:
    topology = tmp_path / "two_sites.toml"
    topology.write_text(
        '[[sites]]\nname = "east"\nnodes = 2\nlan_bw = "1gbit"\n[[sites]]\nname = "west"\nnodes = 2\n'
        'lan_bw = "1gbit"\n[[wan]]\nbetween = ["east", "west"]\nbw = "100mbit"\ndelay = "10ms"\n'
        "[nodes.1]\ncompute_scale = 2\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "netbench",
            "run",
            "--topology",
            str(topology),
            "-r",
            "full",
            "--workload",
            "shapes",
            "--shapes",
            "llama:d_model=32,layers=1,ffn=64,vocab=64",
            "--compute-ms",
            "40",
            "--steps",
            "4",
            "--warmup",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    topo = run["cluster"]["spec"]["topology"]
    assert topo["switches"] == ["east", "west"] and len(topo["nodes"]) == 4
    assert run["cluster"]["fabric"]["trunks"]["east--west"]
    rows = (run_dir / "trunks.csv").read_text().splitlines()
    assert rows[0] == "step,link,direction,tx_bytes,tx_packets" and len(rows) > 2
    # node 1 is a straggler: its compute takes twice as long, and steps.csv says so
    steps = pd.read_csv(run_dir / "steps.csv")
    compute = steps[~steps["warmup"]].groupby("rank")["compute_s"].median()
    assert steps.groupby("rank")["compute_scale"].first().tolist() == [1.0, 2.0, 1.0, 1.0]
    assert compute[1] > 1.6 * compute.drop(1).max(), compute.tolist()
    # every link direction's bytes, the model's beside the counters'; the WAN's within 10 %
    links = run["summary"]["links"]
    wan = {r["link"]: r for r in links["directions"] if " to " in r["link"]}
    assert set(wan) == {"east to west", "west to east"} and all(abs(r["ratio"] - 1) < 0.10 for r in wan.values()), wan
    assert links["bottleneck_model"] and links["busiest_link"] in {r["link"] for r in links["directions"]}


def _tx_bytes(port: str) -> int:
    return int(Path("/proc/net/dev").read_text().split(f"{port}:")[1].split()[8])


def _forwarded() -> int:
    """Packets this namespace's IP layer forwarded (/proc/net/snmp Ip: ForwDatagrams)."""
    ip = [line.split()[1:] for line in Path("/proc/net/snmp").read_text().splitlines() if line.startswith("Ip:")]
    return int(ip[1][ip[0].index("ForwDatagrams")])
