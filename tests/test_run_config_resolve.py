"""RunConfig: intents (--compression, --bucket-mb auto) resolved where library callers get them too; validation that
looks at values only, with the host's checks made when a run is prepared; stored runs read back on any host."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import psutil
import pytest

from netbench.calibrate.hostcache import HostCalibration
from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.model.calibration import Calibration
from netbench.model.overlap import bucket_mb_for_shapes
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.forked_workers import Launcher
from netbench.orchestrator.host_fit import HostUnfit, check_host
from netbench.orchestrator.prediction import workload_shapes
from netbench.orchestrator.run import runner
from netbench.orchestrator.run.resolve import bucket_link, resolve
from netbench.workloads.config import WorkloadConfig

SHAPES = WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=2,ffn=128,vocab=256")


def cluster(nodes: int = 4, rate: float = 1e8, delay_s: float = 0.01) -> ClusterSpec:
    return ClusterSpec(nodes=nodes, up={"rate_bps": rate, "delay_s": delay_s}, down={"rate_bps": rate})


def config(tmp_path: Path, **kw) -> RunConfig:
    return RunConfig(
        cluster=kw.pop("cluster", cluster()),
        workload=kw.pop("workload", SHAPES),
        out_dir=tmp_path / "runs",
        capture=False,
        **kw,
    )


def prepared(run: RunConfig) -> runner.RunPlan:
    calib = HostCalibration(Calibration(), Path("/nonexistent/calibration.json"), False, "file")
    return runner.prepare(run, calib, 1.0, Launcher())  # stores the launcher; starts no fork server


def test_library_caller_gets_compression_applied(tmp_path: Path) -> None:
    dct = prepared(config(tmp_path, replicator=ReplicatorConfig(name="dct", chunk=64), compression="1/16"))
    assert dct.config.replicator.topk == 64 * 64 // 16
    rnd = prepared(config(tmp_path, replicator=ReplicatorConfig(name="random", rate=0.5), compression=0.25))
    assert rnd.config.replicator.rate == 0.25 and rnd.dilated.replicator.rate == 0.25


def test_library_caller_gets_automatic_buckets_sized_from_the_link(tmp_path: Path) -> None:
    asked = config(tmp_path, replicator=ReplicatorConfig(name="dct", bucket_mb=0.0), auto_bucket=True)
    plan = prepared(asked)
    rate, rtt = bucket_link(asked.cluster)
    expected = bucket_mb_for_shapes(
        asked.replicator, workload_shapes(SHAPES, 4), rate, rtt, 4, backward=False, concurrent=True
    )
    assert plan.config.replicator.bucket_mb == expected > 0
    assert resolve(config(tmp_path, replicator=ReplicatorConfig(name="dct"))).replicator.bucket_mb == 0.0


def test_resolution_is_the_cli_s_and_idempotent(tmp_path: Path) -> None:
    from netbench.cli.run_config import build_run_config

    settings = dict(
        cluster=cluster(),
        replicator=ReplicatorConfig(name="dct"),
        workload=SHAPES,
        out_dir=tmp_path / "runs",
        compression="6.25%",
        auto_bucket=True,
    )
    from_cli = build_run_config(**settings)
    from_library = prepared(RunConfig(**settings)).config
    assert from_cli == from_library
    assert resolve(from_library) == from_library
    assert from_library.replicator.topk == 256 and from_library.replicator.bucket_mb > 0


def test_compression_needs_a_replicator_that_sends_a_share(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sends every element"):
        config(tmp_path, replicator=ReplicatorConfig(name="full"), compression=0.5)
    with pytest.raises(ValueError, match="expected a fraction"):
        config(tmp_path, compression="a lot")


def test_host_checks_are_made_when_a_run_is_prepared_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unwritable = RunConfig(cluster=cluster(), out_dir=Path("/proc/netbench-runs"), capture=False)  # values only: valid
    with pytest.raises(HostUnfit, match="not a writable directory") as caught:
        prepared(unwritable)
    assert caught.value.field == "out_dir"
    fits = config(tmp_path)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=1024))
    with pytest.raises(HostUnfit, match="GiB of memory") as caught:
        prepared(fits)
    assert caught.value.field == "workload"
    assert not (tmp_path / "runs").exists()


def test_memory_check_counts_the_workers_on_this_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = config(tmp_path, cluster=cluster(nodes=8))
    need_one = run.workload.param_count() * 16
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=need_one * 2))
    with pytest.raises(HostUnfit, match="on 8 workers"):
        check_host(run, environ={})
    check_host(run, environ={"LOCAL_WORLD_SIZE": "2"})  # torchrun: two of the eight run here


def test_a_stored_run_loads_whatever_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run recorded elsewhere (its out_dir absent here, a model this host could not hold) still re-predicts."""
    from synthetic_sweep import grid, write_sweep

    from netbench.orchestrator.sweep.repredict import repredict

    folder = write_sweep(tmp_path / "sweep", grid(reps=("dct",), rates=("100mbit",)))
    stored = RunConfig(
        cluster=cluster(nodes=2),
        replicator=ReplicatorConfig(name="dct"),
        workload=WorkloadConfig(kind="shapes", shapes="llama:d_model=32,layers=1,ffn=64,vocab=64", compute_ms=50),
        out_dir=Path("/nonexistent/elsewhere/runs"),
    )
    steps = pd.read_csv(folder / "runs" / "r0" / "steps.csv").assign(compute_s=0.05)  # the measured local work
    steps.to_csv(folder / "runs" / "r0" / "steps.csv", index=False)
    (folder / "runs" / "r0" / "run.json").write_text(json.dumps({"config": stored.model_dump(mode="json")}))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=1024))
    with pytest.raises(HostUnfit):
        check_host(stored)  # this host could not run it ...
    calib = tmp_path / "calibration.json"
    calib.write_text(Calibration().model_dump_json())
    before = pd.read_csv(folder / "summary.csv")["pred_step_time_s"].iloc[0]
    repredict(folder, calib)  # ... and reads it back all the same
    after = pd.read_csv(folder / "summary.csv")["pred_step_time_s"].iloc[0]
    assert after > 0 and after != before
