"""`netbench run` through churn, with the faults at the worst moments: a node killed during a collective, during its
heal, the heal's source killed, two nodes at once, and a run left without a quorum. Real emulated runs, short.

Each run must end (every wait is bounded), keep every step its workers recorded (steps.csv holds each record file's
steps), and leave nothing behind; a run that cannot go on fails with one line that says the quorum was lost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import leftovers
import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.runner import RunResult, run
from netbench.rundir.steps_schema import Col
from netbench.schedule.parse import parse_text
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]
# ~0.5 M parameters (2 MB): an all-reduce over 100mbit takes a good part of each step, a heal a few tenths of a second
MLP = WorkloadConfig(kind="mlp", hidden=256, mlp_layers=8, batch_size=32)


def churn_run(tmp_path: Path, nodes: int, rows: str, steps: int, replicator: str = "full") -> RunResult:
    config = RunConfig(
        cluster=ClusterSpec(nodes=nodes, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6)),
        replicator=ReplicatorConfig(name=replicator, **({"sync_every": 2} if replicator == "diloco" else {})),
        workload=MLP,
        steps=steps,
        warmup_steps=1,
        out_dir=tmp_path,
        capture=False,
        schedule=parse_text("time_s,link,member\n" + rows, "churn.csv"),
    )
    return run(config)


def recorded_steps(run_dir: Path, rank: int) -> int:
    path = run_dir / "workers" / f"rank{rank}.jsonl"
    return sum(1 for line in path.read_text().splitlines() if line.startswith('{"event": "step"'))


def check_kept_and_clean(result: RunResult, nodes: int) -> pd.DataFrame:
    """Every recorded step is in steps.csv, and the run left nothing behind."""
    steps = pd.read_csv(result.run_dir / "steps.csv")
    for rank in range(nodes):
        assert (steps[Col.RANK] == rank).sum() == recorded_steps(result.run_dir, rank)
    assert leftovers.clean(result.summary["run_id"]), leftovers.traces(result.summary["run_id"])
    return steps


def test_a_node_killed_during_an_all_reduce_and_back_is_healed_and_the_run_ends_ok(tmp_path: Path) -> None:
    result = churn_run(tmp_path, 3, "1,n2,leave\n3,n2,join\n", steps=60)
    assert result.status == "ok", result.reason
    steps = check_kept_and_clean(result, 3)
    back = steps[steps[Col.RANK] == 2]
    assert back[Col.HEAL_BYTES].max() > 0  # the joining node caught up from a live peer, over the links
    assert result.summary["heals"] >= 1 and result.summary["goodput_steps_per_s"] > 0
    assert set(steps[Col.SCHEDULE_MEMBERS]) == {2, 3}
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert run_json["cluster"]["quorum"]["leaves"] == {"2": 1}


def test_a_node_killed_during_its_heal_then_back_again_ends_ok(tmp_path: Path) -> None:
    result = churn_run(tmp_path, 3, "1,n2,leave\n2,n2,join\n2.5,n2,leave\n4,n2,join\n", steps=70, replicator="diloco")
    assert result.status == "ok", result.reason
    check_kept_and_clean(result, 3)


def test_the_heals_source_killed_as_a_node_joins_and_two_nodes_leaving_at_once_end_ok(tmp_path: Path) -> None:
    rows = "1,n3,leave\n2.5,n3,join\n2.5,n1,leave\n4,n1,join\n5,n1,leave\n5,n2,leave\n7,n1,join\n7,n2,join\n"
    result = churn_run(tmp_path, 4, rows, steps=90)
    assert result.status == "ok", result.reason
    steps = check_kept_and_clean(result, 4)
    assert 2 in set(steps[Col.SCHEDULE_MEMBERS])  # two of four trained on while two were away


def test_a_run_left_without_a_quorum_fails_in_one_line(tmp_path: Path) -> None:
    schedule = tmp_path / "churn.csv"
    schedule.write_text("time_s,link,member\n1,n1,leave\n1,n2,leave\n")
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "run", "-n", "3", "--bw", "100mbit", "-r", "full", "-w", "mlp"]
        + ["--steps", "400", "--warmup", "1", "--timeout", "8", "--no-capture", "--out", str(tmp_path / "out")]
        + ["--schedule", str(schedule)],
        cwd=REPO,
        env=os.environ | {"COLUMNS": "400"},  # one line stays one line
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    failed = [line for line in done.stderr.splitlines() if "run failed" in line]
    assert len(failed) == 1 and "quorum lost" in failed[0], done.stderr[-2000:]
    run_dir = next((tmp_path / "out").rglob("run.json")).parent
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["status"] == "failed"
    assert leftovers.clean(run_json["run_id"]), leftovers.traces(run_json["run_id"])


def test_a_replicator_that_cannot_train_through_churn_is_refused_in_one_line(tmp_path: Path) -> None:
    schedule = tmp_path / "churn.csv"
    schedule.write_text("time_s,link,member\n1,n1,leave\n")
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "run", "-n", "3", "--bw", "100mbit", "-r", "dct", "--steps", "5"]
        + ["--out", str(tmp_path / "out"), "--schedule", str(schedule)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "full and diloco train through churn" in done.stderr
    assert not (tmp_path / "out").exists()


def test_churn_without_torchft_is_refused_in_one_line_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from report_cli import netbench

    from netbench.orchestrator.run import churn

    monkeypatch.setattr(churn, "installed", lambda package: package != "torchft")
    done = netbench(
        *("run", "-n", "3", "--bw", "100mbit", "-r", "diloco", "--steps", "5", "--churn", "4s,for=10s"),
        *("--out", str(tmp_path / "out")),
    )
    assert "needs torchft" in done.error_line and "netbench[churn]" in done.error_line
    assert not (tmp_path / "out").exists()
