"""Gossip (NoLoCo): seeded pairs, the outer step against the reference's rule on 4 gloo ranks, the replica sketch and
the drift computed from it, and the model's pairwise exchange (one hop whatever the node count; pairs that cross one
WAN share it)."""

from __future__ import annotations

import math

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.gossip_spec import pairs, partner
from netbench.declarations.registry import declared_payload
from netbench.model.collectives import Link, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.network import GraphModel
from netbench.model.rings import RingSet
from netbench.model.steptime import call_cost
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator
from netbench.replicators.gossip import SKETCH_SIZE, sketch_signs
from netbench.rundir.drift import drift, drift_figures, sketch_text, sketch_values
from netbench.tcp import STOCK_LINUX
from netbench.topology.link import DirectionSpec
from netbench.topology.options import topology_from_options

SHAPES = [(13, 7), (40,), (4, 3, 5)]
H, LR, ALPHA, BETA = 2, 0.1, 0.7, 0.5
WORLD = 4


@pytest.mark.parametrize("world", [2, 4, 6, 8])
def test_every_rank_has_one_partner_drawn_alike_from_seed_and_step(world):
    drawn = pairs(world, 10, 0)
    assert sorted(r for pair in drawn for r in pair) == list(range(world))
    assert pairs(world, 10, 0) == drawn  # every rank draws the same
    assert all(partner(partner(r, world, 10, 0), world, 10, 0) == r for r in range(world))
    if world > 2:
        assert len({tuple(map(frozenset, pairs(world, 10 * s, 0))) for s in range(1, 20)}) > 1  # pairs change
        assert pairs(world, 10, 1) != drawn or pairs(world, 20, 1) != pairs(world, 20, 0)  # the seed matters


def test_of_an_odd_number_of_ranks_one_sits_each_sync_out():
    drawn = pairs(5, 4, 0)
    alone = set(range(5)) - {r for pair in drawn for r in pair}
    assert len(drawn) == 2 and len(alone) == 1
    assert partner(alone.pop(), 5, 4, 0) in range(5)


def test_payload_is_anchor_and_delta_whatever_the_node_count():
    shapes = param_shapes([torch.zeros(s) for s in SHAPES])
    numel = sum(s.numel for s in shapes)
    for world in (2, 4, 6):
        decl = declared_payload(shapes, ReplicatorConfig(name="gossip", sync_every=H), world)
        assert (decl.collective, decl.bytes_per_step, decl.period) == ("pairwise", 8 * numel, H)
    bf16 = declared_payload(shapes, ReplicatorConfig(name="gossip", grad_dtype="bf16"), 4)
    assert bf16.bytes_per_step == 4 * numel


def _initial() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=gen) for s in SHAPES]


def _grads(rank: int, step: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(100 * rank + step)
    return [torch.randn(s, generator=gen) for s in SHAPES]


def _gossip_body(rank: int, world: int, syncs: int) -> dict:
    """Rank body: ``syncs`` cycles of H plain SGD steps and a sync; the parameters and stats of each step."""
    params = [torch.nn.Parameter(t.clone()) for t in _initial()]
    config = ReplicatorConfig(
        name="gossip", sync_every=H, optimizer="sgd", lr=LR, outer_lr=ALPHA, outer_momentum=BETA, seed=3
    )
    rep = build_replicator(params, config)
    out = {"params": [], "bytes": [], "sketch": []}
    for step in range(H * syncs):
        for p, g in zip(params, _grads(rank, step)):
            p.grad = g
        stats = rep.step()
        out["params"].append(torch.cat([p.detach().flatten() for p in params]))
        out["bytes"].append(stats.payload_bytes)
        out["sketch"].append(tuple(torch.as_tensor(stats.sketch).tolist()))
    return out


def _reference(world: int, syncs: int) -> list[list[torch.Tensor]]:
    """jkolehm/noloco SparseOptimizerC's rule on flat tensors, step by step: p_old, momentum m, for each pair
    m <- m + (beta - 1) m + alpha mean(p - p_old) + alpha (mean(p_old) - p_old); p_old += m; p = p_old."""
    start = torch.cat([t.flatten() for t in _initial()])
    anchor = [start.clone() for _ in range(world)]
    momentum = [torch.zeros_like(start) for _ in range(world)]
    local = [start.clone() for _ in range(world)]
    history: list[list[torch.Tensor]] = [[] for _ in range(world)]
    for step in range(H * syncs):
        for r in range(world):
            local[r] = local[r] - LR * torch.cat([g.flatten() for g in _grads(r, step)])
        if (step + 1) % H == 0:
            for a, b in pairs(world, step + 1, 3):
                mean_old = (anchor[a] + anchor[b]) / 2
                mean_delta = ((local[a] - anchor[a]) + (local[b] - anchor[b])) / 2
                for r in (a, b):
                    momentum[r] = BETA * momentum[r] + ALPHA * mean_delta + ALPHA * (mean_old - anchor[r])
                    anchor[r] = anchor[r] + momentum[r]
                    local[r] = anchor[r].clone()
        for r in range(world):
            history[r].append(local[r].clone())
    return history


@pytest.fixture(scope="module")
def four_ranks() -> list[dict]:
    return run_ranks(_gossip_body, WORLD, 3, timeout=60)


def test_outer_step_follows_the_reference_rule_on_four_ranks(four_ranks):
    expected = _reference(WORLD, 3)
    for rank, got in enumerate(four_ranks):
        for step, (mine, theirs) in enumerate(zip(got["params"], expected[rank])):
            assert torch.allclose(mine, theirs, atol=1e-5), f"rank {rank} step {step + 1}"
    last = [got["params"][-1] for got in four_ranks]
    assert any(not torch.equal(last[0], other) for other in last[1:])  # replicas differ: nobody averages with all


def test_only_syncs_send_and_each_records_a_sketch(four_ranks):
    numel = sum(math.prod(s) for s in SHAPES)
    for got in four_ranks:
        assert got["bytes"] == [0, 8 * numel] * 3
        assert [len(s) for s in got["sketch"]] == [0, SKETCH_SIZE] * 3
    spread = drift([got["sketch"][-1] for got in four_ranks])
    assert spread is not None and spread > 0


def test_the_sketch_keeps_distances_on_average():
    """Squared sketch distance / squared distance over many vector pairs averages to 1 (a CountSketch)."""
    n = 5000
    signs = sketch_signs(n, torch.device("cpu"))
    gen = torch.Generator().manual_seed(7)

    def sketch(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([part.sum() for part in torch.tensor_split(x * signs, SKETCH_SIZE)])

    ratios = []
    for _ in range(50):
        x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
        ratios.append(float((sketch(x) - sketch(y)).square().sum() / (x - y).square().sum()))
    assert 0.9 < sum(ratios) / len(ratios) < 1.1
    assert torch.equal(signs, sketch_signs(n, torch.device("cpu")))  # the same on every rank


def test_drift_is_zero_for_agreeing_replicas_and_relative_otherwise():
    assert drift([(3.0, 4.0), (3.0, 4.0)]) == 0.0
    assert drift([(3.0, 4.0), (3.0, -4.0)]) == pytest.approx(8 / 5)
    assert drift([(1.0, 0.0)]) is None
    cells = [sketch_text((3.0, 4.0)), sketch_text((3.0, 4.0)), None, sketch_text((0.0, 5.0)), sketch_text((3.0, 4.0))]
    assert sketch_values(float("nan")) == () and sketch_values(cells[0]) == (3.0, 4.0)
    figures = drift_figures([1, 1, 2, 3, 3], cells)
    assert figures["replica_drift"] == pytest.approx(math.dist((0, 5), (3, 4)) / 5 / 2)  # median of 0 and one sync
    assert figures["replica_drift_last"] == pytest.approx(math.dist((0, 5), (3, 4)) / 5)
    assert drift_figures([1, 2], [None, None]) == {}


def test_pairwise_is_one_hop_of_the_bytes_sent_whatever_the_node_count():
    for n in (2, 4, 64):
        p = pattern("pairwise", "ring", 1e6, n)
        assert (p.hops, p.payload_out, p.critical_bytes) == (1, 1e6, 1e6)
    link = Link(1e8, 1e8, 0.05, one_way_s=0.05)
    small = call_cost(Exchange("pairwise", 1000), 6, link, Framing(), "ring", STOCK_LINUX)
    assert small.time_s == pytest.approx(0.1, rel=0.01)  # the receiver's ready notification, then the data
    big = call_cost(Exchange("pairwise", 10_000_000), 6, link, Framing(), "ring", STOCK_LINUX)
    ring = call_cost(Exchange("all_reduce", 5_000_000), 6, link, Framing(), "ring", STOCK_LINUX)
    assert big.time_s < ring.time_s  # the same bytes a node, one hop against a ring's ten


def test_pairs_across_one_wan_share_it():
    access = DirectionSpec(rate_bps=1e9)
    topology = topology_from_options("sites", 4, access, access, sites=2, wan_bw="100mbit", wan_delay="20ms")
    graph = GraphModel(topology, [0, 1, 2, 3])
    exchange = Exchange("pairwise", 10_000_000)

    def seconds(drawn: list[tuple[int, int]]) -> float:
        rings = RingSet(graph.routes, [list(p) for p in drawn])
        return rings.call_cost(exchange, rings.prices(), 0.0, Framing(), STOCK_LINUX, 0.0, 0.0, 0.0).time_s

    across, within, one = seconds([(0, 2), (1, 3)]), seconds([(0, 1), (2, 3)]), seconds([(0, 2)])
    assert within < one < across
    assert across == pytest.approx(2 * one, rel=0.1)  # two pairs' data through one WAN direction


def test_the_model_prices_the_pairs_the_replicator_exchanges_with():
    """The model's pairing of a sync (:func:`netbench.model.pairings.sync_pairings`, from the declaration) pairs each
    rank with the partner the replicator sends to at that sync."""
    from netbench.declarations.gossip_spec import SPEC
    from netbench.model.pairings import sync_pairings

    config = ReplicatorConfig(name="gossip", sync_every=3, seed=7)
    for ranks in (2, 4, 5, 6):
        for step in (3, 6, 9, 30):
            ((weight, pairs, _),) = sync_pairings(
                SPEC.pairing, config, ranks, Exchange("pairwise", 1, period=3), [step]
            )
            assert weight == 1.0
            for a, b in pairs:
                assert partner(a, ranks, step, 7) == b and partner(b, ranks, step, 7) == a
            paired = {r for p in pairs for r in p}
            assert all(partner(r, ranks, step, 7) == r for r in set(range(ranks)) - paired)
