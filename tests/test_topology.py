"""Topologies as data: presets, topology files, paths, delays, placement and every way a file can be wrong."""

from __future__ import annotations

import os

import pytest

from netbench.topology import (
    DirectionSpec,
    PlacementError,
    TopologyError,
    load_topology,
    parse_rank_order,
    place,
    racks,
    star,
    uniform_sites,
)
from netbench.topology.graph import Hop, LinkSpec, NodeSpec, Topology

GBIT, MBIT = 1e9, 1e6
THREE_SITES = """
[[sites]]
name = "us-east"
nodes = 2
lan_bw = "1gbit"
[[sites]]
name = "eu-west"
nodes = 2
lan_bw = "1gbit"
lan_delay = "1ms"
[[sites]]
name = "ap-south"
nodes = 2
lan_bw = "1gbit"
[[wan]]
between = ["us-east", "eu-west"]
bw = "100mbit"
delay = "40ms"
[[wan]]
between = ["us-east", "ap-south"]
bw = "50mbit"
delay = "90ms"
reverse = { bw = "20mbit" }
[[wan]]
between = ["eu-west", "ap-south"]
bw = "100mbit"
delay = "60ms"
[nodes.3]
bw = "10mbit"
compute_scale = 1.5
"""


def _d(rate: float, delay: float = 0.0) -> DirectionSpec:
    return DirectionSpec(rate_bps=rate, delay_s=delay)


def _file(tmp_path, text: str):
    path = tmp_path / "topo.toml"
    path.write_text(text)
    return path


def test_star_is_one_switch_with_the_uplink_delay_between_two_nodes():
    topo = star(4, _d(100 * MBIT, 0.02), _d(50 * MBIT))
    assert topo.switches == ("s0",) and topo.node_count == 4
    assert topo.path(0, 3) == (Hop("n0", True), Hop("n3", False))
    assert topo.one_way_delay_s(0, 3) == pytest.approx(0.02)
    assert topo.bottleneck_bps(0, 3) == 50 * MBIT


def test_three_sites_file_paths_delays_and_asymmetric_trunk(tmp_path):
    topo = load_topology(_file(tmp_path, THREE_SITES))
    assert topo.kind == "file" and topo.groups() == {"us-east": [0, 1], "eu-west": [2, 3], "ap-south": [4, 5]}
    assert topo.path(0, 4) == (Hop("n0", True), Hop("us-east--ap-south", True), Hop("n4", False))
    assert topo.one_way_delay_s(0, 4) == pytest.approx(0.09)
    assert topo.one_way_delay_s(4, 0) == pytest.approx(0.09)  # reverse names only its rate: it keeps the delay
    assert topo.bottleneck_bps(0, 4) == 50 * MBIT and topo.bottleneck_bps(4, 0) == 20 * MBIT
    assert topo.one_way_delay_s(2, 0) == pytest.approx(0.041)  # eu-west's lan_delay sits on its nodes' uplinks
    assert topo.one_way_delay_s(0, 2) == pytest.approx(0.040)
    assert topo.access_link(3).forward.rate_bps == 10 * MBIT and topo.nodes[3].compute_scale == 1.5
    assert topo.bottleneck_bps(0, 3) == 10 * MBIT


def test_racks_oversubscribe_the_uplinks_and_route_through_the_spine():
    topo = racks(2, 4, _d(GBIT), _d(GBIT), oversubscription=4)
    assert {t.name: t.forward.rate_bps for t in topo.trunks} == {"rack0--spine": GBIT, "rack1--spine": GBIT}
    assert [h.link for h in topo.path(0, 7)] == ["n0", "rack0--spine", "rack1--spine", "n7"]
    assert [h.link for h in topo.path(0, 3)] == ["n0", "n3"]


def test_sites_preset_joins_every_pair():
    topo = uniform_sites(3, 2, _d(GBIT), _d(GBIT), _d(100 * MBIT, 0.03))
    assert len(topo.trunks) == 3 and topo.one_way_delay_s(1, 5) == pytest.approx(0.03)
    assert {frozenset((t.a, t.b)) for t in topo.trunks} == {
        frozenset(p) for p in (("site0", "site1"), ("site0", "site2"), ("site1", "site2"))
    }


def test_rank_orders_place_ranks_site_by_site_interleaved_or_listed():
    topo = uniform_sites(2, 3, _d(GBIT), _d(GBIT), _d(100 * MBIT))
    assert place(topo) == (0, 1, 2, 3, 4, 5)
    assert place(topo, "interleaved") == (0, 3, 1, 4, 2, 5)
    assert place(topo, parse_rank_order("5,4,3,2,1,0")) == (5, 4, 3, 2, 1, 0)
    with pytest.raises(PlacementError, match="every node 0-5 once"):
        place(topo, (0, 0, 1, 2, 3, 4))
    with pytest.raises(PlacementError, match="--rank-order"):
        parse_rank_order("random")


SITES_AB = '[[sites]]\nname="a"\nnodes=2\nlan_bw="1gbit"\n[[sites]]\nname="b"\nnodes=2\nlan_bw="1gbit"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SITES_AB + '[[wan]]\nbetween=["a","c"]\nbw="1gbit"\n', "unknown site 'c'"),
        (SITES_AB, "the pair a / b is not listed"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\n[[wan]]\nbetween=["b","a"]\nbw="1gbit"\n', "listed twice"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="100gbit"\n', "between 10mbit and 10gbit"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\ndelay="-5ms"\n', "between 0 and 1s"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\nreverse={delay="2s"}\n', "between 0 and 1s"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\n[nodes.4]\nbw="10mbit"\n', "there is no node 4"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\n[nodes.x]\nbw="10mbit"\n', "there is no node x"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="1gbit"\n[nodes.0]\ncompute_scale=0\n', "compute_scale"),
        (SITES_AB + '[[wan]]\nbetween=["a","b"]\nbw="fast"\n', "cannot read rate"),
        ('[[sites]]\nname="a"\nnodes=1\nlan_bw="1gbit"\n', "at least 2"),
        ("[[sites]\n", "invalid TOML"),
        ("nodes = 3\n", "nodes"),
        ("", "either [[sites]]"),
        ('[racks]\nracks=2\nnodes_per_rack=2\nbw="1gbit"\noversubscription=0.5\n', "oversubscription"),
        ('[[sites]]\nname="../x"\nnodes=2\nlan_bw="1gbit"\n', "name"),
    ],
)
def test_bad_topology_files_are_one_line(tmp_path, text, message):
    with pytest.raises(TopologyError) as err:
        load_topology(_file(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_topology_file_must_be_a_small_regular_utf8_file(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(TopologyError, match="not a regular file"):
        load_topology(fifo)  # must not block
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe[[sites]]")
    with pytest.raises(TopologyError, match="not UTF-8"):
        load_topology(tmp_path / "bin.toml")
    with pytest.raises(TopologyError, match="cannot be read"):
        load_topology(tmp_path / "missing.toml")


def test_a_disconnected_graph_is_refused():
    up = _d(GBIT)
    nodes = (NodeSpec(name="n0", switch="a"), NodeSpec(name="n1", switch="b"))
    links = (
        LinkSpec(name="n0", a="n0", b="a", forward=up, reverse=up),
        LinkSpec(name="n1", a="n1", b="b", forward=up, reverse=up),
    )
    with pytest.raises(ValueError, match="not connected"):
        Topology(kind="file", nodes=nodes, switches=("a", "b"), links=links)
