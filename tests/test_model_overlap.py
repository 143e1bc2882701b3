"""The pipelined step form, checked by hand, and its use in run predictions."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.emulation.spec import ClusterSpec
from netbench.model.calibration import Calibration
from netbench.model.overlap import (
    ENCODE_SHARE,
    MIN_BUCKET_BYTES,
    auto_bucket_mb,
    bucket_mb_for,
    concurrent_step_s,
    pipelined_step_s,
)
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import predict, workload_shapes
from netbench.workloads.config import WorkloadConfig


def test_pipelined_step_by_hand() -> None:
    # E 0.4, D 0.2, C 0.6. One bucket: 1.2 (the sum).
    assert pipelined_step_s(0.4, 0.2, 0.6, 1) == pytest.approx(1.2)
    # Two: e 0.2, d 0.1, c 0.3 -> fill 0.2 + 1 x max(0.3, 0.3) + drain 0.3 + 0.1 = 0.9.
    assert pipelined_step_s(0.4, 0.2, 0.6, 2) == pytest.approx(0.9)
    # Four: 0.1 + 3 x 0.15 + 0.15 + 0.05 = 0.75; many: towards max(E + D, C) = 0.6.
    assert pipelined_step_s(0.4, 0.2, 0.6, 4) == pytest.approx(0.75)
    assert pipelined_step_s(0.4, 0.2, 0.6, 1000) == pytest.approx(0.6, abs=1e-3)
    # CPU-bound (E + D = 0.6 > C = 0.2), two buckets: 0.2 + 0.3 + 0.1 + 0.1 = 0.7.
    assert pipelined_step_s(0.4, 0.2, 0.2, 2) == pytest.approx(0.7)
    with pytest.raises(ValueError):
        pipelined_step_s(1, 1, 1, 0)


def test_pipelined_step_encoding_every_bucket_first_by_hand() -> None:
    # E 0.4, D 0.2, C 0.6, behind None: max(E + D, e + c + D, E + c + d, e + C + d).
    assert pipelined_step_s(0.4, 0.2, 0.6, 1, None) == pytest.approx(1.2)  # one bucket: the sum
    # Two: max(0.6, 0.2 + 0.3 + 0.2, 0.4 + 0.3 + 0.1, 0.2 + 0.6 + 0.1) = 0.9 (the wire in a row).
    assert pipelined_step_s(0.4, 0.2, 0.6, 2, None) == pytest.approx(0.9)
    # CPU-bound (C 0.2), four buckets: max(0.6, 0.1 + 0.05 + 0.2, 0.4 + 0.05 + 0.05, 0.1 + 0.2 + 0.05) = 0.6:
    # every bucket's wire hides behind the other buckets' codec (one behind: 0.1 + 3 x 0.15 + 0.05 + 0.05 = 0.65).
    assert pipelined_step_s(0.4, 0.2, 0.2, 4, None) == pytest.approx(0.6)
    assert pipelined_step_s(0.4, 0.2, 0.2, 4) == pytest.approx(0.65)
    # A large per-bucket latency (c 0.3 of C 0.6 on two buckets, CPU 0.6): max(0.6, 0.2+0.3+0.2, 0.4+0.3+0.1,
    # 0.2+0.6+0.1) = 0.9.
    assert pipelined_step_s(0.4, 0.2, 0.6, 2, None) == pytest.approx(0.9)


def test_concurrent_buckets_by_hand() -> None:
    # E 0.4, D 0.2, latency L 0.4 and transfer W 0.2 over all calls. One bucket: the sum E + L + W + D.
    assert concurrent_step_s(0.4, 0.2, 0.4, 0.2, 1) == pytest.approx(1.2)
    # Four: e 0.1, d 0.05, l 0.1, c = l + W/4 = 0.15:
    # max(E + D 0.6, e + c + D 0.45, E + c + d 0.6, e + l + W + d 0.45) = 0.6 -- the codec alone.
    assert concurrent_step_s(0.4, 0.2, 0.4, 0.2, 4) == pytest.approx(0.6)
    # On one lane the same four calls pay every latency in a row: e + C + d = 0.1 + 0.6 + 0.05 = 0.75.
    assert pipelined_step_s(0.4, 0.2, 0.6, 4, None) == pytest.approx(0.75)
    # Wire-bound (E 0.1, D 0.1, L 0.2, W 1.0), two buckets: c = 0.1 + 0.5;
    # max(0.2, 0.05 + 0.6 + 0.1, 0.1 + 0.6 + 0.05, 0.05 + 0.1 + 1.0 + 0.05) = 1.2: one latency, then the bytes in a row.
    assert concurrent_step_s(0.1, 0.1, 0.2, 1.0, 2) == pytest.approx(1.2)
    assert pipelined_step_s(0.1, 0.1, 1.2, 2, None) == pytest.approx(1.3)  # one lane: both latencies
    with pytest.raises(ValueError):
        concurrent_step_s(1, 1, 1, 1, 0)


def test_lanes_carry_two_buckets_each_up_to_the_cap() -> None:
    from netbench.declarations.buckets import MAX_LANES, lanes_for, travel_at_once
    from netbench.declarations.pipeline_policy import ENCODE_FIRST, READY, behind_for

    assert [lanes_for(n) for n in (1, 2, 3, 4, 5, 16)] == [1, 1, 2, 2, 3, 8]
    assert lanes_for(100) == MAX_LANES
    # past 2 x MAX_LANES calls some queue: workers and model then take the queued schedule and form alike
    assert travel_at_once(16, lanes_for(16)) and not travel_at_once(17, lanes_for(17)) and not travel_at_once(3, 1)
    assert behind_for(True) is ENCODE_FIRST and behind_for(False) == READY


def test_predict_queues_the_buckets_of_a_replication_subgroup() -> None:
    """With several accelerators per node the replication group is a subgroup: one lane, READY, every latency in a
    row.
    """
    from netbench.declarations.pipeline_policy import READY
    from netbench.model.network import GraphModel
    from netbench.model.overlap import pipelined
    from netbench.model.schemes import scheme_from_config
    from netbench.model.steptime import Scenario

    cal = Calibration(encode_s_per_param={"dct": 1e-6})
    rep = ReplicatorConfig(name="dct", bucket_mb=0.01)
    shapes = workload_shapes(WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256"), 2)
    n = declared_payload(shapes, rep, 2).collectives_per_step
    assert n > 2
    one = Scenario(workers=2, up_bps=100e6, down_bps=100e6, delay_s=0.02)
    est = GraphModel.star_step(scheme_from_config(rep), shapes, one, cal)
    codec, lat = est.compression_time_s, est.wire.latency_s
    assert pipelined(est, rep, shapes).step_time_s == pytest.approx(
        concurrent_step_s(codec / 2, codec / 2, lat, est.comm_time_s - lat, n)
    )
    sharded = GraphModel.star_step(
        scheme_from_config(rep),
        shapes,
        Scenario(workers=4, gpus_per_node=2, up_bps=100e6, down_bps=100e6, delay_s=0.02, intra_bits_per_s=100e9),
        cal,
    )
    assert pipelined(sharded, rep, shapes).step_time_s == pytest.approx(
        pipelined_step_s(sharded.compression_time_s / 2, sharded.compression_time_s / 2, sharded.comm_time_s, n, READY)
    )


def test_two_round_buckets_keep_one_latency_per_round() -> None:
    """lowrank pipelined: codec and wire are not overlapped in the model, but with lanes each round's
    buckets travel at once, so of its calls' latency only one call's per round remains."""
    from netbench.model.network import GraphModel
    from netbench.model.overlap import pipelined
    from netbench.model.schemes import scheme_from_config
    from netbench.model.steptime import Scenario

    cal = Calibration(encode_s_per_param={"lowrank": 1e-6})
    rep = ReplicatorConfig(name="lowrank", bucket_mb=0.02)
    shapes = workload_shapes(WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256"), 2)
    payload = declared_payload(shapes, rep, 2)
    calls = sum(p.collectives_per_step for p in payload.parts())
    assert payload.collectives_per_step > 1 and len(payload.parts()) == 2 and calls <= 16
    est = GraphModel.star_step(
        scheme_from_config(rep), shapes, Scenario(workers=2, up_bps=100e6, down_bps=100e6, delay_s=0.02), cal
    )
    got = pipelined(est, rep, shapes)
    assert got.step_time_s == pytest.approx(est.step_time_s - est.wire.latency_s * (1 - 2 / calls))
    assert got.compression_time_s == est.compression_time_s


def test_backward_overlap_by_hand() -> None:
    from netbench.model.overlap import backward_overlapped_step_s

    # compute 1.0 (backward 0.6), sync 2.0 of which codec 0.4: 1.6 of wire exposed.
    assert backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 1) == pytest.approx(
        3.0
    )  # one bucket: ready when backward ends
    assert backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 4) == pytest.approx(3.0 - 0.45)  # 3/4 of backward hides wire
    # Little wire left to hide (sync 0.5, codec 0.4): at most that 0.1.
    assert backward_overlapped_step_s(1.0, 0.6, 0.5, 0.4, 4) == pytest.approx(1.4)
    with pytest.raises(ValueError):
        backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 0)


def test_predict_applies_backward_overlap_only_where_the_worker_does() -> None:
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    cal = Calibration(encode_s_per_param={"dct": 1e-6})
    work = WorkloadConfig(kind="transformer")
    shapes = workload_shapes(work, 2)
    steps = {}
    for on in (True, False):
        for kind in ("transformer", "shapes"):
            rep = ReplicatorConfig(name="dct", bucket_mb=0.01, overlap_backward=on)
            cfg = RunConfig(
                cluster=cluster, replicator=rep, workload=work.model_copy(update={"kind": kind}), capture=False
            )
            steps[on, kind] = predict(cfg, shapes, 0.3, cal, cpus=2).step_time_s
    assert steps[True, "transformer"] < steps[False, "transformer"]
    assert steps[True, "shapes"] == pytest.approx(steps[False, "shapes"]) == pytest.approx(steps[False, "transformer"])


def test_auto_bucket_fills_the_pipe_and_caps_the_count() -> None:
    # Concurrent buckets (a lane per two): the delay does not size them; 12.5 MB/s x 2 ring steps x 3 ms.
    assert auto_bucket_mb(100e6, 0.04) == pytest.approx(0.075)
    assert auto_bucket_mb(100e6, 0.04, concurrent=False) == pytest.approx(0.25)  # queued: 12.5 MB/s x 40 ms / 2
    assert auto_bucket_mb(10e6, 0.0) == pytest.approx(MIN_BUCKET_BYTES / 1e6)
    assert auto_bucket_mb(10e6, 0.0, payload_bytes=8_000_000) == pytest.approx(0.5)  # at most 16 buckets
    # A fast link carries more during a collective's fixed costs than small payloads hold: one bucket.
    assert auto_bucket_mb(1e9, 0.0, payload_bytes=700_000, nodes=2) == pytest.approx(0.75)
    assert auto_bucket_mb(100e6, 0.0, payload_bytes=700_000, nodes=4) == pytest.approx(0.225)
    assert bucket_mb_for("random", 10e6, 0.0, 700_000, 2) == 0.0  # nothing worth hiding: one bucket
    assert bucket_mb_for("dct", 10e6, 0.0, 700_000, 2) == auto_bucket_mb(10e6, 0.0, 700_000, nodes=2)


def test_predict_uses_the_pipelined_form() -> None:
    work = WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256", compute_ms=50)
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    cal = Calibration(encode_s_per_param={"dct": 1e-6})
    shapes = workload_shapes(work, 2)
    plain_rep = ReplicatorConfig(name="dct")
    piped_rep = ReplicatorConfig(name="dct", bucket_mb=0.01)
    n = declared_payload(shapes, piped_rep, 2).collectives_per_step
    assert n > 1
    plain = predict(
        RunConfig(cluster=cluster, replicator=plain_rep, workload=work, capture=False), shapes, 0.05, cal, cpus=2
    )
    piped = predict(
        RunConfig(cluster=cluster, replicator=piped_rep, workload=work, capture=False), shapes, 0.05, cal, cpus=2
    )
    codec = plain.compression_time_s
    # comm of the pipelined config counts n calls (more latency terms) before the overlap
    unpiped_piped = predict(
        RunConfig(
            cluster=cluster, replicator=piped_rep.model_copy(update={"bucket_mb": 0.0}), workload=work, capture=False
        ),
        shapes,
        0.05,
        cal,
        cpus=2,
    )
    assert piped.step_time_s < plain.step_time_s
    # Before the emulator's tbf credit, the step is compute + the hand formula on the n-call comm.
    from netbench.model.network import GraphModel
    from netbench.model.overlap import pipelined
    from netbench.model.schemes import scheme_from_config
    from netbench.orchestrator.prediction import scenario_for

    raw = GraphModel.star_step(scheme_from_config(piped_rep), shapes, scenario_for(cluster, 0.05, cal), cal)
    # one accelerator per node: a lane per two buckets, every bucket encoded first, one latency exposed
    lat = raw.wire.latency_s
    want = 0.05 + concurrent_step_s(codec / 2, codec / 2, lat, raw.comm_time_s - lat, n)
    assert pipelined(raw, piped_rep, shapes).step_time_s == pytest.approx(want)
    assert want < raw.step_time_s
    assert plain.step_time_s == pytest.approx(unpiped_piped.step_time_s)
    assert ENCODE_SHARE == 0.5


def test_a_skew_lag_delays_the_end_of_the_concurrent_step() -> None:
    # wire-bound: e + l + W + d, plus the lag of the late rank's last arrival
    assert concurrent_step_s(0.1, 0.1, 0.2, 1.0, 2, lag_s=0.3) == pytest.approx(1.5)
    # codec-bound (E + D = 2 s): a short lag stays hidden
    assert concurrent_step_s(1.0, 1.0, 0.0, 0.4, 4, lag_s=0.1) == pytest.approx(2.0)
