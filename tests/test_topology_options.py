"""``--topology`` and its preset options to a graph: one function for every command, one line for every mistake."""

from __future__ import annotations

import pytest

from netbench.topology import DirectionSpec, TopologyError
from netbench.topology.options import topology_from_options

ACCESS = DirectionSpec(rate_bps=1e9, delay_s=0.001)
DOWN = DirectionSpec(rate_bps=1e9)


def build(kind: str, nodes: int = 8, **options):
    return topology_from_options(kind, nodes, ACCESS, DOWN, **options)


def test_every_preset_builds_its_graph():
    star = build("star")
    assert star.kind == "star" and star.switches == ("s0",) and star.node_count == 8 and not star.trunks
    assert star.access_link(3).forward == ACCESS and star.access_link(3).reverse == DOWN
    sites = build("sites", sites=2, wan_bw="100mbit", wan_delay="20ms")
    assert sites.groups() == {"site0": [0, 1, 2, 3], "site1": [4, 5, 6, 7]}
    assert sites.one_way_delay_s(0, 4) == pytest.approx(0.021)  # uplink 1 ms + WAN 20 ms
    assert sites.bottleneck_bps(0, 4) == 100e6
    racks = build("racks", racks=2, oversubscription=4)
    assert [t.forward.rate_bps for t in racks.trunks] == [1e9, 1e9]  # 4 nodes x 1gbit / 4


def test_a_preset_setting_left_out_is_its_declared_default():
    assert build("sites", wan_bw="1gbit").groups() == {"site0": [0, 1, 2, 3], "site1": [4, 5, 6, 7]}
    racks = build("racks")
    assert len(racks.groups()) == 2 and [t.forward.rate_bps for t in racks.trunks] == [4e9, 4e9]  # 1:1


def test_sites_without_wan_options_take_their_declared_defaults():
    from netbench.topology.presets import TOPOLOGY
    from netbench.units import parse_rate

    graph = build("sites", nodes=4, sites=2)
    assert graph.trunks and all(t.forward.rate_bps == parse_rate(TOPOLOGY["wan_bw"].default) for t in graph.trunks)


def test_a_file_sets_the_topology(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('[racks]\nracks = 2\nnodes_per_rack = 2\nbw = "1gbit"\n')
    assert build(str(path)).node_count == 4


@pytest.mark.parametrize(
    ("kind", "nodes", "options", "needle"),
    [
        ("sites", 7, {"sites": 3, "wan_bw": "1gbit"}, "--sites: 7 nodes"),
        ("sites", 8, {"sites": 0, "wan_bw": "1gbit"}, "--sites"),
        ("sites", 8, {"sites": 2, "wan_bw": "5zbit"}, "--wan-bw"),
        ("sites", 8, {"sites": 2, "wan_bw": "100gbit"}, "--wan-bw"),
        ("sites", 8, {"sites": 2, "wan_bw": "1gbit", "wan_delay": "5s"}, "--wan-delay"),
        ("sites", 8, {"sites": 2, "wan_bw": "1gbit", "racks": 2}, "--racks"),
        ("star", 8, {"wan_bw": "1gbit"}, "--wan-bw"),
        ("star", 8, {"sites": 2}, "--sites"),
        ("racks", 8, {"racks": 3}, "--racks"),
        ("racks", 8, {"racks": 2, "oversubscription": 0.5}, "--oversubscription"),
        ("racks", 8, {"racks": 2, "oversubscription": float("nan")}, "--oversubscription"),
        ("racks", 8, {"racks": 8, "oversubscription": 1000}, "--oversubscription"),  # a 1 Mbit/s rack uplink
        ("racks", 8, {"racks": 2, "wan_delay": "5ms"}, "--wan-delay"),
        ("/nonexistent/topology.toml", 8, {}, "/nonexistent/topology.toml"),
        ("/nonexistent/topology.toml", 8, {"sites": 2}, "--sites"),
    ],
)
def test_bad_combinations_are_one_line_naming_the_option(kind, nodes, options, needle):
    with pytest.raises(TopologyError) as exc:
        topology_from_options(kind, nodes, ACCESS, DOWN, **options)
    assert needle in str(exc.value) and "\n" not in str(exc.value)
