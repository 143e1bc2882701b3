"""A pairwise exchange replayed with a clock per node (:mod:`netbench.model.node_clocks`): pure model, no run."""

from __future__ import annotations

import pytest

from netbench.model.calibration import Calibration
from netbench.model.network import GraphModel
from netbench.model.node_clocks import PairPrice, replay_clocks
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.model.steptime import Scenario
from netbench.shapes import ParamShape
from netbench.topology import DirectionSpec, place
from netbench.topology.presets import Site, Wan, sites

WAN = "wan"


def _priced(wire_s: float, links=(WAN,), fixed_s: float = 0.0):
    def price(_i, _pair):
        return PairPrice(fixed_s, wire_s, frozenset(links))

    return price


def test_a_lagging_node_delays_its_next_partner_and_the_lag_carries_on():
    """Rank 0 computes 1 s more before the first sync: its partner 1 waits for it; at the next sync 1 is late for
    rank 2, which waits in turn, though 1 and 2 computed alike."""
    local = {0: [2.0, 1.0], 1: [1.0, 1.0], 2: [1.0, 1.0], 3: [1.0, 1.0]}
    syncs = {0: [(0, 1), (2, 3)], 1: [(1, 2), (0, 3)]}
    price = _priced(0.5, links=())  # no shared link: each pair alone
    steps = replay_clocks(local, syncs, price)
    # sync 0: (0, 1) from 2.0 to 2.5, (2, 3) from 1.0 to 1.5; sync 1: 1 at 3.5 and 2 at 2.5 enter at 3.5, done 4.0
    assert steps[1] * 2 == pytest.approx(4.0)
    assert steps[2] * 2 == pytest.approx(4.0)
    even = replay_clocks({r: [1.0, 1.0] for r in local}, syncs, price)
    assert all(v * 2 == pytest.approx(3.0) for v in even.values())


def test_two_pairs_overlapping_half_their_time_share_the_link_for_that_half():
    """Two pairs across one link, each 1 s of wire alone: entering together they share it throughout (2 s each);
    one entering when the other is half done shares the other half: the first ends at 1.5 s, the second 0.5 s later
    than alone."""
    syncs = {0: [(0, 1), (2, 3)]}
    price = _priced(1.0)
    together = replay_clocks({r: [0.0] for r in range(4)}, syncs, price)
    assert together == pytest.approx({r: 2.0 for r in range(4)})
    apart = replay_clocks({0: [0.0], 1: [0.0], 2: [0.5], 3: [0.5]}, syncs, price)
    # 0-0.5: pair (0, 1) alone, half done; 0.5-1.5: both at half rate, (0, 1) done at 1.5; (2, 3) has 0.5 left, alone
    assert apart[0] == pytest.approx(1.5)
    assert apart[2] == pytest.approx(2.0)


def test_pairs_on_links_of_their_own_do_not_share_and_the_fixed_time_is_not_shared():
    syncs = {0: [(0, 1), (2, 3)]}
    price = {(0, 1): PairPrice(0.2, 1.0, frozenset({"a"})), (2, 3): PairPrice(0.2, 1.0, frozenset({"b"}))}
    got = replay_clocks({r: [0.0] for r in range(4)}, syncs, lambda _i, p: price[p])
    assert got == pytest.approx({r: 1.2 for r in range(4)})


def test_a_rank_that_starts_late_is_waited_for_and_its_mean_step_counts_from_its_own_start():
    got = replay_clocks({0: [1.0], 1: [1.0]}, {0: [(0, 1)]}, _priced(0.0, links=()), start_s={0: 0.0, 1: 0.5})
    assert got == pytest.approx({0: 1.5, 1: 1.0})


def _two_sites_gossip():
    lan, wan = DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=10e6)
    topo = sites([Site("a", 2, lan, lan), Site("b", 2, lan, lan)], [Wan("a", "b", wan)])
    return GraphModel(topo, place(topo, "topology")), build_scheme("gossip", SchemeSettings(sync_every=4))


def test_a_pair_across_the_wan_shares_it_and_a_pair_inside_a_site_crosses_no_wan():
    """The graph model's price for a pair: alone, the WAN's pair has a wire time of its 1 Mbyte at 10 Mbit/s; a sync
    whose two pairs cross the WAN, entering together, takes what the model prices that sync at today."""
    model, scheme = _two_sites_gossip()
    shapes = [ParamShape("w", (256, 256))]
    scenario = Scenario(workers=4, compute_s=0.05)
    calib = Calibration(software_overhead_s=1.3e-4)
    prices = model.pair_prices(scheme, shapes, scenario, calib, list(range(5, 41)))
    across = [(s, ps) for s, ps in prices.items() if all(a // 2 != b // 2 for a, b in ps)]
    inside = [(s, ps) for s, ps in prices.items() if all(a // 2 == b // 2 for a, b in ps)]
    assert across and inside
    step, pairs = next((s, ps) for s, ps in across if all(p.wire_s > 0 for p in ps.values()))
    p = next(iter(pairs.values()))
    assert 0.8 * 8 * 256 * 256 * 4 * 2 / 10e6 < p.wire_s < 1.5 * 8 * 256 * 256 * 4 * 2 / 10e6
    shared = set.intersection(*(set(q.links) for q in pairs.values()))
    assert shared  # the WAN's directions
    assert all(not (set(q.links) & shared) for q in inside[0][1].values())
    syncs = {0: list(pairs)}
    clocks = replay_clocks({r: [0.0] for r in range(4)}, syncs, lambda _i, q: pairs[q])
    today = model.estimate(scheme, shapes, scenario, calib, steps=[step]).step.comm_time_s * 4
    assert max(clocks.values()) == pytest.approx(today, rel=1e-3)
