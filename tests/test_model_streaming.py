"""The model's reading of Streaming DiLoCo's declaration: fragments on their own steps, overlapped communication,
and the bytes of quantized outer exchanges."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.exchange import Exchange, communicating_share, rests
from netbench.model.network import GraphModel
from netbench.model.schemes import scheme_from_config
from netbench.model.steptime import Scenario
from netbench.shapes import resolve_shapes
from netbench.topology import DirectionSpec
from netbench.topology.options import topology_from_options

SHAPES = resolve_shapes("llama:d_model=256,layers=4,ffn=512,vocab=1000")
NUMEL = sum(s.numel for s in SHAPES)


def streaming(**settings) -> ReplicatorConfig:
    return ReplicatorConfig(name="streaming", sync_every=8, **settings)


def step(config: ReplicatorConfig, compute_s: float = 0.05, **scenario):
    sc = Scenario(workers=2, up_bps=10e6, down_bps=10e6, delay_s=0.02, compute_s=compute_s, **scenario)
    return GraphModel.star_step(scheme_from_config(config), SHAPES, sc, Calibration())


def test_staggered_exchanges_each_follow_a_rest_of_their_own_and_same_step_ones_do_not():
    staggered = [Exchange("all_reduce", 10, period=8, offset=o) for o in (2, 4, 6, 0)]
    assert rests(staggered, 0.3) == [0.3, 0.3, 0.3, 0.3]
    same_step = [Exchange("all_reduce", 10, period=p) for p in (8, 8, 16)]
    assert rests(same_step, 0.3) == [0.3, 0.0, 0.0]


def test_the_share_of_steps_that_communicate():
    assert communicating_share([Exchange("all_gather", 10)]) == 1.0
    assert communicating_share([Exchange("all_reduce", 10, period=8)]) == 1 / 8
    assert communicating_share([Exchange("all_reduce", 10, period=8, offset=o) for o in (4, 0)]) == 2 / 8
    assert communicating_share([Exchange("all_reduce", 10, period=p) for p in (4, 8, 8)]) == 1 / 4  # mtdao's meet


def test_one_fragment_is_priced_as_diloco():
    dense = GraphModel.star_step(
        scheme_from_config(ReplicatorConfig(name="diloco", sync_every=8)),
        SHAPES,
        Scenario(workers=2, up_bps=10e6, down_bps=10e6, delay_s=0.02, compute_s=0.05),
        Calibration(),
    )
    one = step(streaming())
    assert one.payload_bytes_per_step == dense.payload_bytes_per_step == NUMEL * 4 / 8
    assert one.step_time_s == pytest.approx(dense.step_time_s)


def test_fragments_split_the_bytes_and_add_a_latency_each():
    one, four = step(streaming()), step(streaming(fragments=4))
    assert four.payload_bytes_per_step == one.payload_bytes_per_step  # the same model, once per cycle
    assert max(e.bytes_per_step for e in four.exchanges) < 0.4 * NUMEL * 4  # the peak: one fragment's bytes
    assert four.comm_time_s > one.comm_time_s  # four collectives' latencies instead of one


def test_overlap_hides_communication_behind_tau_steps_of_local_work_and_keeps_the_bytes():
    base = streaming(fragments=2)
    exposed = step(base, compute_s=0.05)
    hidden = step(base.model_copy(update={"fragment_sync_delay": 3}), compute_s=0.05)
    assert hidden.tx.total == pytest.approx(exposed.tx.total)
    per_fragment_s = exposed.comm_time_s * 8 / 2  # every fragment's collective, not averaged
    expected = 2 * max(0.0, per_fragment_s - 3 * 0.05) / 8
    assert hidden.comm_time_s == pytest.approx(expected, rel=1e-6)
    covered = step(base.model_copy(update={"fragment_sync_delay": 3}), compute_s=per_fragment_s)
    assert covered.comm_time_s == 0.0


def test_quantized_outer_exchanges_are_ring_all_reduces_of_the_packed_bytes():
    q = step(streaming(fragments=2, quant_bits=4, quant_block=1024))
    assert all(e.collective == "all_reduce" for e in q.exchanges)
    assert q.payload_bytes_per_step == pytest.approx((NUMEL / 2 + 4 * (-(-NUMEL // 2 // 1024) * 2)) / 8, rel=0.01)


def test_the_graph_model_reads_the_same_fragments():
    access = DirectionSpec(rate_bps=1e9)
    topology = topology_from_options("sites", 2, access, access, sites=2, wan_bw="50mbit", wan_delay="20ms")
    graph = GraphModel(topology, list(range(2)))
    sc = Scenario(workers=2, compute_s=0.05)
    flat = graph.estimate(scheme_from_config(streaming(fragments=2)), SHAPES, sc, Calibration()).step
    lagged = graph.estimate(
        scheme_from_config(streaming(fragments=2, fragment_sync_delay=3)), SHAPES, sc, Calibration()
    ).step
    assert lagged.tx.total == pytest.approx(flat.tx.total)
    assert lagged.comm_time_s < flat.comm_time_s


def _bench_streaming():
    """scripts/bench_streaming.py, whose per-sync byte windows the docs quote."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_streaming.py"
    spec = importlib.util.spec_from_file_location("bench_streaming", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_closing_barrier_is_gloos_zero_byte_ops_per_round():
    """The bytes a run's tail holds besides its last exchange: gloo's dissemination barrier, ceil(log2 N) rounds of
    a 0-byte message each way. At 2 nodes the send and receive peer are one, so each node sends three op frames (data
    op, send-ready, recv-ready: 66 bytes of headers and a 48-byte preamble each) and no pure ACK, the 342 bytes a
    capture shows; beyond, a round whose peers differ also draws ACKs, so the bytes grow faster than the rounds."""
    from netbench.model.framing import Framing

    barrier = _bench_streaming().closing_barrier_bytes
    framing = Framing()
    op_frame = framing.header_bytes + framing.gloo_preamble_bytes
    assert barrier(framing, 1) == 0
    assert barrier(framing, 2) == 3 * op_frame
    distinct_round = barrier(framing, 4) - barrier(framing, 2)  # 4 nodes: d = 1 (distinct peers), d = 2 (one peer)
    assert distinct_round > barrier(framing, 2)
    assert barrier(framing, 3) == 2 * distinct_round  # both rounds of 3 nodes have distinct peers


def test_a_two_node_fragment_sync_pays_the_late_ranks_first_half():
    """The ranks launch an overlapped fragment sync as their own steps end, apart by however far they drifted, so
    the model prices its 2-node all-gather as gloo's skewed ring of two: the early rank's halves leave one half's
    transfer later. The same call in lockstep, or on 4 nodes (a connection per neighbour), does not pay it."""
    from dataclasses import replace

    from netbench.model.collectives import Link
    from netbench.model.framing import Framing
    from netbench.model.steptime import call_cost

    sync = Exchange(collective="all_gather", bytes_per_step=120_000, period=4, overlap_steps=1)
    lockstep = replace(sync, overlap_steps=0)
    link = Link(10e6, 10e6, 0.0, one_way_s=0.0)
    overlapped, aligned = (call_cost(ex, 2, link, Framing(), "ring").time_s for ex in (sync, lockstep))
    half_s = 60_000 * 8 / 10e6
    assert overlapped - aligned == pytest.approx(half_s, rel=0.1)
    four = [call_cost(ex, 4, link, Framing(), "ring").time_s for ex in (sync, lockstep)]
    assert four[0] == four[1]


def test_a_periodic_sync_follows_free_steps_unless_a_waited_for_collective_precedes_it():
    """The ranks of DiLoCo or SparseLoCo run H - 1 steps of local work at their own pace before the outer sync, so
    they enter it apart; a collective the ranks wait for on the step before lines them up again."""
    from netbench.model.exchange import with_free_runs

    (outer,) = with_free_runs((Exchange("all_gather", 10, period=8),))
    assert outer.follows_free_steps and outer.runs_free
    (every_step,) = with_free_runs((Exchange("all_gather", 10),))
    assert not every_step.runs_free
    halves = with_free_runs(tuple(Exchange("all_gather", 10, period=8, offset=o) for o in (4, 0)))
    assert all(ex.follows_free_steps for ex in halves)  # three free steps before each
    every_step_fragments = with_free_runs(tuple(Exchange("all_gather", 10, period=8, offset=o) for o in range(8)))
    assert not any(ex.follows_free_steps for ex in every_step_fragments)
    beside_a_dense_step = with_free_runs((Exchange("all_reduce", 10), Exchange("all_gather", 10, period=8)))
    assert not beside_a_dense_step[1].follows_free_steps
    overlapped_neighbour = with_free_runs(
        tuple(Exchange("all_gather", 10, period=8, offset=o, overlap_steps=1) for o in range(8))
    )
    assert all(ex.runs_free for ex in overlapped_neighbour)  # launched, not waited for, on the step before


def test_a_two_node_outer_gather_after_free_steps_pays_the_late_ranks_first_half():
    """SparseLoCo's outer all-gather on 2 nodes is priced as gloo's skewed ring of two, as an overlapped fragment
    sync is; the same gather every step is not."""
    from netbench.model.collectives import Link
    from netbench.model.framing import Framing
    from netbench.model.steptime import call_cost

    (outer,) = scheme_from_config(ReplicatorConfig(name="sparseloco", sync_every=8)).exchanges(SHAPES, 2)
    assert outer.collective == "all_gather" and outer.follows_free_steps
    aligned = Exchange("all_gather", outer.bytes_per_step)
    link = Link(10e6, 10e6, 0.0, one_way_s=0.0)
    free, lockstep = (call_cost(ex, 2, link, Framing(), "ring").time_s for ex in (outer, aligned))
    half_s = outer.bytes_per_step / 2 * 8 / 10e6
    assert free - lockstep == pytest.approx(half_s, rel=0.1)
