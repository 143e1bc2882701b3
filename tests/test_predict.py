"""Predictions for runs: measured local work in, the model's step out, with the emulator's own effects."""

from __future__ import annotations

import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.model.calibration import Calibration
from netbench.model.gloo_tcp import KernelTimers
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.emulated_host import bucket_credit_s, cpu_share
from netbench.orchestrator.prediction import (
    KernelClock,
    kernel_clock,
    local_time_s,
    predict,
    predict_run,
    rank_local_s,
    workload_shapes,
)
from netbench.rundir.runjson import recorded_dilation
from netbench.workloads.config import WorkloadConfig

SHAPES = WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256", compute_ms=50)


def config(name: str = "full", nodes: int = 2, rate: float = 100e6) -> RunConfig:
    cluster = ClusterSpec(nodes=nodes, up={"rate_bps": rate}, down={"rate_bps": rate})
    return RunConfig(cluster=cluster, replicator=ReplicatorConfig(name=name), workload=SHAPES, capture=False)


def steps(compute: list[float], apply: list[float], warmup: int = 1) -> pd.DataFrame:
    rows = [
        {"rank": r, "step": s, "warmup": s < warmup, "compute_s": c, "apply_s": a}
        for r in (0, 1)
        for s, (c, a) in enumerate(zip(compute, apply))
    ]
    return pd.DataFrame(rows)


def test_local_time_is_compute_plus_apply_after_warmup_at_the_slowest_node() -> None:
    frame = steps([9.0, 0.05, 0.05, 0.06], [1.0, 0.01, 0.01, 0.01])
    frame.loc[frame["rank"] == 1, "compute_s"] += 0.01  # rank 1 is slower
    # rank 1 after warm-up: compute 0.06, 0.06, 0.07 + apply 0.01 -> median 0.07 (rank 0: 0.06); warm-up's 10 s ignored
    assert local_time_s(frame) == pytest.approx(0.07)
    assert local_time_s(pd.DataFrame()) is None


def test_local_time_is_the_slowest_node_of_each_step() -> None:
    """Nodes that take turns being slow: each node's median is 0.05 s, but every step waited 0.08 s for one of them."""
    frame = steps([0.0, 0.05, 0.08, 0.05, 0.08, 0.05], [0.0] * 6)
    frame.loc[frame["rank"] == 1, "compute_s"] = [0.0, 0.08, 0.05, 0.08, 0.05, 0.05]
    # per step (after warm-up) the slower node: 0.08, 0.08, 0.08, 0.08, 0.05 -> median 0.08 (per-node medians: 0.05)
    assert local_time_s(frame) == pytest.approx(0.08)


def periodic_steps(rank0: list[float], rank1: list[float], calls_every: int, warmup: int = 2) -> pd.DataFrame:
    """Two ranks' local work per step (compute only), a collective on every ``calls_every``-th step (1-based)."""
    rows = [
        {
            "rank": r,
            "step": s,
            "warmup": s < warmup,
            "compute_s": c,
            "apply_s": 0.0,
            "collectives": int((s + 1) % calls_every == 0),
        }
        for r, local in enumerate((rank0, rank1))
        for s, c in enumerate(local)
    ]
    return pd.DataFrame(rows)


def test_local_time_between_syncs_is_the_slowest_rank_over_each_stretch() -> None:
    """Ranks that meet every 2 steps and take turns being slow within each stretch: every step has a slow rank
    (0.3 s), yet each rank's stretch takes 0.4 s, which is what the call at its end waits for."""
    frame = periodic_steps([9.0, 9.0, 0.1, 0.3, 0.1, 0.3], [9.0, 9.0, 0.3, 0.1, 0.3, 0.1], calls_every=2)
    assert local_time_s(frame) == pytest.approx(0.2)
    # a pairing (gossip) meets one partner per call: the slowest rank of each step, as a synchronous step's
    assert local_time_s(frame, meet_at_calls=False) == pytest.approx(0.3)


def test_local_time_between_syncs_is_a_mean_over_whole_stretches() -> None:
    """The stretches' mean, as a periodic run's step is: one slow stretch counts; the steps after the last call (no
    call ends them yet) do not."""
    frame = periodic_steps([0.0, 0.0, 0.1, 0.1, 0.5, 0.5, 0.1, 0.1, 9.0], [0.0] * 9, calls_every=2)
    assert local_time_s(frame) == pytest.approx((0.2 + 1.0 + 0.2) / 6)


def test_local_time_of_a_replicator_that_calls_every_step_is_the_median_step() -> None:
    frame = periodic_steps([0.0, 0.1, 0.1, 0.5], [0.0, 0.2, 0.1, 0.1], calls_every=1, warmup=1)
    assert local_time_s(frame) == pytest.approx(0.2)  # slowest per step: 0.2, 0.1, 0.5 -> median 0.2


def test_cpu_share_only_beyond_the_cores() -> None:
    assert cpu_share(2, 2) == 1.0 and cpu_share(4, 2) == 2.0 and cpu_share(3, 8) == 1.0


def test_bucket_credit_is_the_refilled_burst() -> None:
    ten = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    # 10mbit: burst is 10 frames (15140 B), 12.1 ms of line rate, once refilled
    assert bucket_credit_s(ten, idle_s=0.05, tx_bytes=1e6) == pytest.approx(15140 * 8 / 10e6)
    assert bucket_credit_s(ten, idle_s=0.05, tx_bytes=5000) == pytest.approx(5000 * 8 / 10e6)  # small sends: all of it
    assert bucket_credit_s(ten, idle_s=0.001, tx_bytes=1e6) == pytest.approx(0.001)  # 1 ms idle refills 1 ms worth
    gig = ClusterSpec(nodes=2, up={"rate_bps": 1e9}, down={"rate_bps": 1e9})
    assert bucket_credit_s(gig, idle_s=0.05, tx_bytes=1e9) == pytest.approx(2e-3)  # 2 ms of line rate


def test_bucket_credit_is_the_slowest_shapers_on_the_path() -> None:
    gig = ClusterSpec(nodes=4, up={"rate_bps": 1e9}, down={"rate_bps": 1e9})
    # a 10mbit WAN behind 1gbit access links: its 10-frame bucket, 12.1 ms, not the access link's 0.3 ms of 39 kB
    wan = (10e6, 39e3)
    assert bucket_credit_s(gig, idle_s=0.05, tx_bytes=34e3, through=wan) == pytest.approx(15140 * 8 / 10e6)
    assert bucket_credit_s(gig, idle_s=0.05, tx_bytes=34e3, through=(10e6, 5e3)) == pytest.approx(5e3 * 8 / 10e6)
    # a direction as fast as the access link leaves the access link's credit
    assert bucket_credit_s(gig, idle_s=0.05, tx_bytes=34e3, through=(1e9, 1e6)) == bucket_credit_s(
        gig, idle_s=0.05, tx_bytes=34e3
    )


def test_prediction_adds_measured_local_work_to_model_comm_and_compression() -> None:
    calib = Calibration(source="measured", encode_s_per_param={"dct": 1e-8})
    shapes = workload_shapes(SHAPES)
    two = predict(config("dct", 2), shapes, 0.05, calib, cpus=2)
    four = predict(config("dct", 4), shapes, 0.05, calib, cpus=2)
    assert two.compression_time_s == pytest.approx(393_856 * 1e-8)
    assert four.compression_time_s == pytest.approx(2 * two.compression_time_s)  # 4 nodes on 2 cores
    assert two.step_time_s == pytest.approx(0.05 + two.compression_time_s + two.comm_time_s)


def test_predict_run_reports_errors_instead_of_raising() -> None:
    frame = steps([0.05, 0.05], [0.01, 0.01])
    out = predict_run(config(), frame, n_params=393_856, calibration=Calibration(), cpus=2)
    assert (
        out["step_time_s"] > 0.06
        and out["payload_bytes_per_step"] == 393_856 * 4
        and out["calibration"]["source"] == "defaults"
    )
    assert "error" in predict_run(config(), frame, n_params=5, calibration=Calibration())
    assert predict_run(config(), pd.DataFrame(), calibration=Calibration()) == {"error": "no measured steps"}


def test_encode_and_decode_are_predicted_separately_per_param_and_per_tensor() -> None:
    calib = Calibration(
        source="measured",
        encode_s_per_param={"dct": 2e-8},
        decode_s_per_param={"dct": 1e-8},
        encode_s_per_tensor={"dct": 1e-4},
        decode_s_per_tensor={"dct": 5e-5},
    )
    shapes = workload_shapes(SHAPES)  # 393,856 parameters in len(shapes) tensors
    assert calib.encode_decode_s("dct", 393_856, len(shapes)) == pytest.approx(
        (393_856 * 2e-8 + len(shapes) * 1e-4, 393_856 * 1e-8 + len(shapes) * 5e-5)
    )
    frame = steps([0.05, 0.05, 0.05], [0.01, 0.01, 0.01])
    out = predict_run(config("dct", 2), frame, calibration=calib, cpus=2)
    enc, dec = calib.encode_decode_s("dct", 393_856, len(shapes))
    assert out["compress_time_s"] == pytest.approx(enc) and out["decode_time_s"] == pytest.approx(dec)
    assert out["encode_decode_time_s"] == pytest.approx(enc + dec)
    assert out["step_time_s"] == pytest.approx(out["local_time_s"] + enc + dec + out["comm_time_s"])
    four = predict_run(config("dct", 4), frame, calibration=calib, cpus=2)
    assert four["compress_time_s"] == pytest.approx(2 * enc)  # 4 nodes on 2 cores
    assert out["calibration"]["digest"] == calib.digest()


def test_a_schema_1_file_counts_its_sum_as_encode() -> None:
    old = Calibration(source="measured", encode_s_per_param={"dct": 3e-8})
    assert (
        old.encode_decode_s("dct", 1000, 5) == pytest.approx((3e-5, 0.0))
        and old.measured("dct")
        and not old.measured("random")
    )


def test_fit_separates_per_param_and_per_tensor_costs() -> None:
    from netbench.calibrate.measure import _fit

    a, b = 1e-8, 1e-4  # hand-made: 2 M params in 12 tensors, 70 k params in 57 tensors
    big = (2_000_000, 12, 2_000_000 * a + 12 * b)
    small = (70_000, 57, 70_000 * a + 57 * b)
    assert _fit(big, small) == pytest.approx((a, b))
    assert _fit(big, None) == pytest.approx((big[2] / 2_000_000, 0.0))
    # a fit that would make the per-tensor cost negative keeps everything per parameter
    assert _fit((1000, 1, 1.0), (10, 100, 0.001)) == pytest.approx((1e-3, 0.0))


def test_tbf_credit_shortens_the_wire_before_the_pipeline_overlaps_it() -> None:
    """A pipelined step: the refilled bucket comes off the wire time C (its transfer part), then the
    concurrent buckets' T = max(E + D, e + c + D, E + c + d, e + l + W + d) with W = C - L."""
    from netbench.declarations.registry import declared_payload
    from netbench.model.network import GraphModel
    from netbench.model.overlap import concurrent_step_s
    from netbench.model.schemes import scheme_from_config
    from netbench.orchestrator.prediction import scenario_for

    calib = Calibration(source="measured", encode_s_per_param={"dct": 3e-8}, decode_s_per_param={"dct": 2e-8})
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    rep = ReplicatorConfig(name="dct", bucket_mb=0.006)
    run = RunConfig(cluster=cluster, replicator=rep, workload=SHAPES, capture=False)
    shapes = workload_shapes(SHAPES)
    buckets = declared_payload(shapes, rep, 2).collectives_per_step
    assert buckets >= 2
    local = 0.05
    plain = GraphModel.star_step(scheme_from_config(rep), shapes, scenario_for(cluster, local, calib), calib)
    credit = min(bucket_credit_s(cluster, local, plain.tx.total), plain.wire.transfer_s)
    enc, dec = 393_856 * 3e-8, 393_856 * 2e-8
    wire = plain.comm_time_s - credit
    expected = local + concurrent_step_s(enc, dec, plain.wire.latency_s, wire - plain.wire.latency_s, buckets)
    got = predict(run, shapes, local, calib, cpus=2)
    assert credit > 0 and got.step_time_s == pytest.approx(expected)
    assert got.comm_time_s == pytest.approx(max(0.0, expected - local - enc - dec))


def test_a_window_that_is_not_whole_periods_is_warned_about() -> None:
    """4 measured steps of diloco syncing every 10 held no sync and read 0.3x the model's period average."""
    from netbench.orchestrator.prediction import period_warnings

    (warning,) = period_warnings(ReplicatorConfig(name="diloco"), 2, 4)
    assert "every 10 steps" in warning and "4 steps are measured" in warning and "--steps" in warning
    assert period_warnings(ReplicatorConfig(name="diloco"), 2, 20) == []
    assert period_warnings(ReplicatorConfig(name="diloco", sync_every=2), 4, 4) == []
    assert period_warnings(ReplicatorConfig(name="dct"), 2, 3) == []
    mtdao = ReplicatorConfig(name="mtdao", params_every=2, m1_every=4, m2_every=6)
    assert [w.split(" steps and")[0] for w in period_warnings(mtdao, 2, 8)] == ["mtdao communicates every 6"]


def timed(count: int, warmup: int, step_s: float) -> pd.DataFrame:
    """steps.csv's wall clock for ``count`` steps of ``step_s`` each from t = 1000 s, on two ranks."""
    rows = [
        {"rank": r, "step": i, "warmup": i < warmup, "t_start": 1000 + i * step_s, "t_end": 1000 + (i + 1) * step_s}
        for r in (0, 1)
        for i in range(count)
    ]
    return pd.DataFrame(rows)


def test_a_runs_measured_steps_hold_the_min_rtt_windows_that_end_inside_them() -> None:
    # measured from 4 s to 22 s of wall time after the connections opened: the windows ending at 10 and 20 s,
    # over 1.8 windows of wall time
    clock = kernel_clock(timed(22, 4, 1.0), dilation=2.0)
    assert clock == KernelClock(2.0, pytest.approx(2 / 1.8))
    # a run that ends before the first window does: no expiry
    assert kernel_clock(timed(9, 4, 1.0)).expiries_per_window == 0.0
    assert kernel_clock(pd.DataFrame()) == KernelClock()


def test_the_model_meets_a_runs_timers_scaled_by_its_dilation() -> None:
    assert KernelClock(4.0, 0.5).timers() == KernelTimers(0.25, 0.5)
    assert KernelClock(0.5).timers() == KernelTimers(1.0, 1.0)  # a run is never faster than the kernel's clock
    with pytest.raises(ValueError):
        KernelTimers(timer_scale=2.0)


def test_bbrs_probe_lengthens_a_delayed_pair_only_where_a_window_runs_out() -> None:
    cluster = ClusterSpec(nodes=2, up={"rate_bps": 10e6, "delay_s": 0.05}, down={"rate_bps": 10e6}, tcp={"cc": "bbr"})
    run = RunConfig(cluster=cluster, replicator=ReplicatorConfig(name="full"), workload=SHAPES, capture=False)
    shapes = workload_shapes(SHAPES)
    short, long = (predict(run, shapes, 0.05, Calibration(), 2, clock=KernelClock(1.0, n)) for n in (0.0, 1.0))
    assert long.step_time_s > short.step_time_s
    # dilated four times, the run's steps meet the 10 s window four times as often
    dilated = predict(run, shapes, 0.05, Calibration(), 2, clock=KernelClock(4.0, 1.0))
    assert dilated.step_time_s > long.step_time_s
    cubic = run.model_copy(
        update={"cluster": cluster.model_copy(update={"tcp": cluster.tcp.model_copy(update={"cc": "cubic"})})}
    )
    assert (
        predict(cubic, shapes, 0.05, Calibration(), 2, clock=KernelClock(1.0, 0.0)).step_time_s
        == predict(cubic, shapes, 0.05, Calibration(), 2, clock=KernelClock(1.0, 1.0)).step_time_s
    )


def _gossip_steps(local: dict[int, float], start: dict[int, float] | None = None, count: int = 8) -> pd.DataFrame:
    """Four ranks' steps: 4 warm-up, then ``count`` measured ones of ``local[rank]`` compute each, back to back from
    ``start[rank]``."""
    rows = []
    for r, work in local.items():
        t = (start or {}).get(r, 0.0)
        for s in range(4 + count):
            rows.append(
                {
                    "rank": r,
                    "step": s,
                    "warmup": s < 4,
                    "compute_s": work,
                    "apply_s": 0.0,
                    "compress_s": 0.0,
                    "decode_s": 0.0,
                    "step_s": work,
                    "t_start": t,
                    "t_end": t + work,
                    "payload_bytes": s % 2,
                }
            )
            t += work
    return pd.DataFrame(rows)


def test_a_ranks_late_start_is_scaled_back_by_the_recorded_dilation() -> None:
    # rank 0 started the measured steps 0.4 s of wall time after the others
    steps = _gossip_steps(dict.fromkeys(range(4), 0.05), start={0: 0.4})
    assert rank_local_s(steps, dilation=2.0)[1][0] == pytest.approx(0.2)
    # steps whose wall time runs 4 times their step_s: the recorded dilation stands, the steps say it where none is
    quarter = steps.assign(step_s=steps["step_s"] / 4)
    assert rank_local_s(quarter, dilation=2.0)[1][0] == pytest.approx(0.2)
    assert rank_local_s(quarter)[1][0] == pytest.approx(0.1)


@pytest.mark.parametrize(
    "doc, found",
    [
        ({"dilation": 2}, 2.0),
        ({}, None),
        ({"dilation": None}, None),
        ({"dilation": "2"}, None),
        ({"dilation": -1.0}, None),
        ({"dilation": True}, None),
        ({"dilation": float("nan")}, None),
    ],
)
def test_run_json_dilation_is_a_positive_number_or_unknown(doc, found) -> None:
    assert recorded_dilation(doc) == found


def _gossip_run() -> RunConfig:
    cluster = ClusterSpec(nodes=4, up={"rate_bps": 10e6}, down={"rate_bps": 10e6})
    replicator = ReplicatorConfig(name="gossip", sync_every=2)
    return RunConfig(cluster=cluster, replicator=replicator, workload=SHAPES, capture=False, steps=8, warmup_steps=4)


def test_a_gossip_replay_with_every_ranks_local_work_equal_is_the_models_step() -> None:
    from netbench.orchestrator.prediction import node_clock_lag_s

    run, shapes = _gossip_run(), workload_shapes(SHAPES)
    even = _gossip_steps(dict.fromkeys(range(4), 0.05))
    assert node_clock_lag_s(run, shapes, even, 0.05, Calibration()) == pytest.approx(0.0, abs=1e-9)


def test_a_gossip_rank_that_enters_the_measured_steps_late_lengthens_the_replay() -> None:
    from netbench.orchestrator.prediction import node_clock_lag_s

    run, shapes = _gossip_run(), workload_shapes(SHAPES)
    late = _gossip_steps(dict.fromkeys(range(4), 0.05), start={0: 0.4})
    lag = node_clock_lag_s(run, shapes, late, 0.05, Calibration())
    assert 0.0 < lag <= 0.4 / 8 + 1e-9  # a partner waits for rank 0, at most its whole lag over the 8 steps
    full = ReplicatorConfig(name="full")
    assert node_clock_lag_s(run.model_copy(update={"replicator": full}), shapes, late, 0.05, Calibration()) == 0.0
