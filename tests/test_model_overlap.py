"""The pipelined step form, checked by hand, and its use in run predictions."""

from __future__ import annotations

import pytest

from netbench.emulation.spec import ClusterSpec
from netbench.model.calibration import Calibration
from netbench.model.overlap import ENCODE_SHARE, MIN_BUCKET_BYTES, auto_bucket_mb, bucket_mb_for, pipelined_step_s
from netbench.orchestrator.prediction import predict
from netbench.orchestrator.config import RunConfig
from netbench.replicators import declared_payload
from netbench.replicators.config import ReplicatorConfig
from netbench.workloads.config import WorkloadConfig
from netbench.orchestrator.prediction import workload_shapes


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
    # A large per-bucket latency (c 0.3 of C 0.6 on two buckets, CPU 0.6): max(0.6, 0.2+0.3+0.2, 0.4+0.3+0.1, 0.2+0.6+0.1) = 0.9.
    assert pipelined_step_s(0.4, 0.2, 0.6, 2, None) == pytest.approx(0.9)


def test_backward_overlap_by_hand() -> None:
    from netbench.model.overlap import backward_overlapped_step_s

    # compute 1.0 (backward 0.6), sync 2.0 of which codec 0.4: 1.6 of wire exposed.
    assert backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 1) == pytest.approx(3.0)  # one bucket: ready when backward ends
    assert backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 4) == pytest.approx(3.0 - 0.45)  # 3/4 of backward hides wire
    # Little wire left to hide (sync 0.5, codec 0.4): at most that 0.1.
    assert backward_overlapped_step_s(1.0, 0.6, 0.5, 0.4, 4) == pytest.approx(1.4)
    with pytest.raises(ValueError):
        backward_overlapped_step_s(1.0, 0.6, 2.0, 0.4, 0)


def test_predict_applies_backward_overlap_only_where_the_worker_does() -> None:
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    cal = Calibration(compression_s_per_param={"dct": 1e-6})
    work = WorkloadConfig(kind="transformer")
    shapes = workload_shapes(work, 2)
    steps = {}
    for on in (True, False):
        for kind in ("transformer", "shapes"):
            rep = ReplicatorConfig(name="dct", bucket_mb=0.01, overlap_backward=on)
            cfg = RunConfig(cluster=cluster, replicator=rep, workload=work.model_copy(update={"kind": kind}), capture=False)
            steps[on, kind] = predict(cfg, shapes, 0.3, cal, cpus=2).step_time_s
    assert steps[True, "transformer"] < steps[False, "transformer"]
    assert steps[True, "shapes"] == pytest.approx(steps[False, "shapes"]) == pytest.approx(steps[False, "transformer"])


def test_auto_bucket_fills_the_pipe_and_caps_the_count() -> None:
    assert auto_bucket_mb(100e6, 0.04) == pytest.approx(0.25)  # 12.5 MB/s x 40 ms / 2
    assert auto_bucket_mb(10e6, 0.0) == pytest.approx(MIN_BUCKET_BYTES / 1e6)
    assert auto_bucket_mb(10e6, 0.0, payload_bytes=8_000_000) == pytest.approx(1.0)  # at most 8 buckets
    # A fast link carries more during a collective's fixed costs than small payloads hold: one bucket.
    assert auto_bucket_mb(1e9, 0.0, payload_bytes=700_000, nodes=2) == pytest.approx(0.75)
    assert auto_bucket_mb(100e6, 0.0, payload_bytes=700_000, nodes=4) == pytest.approx(0.225)
    assert bucket_mb_for("random", 10e6, 0.0, 700_000, 2) == 0.0  # nothing worth hiding: one bucket
    assert bucket_mb_for("dct", 10e6, 0.0, 700_000, 2) == auto_bucket_mb(10e6, 0.0, 700_000, nodes=2)


def test_predict_uses_the_pipelined_form() -> None:
    work = WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256", compute_ms=50)
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    cal = Calibration(compression_s_per_param={"dct": 1e-6})
    shapes = workload_shapes(work, 2)
    plain_rep = ReplicatorConfig(name="dct")
    piped_rep = ReplicatorConfig(name="dct", bucket_mb=0.01)
    n = declared_payload(shapes, piped_rep, 2).collectives_per_step
    assert n > 1
    plain = predict(RunConfig(cluster=cluster, replicator=plain_rep, workload=work, capture=False), shapes, 0.05, cal, cpus=2)
    piped = predict(RunConfig(cluster=cluster, replicator=piped_rep, workload=work, capture=False), shapes, 0.05, cal, cpus=2)
    codec = plain.compression_time_s
    # comm of the pipelined config counts n calls (more latency terms) before the overlap
    unpiped_piped = predict(RunConfig(cluster=cluster, replicator=piped_rep.model_copy(update={"bucket_mb": 0.0}),
                                      workload=work, capture=False), shapes, 0.05, cal, cpus=2)
    assert piped.step_time_s < plain.step_time_s
    # Before the emulator's tbf credit, the step is compute + the hand formula on the n-call comm.
    from netbench.model.overlap import pipelined
    from netbench.orchestrator.prediction import scenario_for
    from netbench.model.schemes import scheme_from_config
    from netbench.model.steptime import estimate

    raw = estimate(scheme_from_config(piped_rep), shapes, scenario_for(cluster, 0.05, cal), cal)
    from netbench.replicators.pipeline import behind_for

    want = 0.05 + pipelined_step_s(codec / 2, codec / 2, raw.comm_time_s, n, behind_for("dct"))
    assert pipelined(raw, piped_rep, shapes).step_time_s == pytest.approx(want)
    assert want < raw.step_time_s
    assert plain.step_time_s == pytest.approx(unpiped_piped.step_time_s)
    assert ENCODE_SHARE == 0.5
