"""The progress a run's training keeps through churn: the committed steps it holds at the end (since it last started
afresh) and their rate beside goodput, read from a stored run's steps.csv as a run's summary reads it; and the bench
that compares a run through churn with the model refuses a run that recorded no quorum, in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from netbench.orchestrator.run.results import summarize, write_steps_csv
from netbench.reports.terminal import summary_lines
from netbench.rundir.layout import RunDir
from netbench.rundir.steps_schema import Col

REPO = Path(__file__).resolve().parents[1]
TIMES = (Col.STEP_S, Col.COMPUTE_S, Col.COMPRESS_S, Col.COMM_S, Col.DECODE_S, Col.APPLY_S)


def stored(tmp_path: Path, *rows: tuple[int, bool, float, int | None]) -> pd.DataFrame:
    """Two nodes' steps, (step, committed, t_start, restart quorum) each, the first a warm-up; each step lasts 1 s.
    Written to a run folder's steps.csv and read back, as a stored run is read."""
    frame = pd.DataFrame(
        [
            {
                Col.RANK: rank,
                Col.STEP: step,
                Col.WARMUP: i == 0,
                Col.COMMITTED: committed,
                Col.QUORUM_REPLICAS: 2,
                Col.HEAL_BYTES: 0,
                Col.HEAL_S: 0.0,
                Col.T_START: t,
                Col.T_END: t + 1.0,
                Col.RESTART_QUORUM: restart,
                Col.LOSS: 5.0 - 0.1 * step,
                **dict.fromkeys(TIMES, 1.0),
            }
            for i, (step, committed, t, restart) in enumerate(rows)
            for rank in (0, 1)
        ]
    )
    run_dir = RunDir.create(tmp_path, "full", "kept01")
    write_steps_csv(frame, run_dir.steps_csv)
    return pd.read_csv(run_dir.steps_csv)


def test_a_restart_keeps_only_the_steps_since_it_and_goodput_counts_them_all(tmp_path: Path) -> None:
    steps = stored(
        tmp_path,
        (0, True, 0.0, None),  # warm-up
        *((s, True, float(s), None) for s in range(1, 6)),  # five steps, then every node that held them left
        (0, True, 8.0, 4),  # the nodes back train afresh from the first weights
        *((s, True, 8.0 + s, None) for s in range(1, 4)),
    )
    summary = summarize(steps, warmup_steps=1)
    assert summary["restarts"] == 1 and summary["restart_steps_lost"] == 6  # the warm-up's step was lost too
    assert summary["kept_steps"] == 4
    span = 12.0 - 1.0  # the measured steps: from 1 s to the last one's end
    assert summary["goodput_steps_per_s"] == pytest.approx(9 / span)  # the five, the fresh quorum's and three
    assert summary["kept_steps_per_s"] == pytest.approx(4 / span)
    run = {"run_id": "kept01", "replicator": "full", "nodes": 2, "delay_ms": 1.0, "status": "ok"}
    shown = summary_lines({**summary, **run})  # what `run` prints
    assert any(line.startswith("progress kept") and line.endswith(f"{4 / span:.3g}") for line in shown)
    assert any(line.startswith("goodput") for line in shown)


def test_without_a_restart_the_progress_kept_is_goodput(tmp_path: Path) -> None:
    steps = stored(tmp_path, *((s, s != 3, float(s), None) for s in range(6)))
    summary = summarize(steps, warmup_steps=1)
    assert summary["restarts"] == 0 and summary["kept_steps"] == 5  # the warm-up's too, not the lost step
    assert summary["kept_steps_per_s"] == summary["goodput_steps_per_s"] == pytest.approx(4 / 5)


def test_the_bench_refuses_a_run_that_recorded_no_quorum_in_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "exec-run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"summary": {"status": "ok"}, "config": {}}))
    pd.DataFrame({Col.RANK: [0, 1], Col.STEP: [0, 0]}).to_csv(run_dir / "steps.csv", index=False)
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_run_churn.py"), str(run_dir)], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "records no quorum" in done.stderr
