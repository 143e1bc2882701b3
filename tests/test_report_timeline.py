"""The timeline figure in reports: drawn from a run's trace.json, inlined in the sweep's report.html, nothing
fetched.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_sweep import grid, write_sweep

from netbench.reports.timeline import median_and_slowest, timeline_figure
from netbench.trace.build import write_trace
from netbench.untrusted import BadInput

NETBENCH = str(Path(sys.executable).parent / "netbench")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-headless-shell")


def _step(rank: int, step: int, t: float, slow: float) -> dict:
    """A pipelined step of two buckets: compute, encode, start, encode, start, wait, decode, wait, decode, apply."""
    spans = [
        ["compute", 0.0, 0.02, {}],
        ["encode", 0.02, 0.05, {}],
        ["encode", 0.051, 0.08, {}],
        ["wait", 0.08, 0.10 + slow, {"op": "all_gather", "bucket": 0}],
        ["decode", 0.10 + slow, 0.12 + slow, {}],
        ["wait", 0.12 + slow, 0.121 + slow, {"op": "all_gather", "bucket": 1}],
        ["decode", 0.121 + slow, 0.14 + slow, {}],
        ["apply", 0.14 + slow, 0.15 + slow, {}],
        ["collective", 0.05, 0.10 + slow, {"op": "all_gather", "bucket": 0, "bytes": 1000}],
        ["collective", 0.08, 0.115 + slow, {"op": "all_gather", "bucket": 1, "bytes": 1000}],
    ]
    return {
        "event": "step",
        "rank": rank,
        "step": step,
        "warmup": step == 0,
        "t_start": t,
        "t_end": t + 0.15 + slow,
        "step_s": 0.15 + slow,
        "tx_bytes": 3000,
        "rx_bytes": 3000,
        "spans": spans,
    }


def write_run(run_dir: Path, steps: int = 6) -> Path:
    """A run directory of two ranks whose step 3 is slow, with the model's prediction in run.json; then its trace."""
    (run_dir / "workers").mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        t, lines = 1_000_000.0, []
        for s in range(steps):
            record = _step(rank, s, t, 0.1 if s == 3 else 0.0)
            lines.append(json.dumps(record))
            t = record["t_end"] + 0.001
        (run_dir / "workers" / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    predicted = {
        "step_time_s": 0.12,
        "local_time_s": 0.03,
        "compress_time_s": 0.05,
        "comm_time_s": 0.01,
        "decode_time_s": 0.03,
    }
    (run_dir / "run.json").write_text(
        json.dumps({"run_id": "abc", "dilation": 1.0, "summary": {"predicted": predicted, "apply_time_s": 0.01}})
    )
    return write_trace(run_dir, {0: 0, 1: 1}, {}, {})


def test_the_figure_shows_the_median_and_the_slowest_step(tmp_path) -> None:
    write_run(tmp_path)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert [title for title, _ in median_and_slowest(trace["traceEvents"])] == ["median step", "slowest step"]
    assert median_and_slowest(trace["traceEvents"])[1][1] == 3
    assert any(e["ph"] == "C" and "per step" in e["name"] for e in trace["traceEvents"])  # no capture: the counters
    png = timeline_figure(tmp_path, tmp_path / "timeline.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_without_a_usable_trace_gets_no_figure(tmp_path) -> None:
    assert timeline_figure(tmp_path, tmp_path / "timeline.png") is None
    (tmp_path / "trace.json").write_text("{not json")
    with pytest.raises(BadInput, match="not valid JSON"):  # one line for the report to show instead
        timeline_figure(tmp_path, tmp_path / "timeline.png")
    (tmp_path / "trace.json").write_text('{"traceEvents": [{"ph": "X", "cat": "step"}]}')
    assert timeline_figure(tmp_path, tmp_path / "timeline.png") is None and not (tmp_path / "timeline.png").exists()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = write_sweep(tmp_path_factory.mktemp("timeline") / "sweep", grid(), kind="shapes")
    write_run(folder / "runs" / "r0")
    done = subprocess.run([NETBENCH, "report", str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder / "report.html"


def test_the_sweep_report_names_each_trace_and_inlines_the_timeline(report: Path) -> None:
    md = (report.parent / "report.md").read_text()
    assert "## Timelines" in md and "runs/r0/trace.json" in md and "(timeline_0.png)" in md
    text = report.read_text()
    assert re.search(r'<img src="data:image/png;base64,[^"]+" alt="timeline of', text)
    assert not re.search(r"https?://", text)


@pytest.mark.skipif(
    CHROMIUM is None or shutil.which("unshare") is None, reason="needs Chromium (apt-get install chromium) and unshare"
)
def test_headless_chromium_renders_the_timeline_fetching_nothing(report: Path, tmp_path) -> None:
    from test_report_html import _render

    shot, requested = _render(report, tmp_path)
    assert shot.is_file() and shot.stat().st_size > 10_000
    assert [u for u in requested if not u.startswith(("file:", "data:"))] == []
