"""Reports: error figures from a summary, and a real 2-point sweep's report and plots (needs root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from netbench.model.calibration import Calibration
from netbench.reports.report import accuracy, with_errors

REPO = Path(__file__).resolve().parent.parent


def row(label: str, step: float, pred_step: float, tx: float, pred_tx: float, status: str = "ok") -> dict:
    return {
        "label": label,
        "status": status,
        "step_time_s": step,
        "pred_step_time_s": pred_step,
        "comm_time_s": 1.0,
        "pred_comm_time_s": 1.0,
        "wire_tx_bytes_per_step": tx,
        "pred_wire_tx_bytes_per_step": pred_tx,
        "wire_rx_bytes_per_step": tx,
        "pred_wire_rx_bytes_per_step": tx,
        "payload_bytes_per_step": 1.0,
        "pred_payload_bytes_per_step": 1.0,
    }


def test_accuracy_median_and_max_relative_to_measured() -> None:
    frame = with_errors(
        pd.DataFrame(
            [
                row("a", 1.0, 1.05, 100, 101),
                row("b", 2.0, 1.6, 100, 98),  # -20 %: the worst step
                row("c", 1.0, 1.12, 100, 100),
                row("d", 9.0, 1.0, 100, 50, status="failed"),  # failed points do not count
            ]
        )
    )
    acc = accuracy(frame)
    assert acc.points == 3
    assert acc.step_median_abs == pytest.approx(0.12)
    assert acc.step_max_abs == pytest.approx(0.20) and acc.step_worst == "b"
    assert acc.wire_max_abs == pytest.approx(0.02) and acc.wire_worst == "b"
    assert not acc.meets_targets()  # median 12 % > 10 %
    frame.loc[frame["label"] == "c", "pred_step_time_s"] = 1.02
    assert accuracy(with_errors(frame)).meets_targets()  # median 5 %, max 20 %, wire 2 %


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "netbench", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300
    )


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_small_real_sweep_writes_report_and_plots(tmp_path) -> None:
    out = tmp_path / "sweep"
    done = cli(
        "sweep",
        "--bw",
        "10mbit,100mbit",
        "--replicator",
        "full",
        "--nodes",
        "2",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--workload",
        "shapes",
        "--shapes",
        "llama:d_model=32,layers=1,ffn=64,vocab=64",
        "--compute-ms",
        "5",
        "--no-capture",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert "step time: median |error|" in done.stdout and "wire bytes (tx and rx): max |error|" in done.stdout
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["label"]) == ["full 2n 10mbit 0ms", "full 2n 100mbit 0ms"] and set(summary["status"]) == {"ok"}
    assert (summary["pred_step_time_s"] > 0).all() and (
        summary["wire_tx_bytes_per_step"] > summary["payload_bytes_per_step"]
    ).all()
    figures = {"time_vs_bandwidth.png", "bytes_per_step.png", "scaling_nodes.png"}
    for name in figures:
        assert (out / name).stat().st_size > 10_000 and (out / name).read_bytes()[:4] == b"\x89PNG"
    text = (out / "report.md").read_text()
    assert "step time, median abs. error" in text and "full 2n 10mbit 0ms" in text
    assert all(f"]({name})" in text for name in figures)
    # regenerating from the folder alone gives the same figures
    for name in figures:
        (out / name).unlink()
    again = cli("report", str(out))
    assert again.returncode == 0, again.stderr
    assert all((out / name).exists() for name in figures)
    assert cli("report", str(tmp_path)).returncode == 2  # no summary.csv there: one-line user error
    # re-predicting with other model constants rewrites the predictions, not the measurements
    slow = tmp_path / "slow.json"
    slow.write_text(Calibration(source="measured", encode_s_per_param={"full": 1e-6}).model_dump_json())
    assert cli("report", str(out), "--calibration", str(slow)).returncode == 0
    again = pd.read_csv(out / "summary.csv")
    assert (again["step_time_s"] == summary["step_time_s"]).all()
    assert (again["pred_compress_time_s"] > summary["pred_compress_time_s"] + 1e-3).all()


def test_figures_drawn_beside_give_back_what_the_child_returned_or_raised() -> None:
    from netbench.reports.figure_file import drawn_beside
    from netbench.untrusted import BadInput

    assert drawn_beside(lambda a, b: (a + b, os.getpid()), 2, 3)()[0] == 5
    assert drawn_beside(lambda: os.getpid())() != os.getpid()  # drawn in another process

    def broken() -> None:
        raise BadInput("summary.csv: not a CSV table netbench wrote")

    with pytest.raises(BadInput, match="not a CSV table"):
        drawn_beside(broken)()
