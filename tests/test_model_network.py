"""The step on a network graph: the star's numbers exactly, and each per-hop term against a hand-built equivalent."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from netbench.model.calibration import Calibration
from netbench.model.collectives import Link
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.network import GraphModel, _link_bytes, direction_name
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.model.steptime import Scenario
from netbench.shapes import ParamShape, resolve_shapes
from netbench.tcp import STOCK_LINUX
from netbench.topology import DirectionSpec, place, star
from netbench.topology.presets import NodeOverride, Site, Wan, sites

MBIT, GBIT = 1e6, 1e9
CALIB = Calibration(
    software_overhead_s=1.3e-4,
    software_overhead_by_collective={"all_gather": 2.1e-4},
    encode_s_per_param={s: 3e-9 for s in ("dct", "random", "striding", "lowrank", "full", "diloco")},
    decode_s_per_param={"dct": 2e-9},
)
SHAPES = resolve_shapes("gpt2-small:blocks=2")
MATRIX = [ParamShape("w", (1024, 1024))]


def _d(rate: float, delay: float = 0.0) -> DirectionSpec:
    return DirectionSpec(rate_bps=rate, delay_s=delay)


def graph_step(topology, scheme="full", shapes=MATRIX, order="topology", layout="flat", **scenario):
    model = GraphModel(topology, place(topology, order))
    sc = Scenario(workers=topology.node_count, **scenario)
    return model.estimate(build_scheme(scheme, SchemeSettings()), shapes, sc, CALIB, layout)


def star_step(nodes, up, down=None, delay=0.0, scheme="full", shapes=MATRIX, **scenario):
    sc = Scenario(workers=nodes, up_bps=up, down_bps=down or up, delay_s=delay, **scenario)
    return GraphModel.star_step(build_scheme(scheme, SchemeSettings()), shapes, sc, CALIB)


def two_sites(per_site: int, wan: DirectionSpec, reverse: DirectionSpec | None = None):
    lan = _d(GBIT)
    return sites([Site("a", per_site, lan, lan), Site("b", per_site, lan, lan)], [Wan("a", "b", wan, reverse)])


@pytest.mark.parametrize("scheme", ["full", "dct", "random", "striding", "diloco", "lowrank", "mtdao", "onebit"])
def test_a_uniform_star_gives_exactly_the_star_model(scheme):
    for nodes, delay, (up, down), cc in itertools.product(
        (2, 3, 8), (0.0, 0.004, 0.04), ((100 * MBIT,) * 2, (GBIT, 50 * MBIT)), ("cubic", "bbr")
    ):
        tcp = STOCK_LINUX.model_copy(update={"cc": cc})
        ref = star_step(nodes, up, down, delay, scheme, SHAPES, compute_s=0.05, tcp=tcp)
        got = graph_step(star(nodes, _d(up, delay), _d(down)), scheme, SHAPES, compute_s=0.05, tcp=tcp).step
        assert (got.step_time_s, got.comm_time_s, got.compression_time_s, got.wire) == (
            ref.step_time_s,
            ref.comm_time_s,
            ref.compression_time_s,
            ref.wire,
        ), (nodes, delay, up, down, cc)


def test_a_uniform_model_prices_plans_range_in_closed_form_and_builds_its_star_only_for_the_per_link_view():
    scheme = build_scheme("dct", SchemeSettings())
    huge = Scenario(workers=100_000, up_bps=GBIT, down_bps=GBIT, delay_s=0.01, compute_s=0.05)
    model = GraphModel.uniform(huge.machines, GBIT, GBIT, 0.01)
    assert model.step(scheme, SHAPES, huge, CALIB).step_time_s > 0
    assert not hasattr(model, "routes")  # no graph of 100,000 nodes was built
    small = Scenario(workers=3, up_bps=GBIT, down_bps=50 * MBIT, delay_s=0.004, compute_s=0.05)
    uniform = GraphModel.uniform(3, GBIT, 50 * MBIT, 0.004)
    viewed = uniform.estimate(scheme, SHAPES, small, CALIB)
    assert viewed.step.step_time_s == uniform.step(scheme, SHAPES, small, CALIB).step_time_s
    assert set(viewed.link_bytes) == {f"n{i} {d}" for i in range(3) for d in ("up", "down")}


@pytest.mark.parametrize("g", [2, 4, 8])
def test_machines_of_g_accelerators_on_a_uniform_star_give_exactly_the_closed_form(g):
    for machines, delay, scheme in itertools.product((2, 3), (0.0, 0.004), ("full", "dct", "diloco")):
        sc = Scenario(
            workers=machines * g,
            gpus_per_node=g,
            intra_bits_per_s=10 * GBIT,
            up_bps=GBIT,
            down_bps=50 * MBIT,
            delay_s=delay,
            compute_s=0.05,
        )
        built = build_scheme(scheme, SchemeSettings())
        ref = GraphModel.star_step(built, SHAPES, sc, CALIB)
        topology = star(machines, _d(GBIT, delay), _d(50 * MBIT))
        got = GraphModel(topology, place(topology, "topology")).estimate(built, SHAPES, sc, CALIB).step
        assert got.intra_time_s > 0 and (got.scenario.workers, got.scenario.gpus_per_node) == (machines * g, g)
        assert (got.step_time_s, got.comm_time_s, got.intra_time_s, got.compression_time_s, got.wire) == (
            ref.step_time_s,
            ref.comm_time_s,
            ref.intra_time_s,
            ref.compression_time_s,
            ref.wire,
        ), (machines, delay, scheme)


def test_a_tiny_all_reduce_on_a_uniform_star_is_exactly_the_stars_chain():
    tiny = [ParamShape("w", (1,))]
    for nodes, delay in itertools.product((2, 3, 8), (0.0, 0.003)):
        assert (
            graph_step(star(nodes, _d(100 * MBIT, delay), _d(100 * MBIT)), shapes=tiny).step.step_time_s
            == star_step(nodes, 100 * MBIT, delay=delay, shapes=tiny).step_time_s
        )


def test_ring_hops_that_cross_one_wan_link_share_its_rate():
    """Interleaved over two sites every ring hop crosses the WAN link: two hops each way, 50 Mbit/s each."""
    topo = two_sites(2, _d(100 * MBIT))
    shared = graph_step(topo, order="interleaved")
    assert shared.step.comm_time_s == pytest.approx(star_step(4, 50 * MBIT).comm_time_s, rel=1e-12)
    assert shared.bottleneck.text.startswith("the a to b link carries 2 ring hops")
    site_by_site = graph_step(topo)  # one hop each way: the WAN's whole rate
    assert site_by_site.step.comm_time_s == pytest.approx(star_step(4, 100 * MBIT).comm_time_s, rel=1e-12)
    # bytes per link direction: the data of the hops crossing it and the ACKs of those coming back
    assert shared.link_bytes["a to b"] == pytest.approx(2 * star_step(4, 50 * MBIT).tx.total, rel=1e-12)
    assert shared.link_bytes["n0 up"] == pytest.approx(star_step(4, 50 * MBIT).tx.total, rel=1e-12)


def test_an_all_to_all_over_two_sites_puts_every_crossing_pair_on_the_wan():
    """2 x 2 nodes: each node sends a quarter of its buffer to each of 3 peers, so 4 of the 12 flows cross each WAN
    direction (a whole buffer's worth) where one ring hop would carry three quarters of it, and 3 leave each node."""
    topo = two_sites(2, _d(10 * MBIT))
    model = GraphModel(topo, place(topo, "topology"))
    mesh = model.flat.for_kind("all_to_all")
    assert mesh is model.flat.mesh and model.flat.for_kind("all_gather") is model.flat
    trunks = {link.name for link in topo.trunks}
    assert sorted(n for h, n in mesh.data.items() if h.link in trunks) == [4, 4]
    assert {n for h, n in mesh.data.items() if h.link not in trunks} == {3}
    ex = Exchange("all_to_all", 1 << 20)
    framing, scenario = Framing(), Scenario(workers=4)

    def priced(graph: GraphModel):
        rings = graph.flat.for_kind("all_to_all")
        return rings.call_cost(ex, rings.prices(), 0.0, framing, STOCK_LINUX, 0.0, 0.0, 0.0)

    # the star's uplinks as fast as the sites' LANs, so that neither prices a fan-out's probes (they wait in the uplink)
    on_star = priced(GraphModel(star(4, _d(GBIT), _d(10 * MBIT)), range(4)))
    assert priced(model).transfer_s == pytest.approx(4 / 3 * on_star.transfer_s, rel=1e-12)
    assert mesh.carries(next(h for h in mesh.data if h.link in trunks)) == "4 all-to-all flows"
    # bytes: a WAN direction carries 4 flows' data and the ACKs of the 4 coming back, an uplink 3 of each
    even = two_sites(2, _d(GBIT))
    loads = _link_bytes(GraphModel(even, place(even, "topology")).flat, [ex], scenario)
    named = {direction_name(even, h): b for h, b in loads.items()}
    assert named["a to b"] == pytest.approx(4 / 3 * named["n0 up"], rel=1e-12)
    assert named["n0 up"] == pytest.approx(_a2a_tx(ex, scenario), rel=1e-12)


def test_an_all_to_alls_flows_grouped_by_class_count_every_ordered_pair_on_its_own_path():
    """Three sites of 3, 2 and 4 nodes, one node with a slow uplink: the mesh prices a few class pairs, and each
    direction's data and ACK counts are those of all 72 ordered pairs routed one by one."""
    lan = _d(GBIT)
    topo = sites(
        [Site("a", 3, lan, lan), Site("b", 2, lan, lan), Site("c", 4, lan, lan)],
        [Wan("a", "b", _d(10 * MBIT)), Wan("b", "c", _d(20 * MBIT))],
        {4: NodeOverride(up=_d(10 * MBIT))},
    )
    model = GraphModel(topo, place(topo, "interleaved"))
    mesh = model.flat.mesh
    nodes = range(topo.node_count)
    data, acks = Counter(), Counter()
    for a, b in itertools.permutations(nodes, 2):
        data.update(model.routes.path(a, b))
        acks.update(model.routes.path(b, a))
    assert (dict(mesh.data), dict(mesh.acks)) == (dict(data), dict(acks))
    assert len(mesh.rings) == 14  # classes a, b, c and b's slow node: 16 pairs, less b and the slow one to themselves
    assert mesh.share == 1 / 8


def _a2a_tx(ex: Exchange, scenario: Scenario) -> float:
    """One node's all-to-all wire bytes out (its data and the ACKs of what it receives), as the star prices it."""
    from netbench.model.steptime import call_cost

    link = Link(GBIT, GBIT, 0.0)
    return call_cost(ex, 4, link, scenario.framing, "ring").tx.total


def test_one_slow_access_link_paces_the_ring():
    lan = _d(100 * MBIT)
    topo = sites([Site("s0", 4, lan, lan)], [], {3: NodeOverride(up=_d(10 * MBIT))})
    got = graph_step(topo)
    assert got.step.comm_time_s == pytest.approx(star_step(4, 10 * MBIT, 100 * MBIT).comm_time_s, rel=1e-12)
    assert got.bottleneck.name == "n3 up"


def test_asymmetric_delays_pace_the_pipeline_by_their_mean_and_the_chain_by_its_sum():
    """Forward 10 ms, back 30 ms: a pipelined call pays 20 ms a delay; a tiny all-reduce sums forward delays."""
    topo = two_sites(1, _d(100 * MBIT, 0.010), _d(100 * MBIT, 0.030))
    assert graph_step(topo).step.comm_time_s == pytest.approx(
        star_step(2, 100 * MBIT, delay=0.020).comm_time_s, rel=1e-12
    )
    lan = _d(GBIT)
    delays = {("a", "b"): 0.010, ("b", "c"): 0.020, ("a", "c"): 0.040}  # ring a -> b -> c -> a: 10, 20, 40 ms forward
    three = sites(
        [Site(s, 1, lan, lan) for s in "abc"], [Wan(x, y, _d(GBIT, d), _d(GBIT, 0.001)) for (x, y), d in delays.items()]
    )
    tiny = graph_step(three, shapes=[ParamShape("w", (1,))]).step
    # 2(P - 1) = 4 consecutive hops: every hop twice but the cheapest pair (b->c 20 ms + c->a 1 ms reverse of a-c)
    forward = [0.010, 0.020, 0.001]  # a->b, b->c, c->a (a-c's reverse direction)
    chain = 2 * sum(forward) - min(forward[i] + forward[(i + 1) % 3] for i in range(3))
    same_rates = star_step(3, GBIT, shapes=[ParamShape("w", (1,))]).comm_time_s  # 4 x (overhead + 4 bytes' transfer)
    assert tiny.comm_time_s == pytest.approx(chain + same_rates, rel=1e-9)


def test_a_straggler_stretches_local_work_and_is_named():
    lan = _d(GBIT)
    topo = sites([Site("s0", 4, lan, lan)], [], {2: NodeOverride(compute_scale=2.0)})
    got = graph_step(topo, compute_s=1.0)
    ref = star_step(4, GBIT, compute_s=1.0)
    assert got.step.step_time_s == pytest.approx(
        ref.step_time_s + 1.0 + ref.compression_time_s, rel=1e-12
    )  # compute and codec twice
    assert got.bottleneck.kind == "node" and got.bottleneck.name == "n2"
    assert got.bottleneck.text == f"node n2 computes 2.0x: {100 * 2.0 / got.step.step_time_s:.0f} % of the step"


def test_sharding_within_sites_is_the_lan_ring_plus_one_wan_ring_per_shard():
    """2 sites x 2 nodes: all-reduce of the whole gradient on each LAN, then two rings of 2 ranks with half each,
    both across the one WAN link (50 Mbit/s apiece)."""
    topo = two_sites(2, _d(100 * MBIT))
    got = graph_step(topo, layout="sites")
    intra = star_step(2, GBIT).comm_time_s
    inter = star_step(2, 50 * MBIT, shapes=[ParamShape("w", (512, 1024))]).comm_time_s
    assert got.step.intra_time_s == pytest.approx(intra, rel=1e-12)
    assert got.step.comm_time_s == pytest.approx(intra + inter, rel=1e-12)
    assert got.step.scenario.machines == 2 and got.step.scenario.gpus_per_node == 2
    assert graph_step(topo).step.comm_time_s > got.step.comm_time_s  # the flat ring moves 3/2 of the WAN's bytes


def test_ring_paths_are_the_topologys_own_routes(tmp_path):
    """The model routes between switches on a one-node-per-switch copy; it must take the emulator's paths."""
    from netbench.model.rings import Routes
    from netbench.topology import racks, uniform_sites

    for topo in (
        uniform_sites(3, 3, _d(GBIT), _d(GBIT), _d(100 * MBIT, 0.01)),
        racks(3, 2, _d(GBIT), _d(GBIT), 2.0),
        two_sites(2, _d(100 * MBIT), _d(50 * MBIT, 0.02)),
    ):
        routes = Routes(topo)
        for src, dst in itertools.permutations(range(topo.node_count), 2):
            assert routes.path(src, dst) == topo.path(src, dst)


def test_the_rings_link_is_the_stars_link_and_a_shared_wan_on_a_graph():
    star_model = GraphModel(star(4, _d(100 * MBIT, 0.004), _d(50 * MBIT)), range(4))
    assert star_model.ring_link() == (50 * MBIT, pytest.approx(0.008))  # min(up, down), twice the one-way delay
    topo = two_sites(2, _d(20 * MBIT, 0.03))
    assert GraphModel(topo, place(topo, "topology")).ring_link() == (20 * MBIT, pytest.approx(0.06))  # one hop each way
    assert (
        GraphModel(topo, place(topo, "interleaved")).ring_link()[0] == 10 * MBIT
    )  # every hop crosses: two share each direction


def test_all_reduce_data_runs_to_the_rank_before_and_wan_acks_come_back_on_the_lan_senders_uplink():
    """gloo's all-reduce sends rank r's data to rank r - 1: n0's uplink carries its WAN data and the few ACKs of a
    LAN flow whose frames arrive back-to-back; n1's carries LAN data and the ACKs of the 10 Mbit/s WAN flow."""
    got = graph_step(two_sites(2, _d(10 * MBIT)), compute_s=0.05)
    assert got.link_bytes["n1 up"] > got.link_bytes["n0 up"] * 1.005
    # the WAN's a-to-b direction: n0's data to n3 and the ACKs of n2's data to n1, as many bytes as n1's uplink
    assert got.link_bytes["a to b"] == pytest.approx(got.link_bytes["n1 up"], rel=1e-4)


def _gossip_on_two_sites(steps):
    """4 nodes, 2 a site, behind a 10 Mbit/s WAN: gossip (a sync every 4 steps) priced at the syncs among ``steps``."""
    topo = two_sites(2, _d(10 * MBIT, 0.01))
    model = GraphModel(topo, place(topo, "topology"))
    scheme = build_scheme("gossip", SchemeSettings(sync_every=4))
    return model.estimate(scheme, MATRIX, Scenario(workers=4, compute_s=0.05), CALIB, steps=steps).step


def _syncs_pairing(within_sites: bool) -> int:
    """The first sync (1-based step) whose seeded pairs all stay inside a site, or all cross the WAN."""
    from netbench.declarations.gossip_spec import pairs

    for step in range(4, 4000, 4):
        inside = [a // 2 == b // 2 for a, b in pairs(4, step, 0)]
        if all(inside) if within_sites else not any(inside):
            return step
    raise AssertionError("no such sync among the first thousand")


def test_gossip_prices_each_sync_at_the_pairs_the_replicator_draws_for_it():
    """A sync whose pairs stay inside the sites moves nothing across the WAN and takes the LAN's time; one that pairs
    across it takes the WAN's; a run of both is priced at their mean."""
    inside, across = _syncs_pairing(True), _syncs_pairing(False)
    lan, wan = _gossip_on_two_sites([inside]), _gossip_on_two_sites([across])
    assert wan.comm_time_s > 20 * lan.comm_time_s
    mixed = _gossip_on_two_sites([inside, across, inside + 1])  # inside + 1 is no sync: left out
    assert mixed.comm_time_s == pytest.approx((lan.comm_time_s + wan.comm_time_s) / 2, rel=1e-12)
    assert mixed.tx.total == pytest.approx(wan.tx.total, rel=0.01)  # the bytes a node sends: the same either way


def test_gossip_without_a_runs_steps_is_priced_at_the_pairings_expectation():
    """On 4 nodes a third of the uniform pairings stay inside the sites: the expectation lies near a third of the way
    from the WAN's sync to the LAN's."""
    lan = _gossip_on_two_sites([_syncs_pairing(True)]).comm_time_s
    wan = _gossip_on_two_sites([_syncs_pairing(False)]).comm_time_s
    expected = _gossip_on_two_sites(None).comm_time_s
    assert (wan - expected) / (wan - lan) == pytest.approx(1 / 3, abs=0.05)


def test_a_gossip_pairs_first_exchange_in_the_run_starts_from_tcps_initial_window():
    """Over a 1 Gbit/s, 50 ms WAN a pair that exchanged before sends with the window its bursts grew; a pair's first
    exchange (the run's first sync pairs every rank for the first time) grows its window from 10 segments, a round
    trip per doubling: the same pairs cost several round trips more the first time than at their next sync."""
    from netbench.declarations.gossip_spec import pairs
    from netbench.model.pairings import canonical

    topo = two_sites(2, _d(GBIT, 0.05))
    model = GraphModel(topo, place(topo, "topology"))
    scheme = build_scheme("gossip", SchemeSettings(sync_every=4))
    first = 4  # the run's first sync: every pair is new
    again = next(s for s in range(8, 4000, 4) if canonical(pairs(4, s, 0)) == canonical(pairs(4, first, 0)))

    def call_s(step: int) -> float:
        est = model.estimate(scheme, MATRIX, Scenario(workers=4, compute_s=0.05), CALIB, steps=[step]).step
        return est.comm_time_s * 4

    assert call_s(first) > call_s(again) + 3 * 0.1


def test_a_periodic_syncs_first_call_of_the_run_starts_its_rings_from_tcps_initial_window():
    """DiLoCo syncing every 3 steps between two sites over a 1 Gbit/s, 50 ms WAN: its rings carry data for the first
    time at the run's first sync, which grows the window from 10 segments (several round trips more than a warm
    sync). Steps holding that sync price it apart, as its share of their syncs; steps after it, and a plan (no
    steps), price every sync warm."""
    topo = two_sites(2, _d(GBIT, 0.05))
    model = GraphModel(topo, place(topo, "topology"))
    scheme = build_scheme("diloco", SchemeSettings(sync_every=3))

    def wan_s(steps) -> float:
        est = model.estimate(scheme, MATRIX, Scenario(workers=4, compute_s=0.05), CALIB, "sites", steps=steps).step
        return (est.comm_time_s - est.intra_time_s) * 3  # one sync

    warm, first = wan_s([6]), wan_s([3])
    assert first > warm + 3 * 0.1
    assert wan_s(None) == pytest.approx(warm, rel=1e-12)
    assert wan_s([4, 5, 6, 7, 8, 9]) == pytest.approx(warm, rel=1e-12)  # the first sync (step 3) was not measured
    assert wan_s([3, 4, 5, 6, 7, 8]) == pytest.approx((first + warm) / 2, rel=1e-12)


def test_the_bounding_direction_is_the_wan_between_sites_and_an_access_link_on_a_star():
    from netbench.model.step import bounding_direction

    topology = two_sites(2, _d(10 * MBIT))
    found = graph_step(topology, "onebit", SHAPES, compute_s=0.05)
    rate, nbytes = bounding_direction(found, GraphModel(topology, place(topology, "topology")))
    assert rate == 10 * MBIT and nbytes == max(found.link_bytes.values())
    flat = star(4, _d(100 * MBIT), _d(100 * MBIT))
    on_star = graph_step(flat, "onebit", SHAPES, compute_s=0.05)
    assert bounding_direction(on_star, GraphModel(flat, place(flat, "topology")))[0] == 100 * MBIT


def test_a_gossip_pair_that_rested_over_other_syncs_restarts_its_window_under_cubic_not_under_bbr():
    """Over a 10 Mbit/s, 50 ms WAN a pair whose connection rested over another sync's 2 s exchange has idled far more
    than an RTO: cubic (slow start after idle) restarts it from 10 segments and the sync costs more than a round trip
    beyond one whose pairs met at the sync before; bbr keeps its window, and both syncs cost the same."""
    from netbench.declarations.gossip_spec import seeded_pairs
    from netbench.model.pairings import sync_pairings

    topo = two_sites(2, _d(10 * MBIT, 0.05))
    model = GraphModel(topo, place(topo, "topology"))
    scheme = build_scheme("gossip", SchemeSettings(sync_every=4))
    exchange = scheme.exchanges(MATRIX, 2)[0]

    def since(step: int) -> int:
        return next(s for _, _, s in sync_pairings(seeded_pairs, scheme.config, 4, exchange, [step]))

    across = [s for s in range(8, 400, 4) if not all(a // 2 == b // 2 for a, b in pairs_of(s))]
    rested = next(s for s in across if since(s) >= 2)
    again = next(s for s in across if since(s) == 1)

    def call_s(step: int, cc: str) -> float:
        tcp = STOCK_LINUX.model_copy(update={"cc": cc})
        sc = Scenario(workers=4, compute_s=0.05, tcp=tcp)
        return model.estimate(scheme, MATRIX, sc, CALIB, steps=[step]).step.comm_time_s * 4

    assert call_s(rested, "cubic") > call_s(again, "cubic") + 0.1  # a round trip and more
    assert call_s(rested, "bbr") == pytest.approx(call_s(again, "bbr"), rel=1e-9)


def pairs_of(step: int) -> list[tuple[int, int]]:
    from netbench.declarations.gossip_spec import pairs

    return pairs(4, step, 0)
