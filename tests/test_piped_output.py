"""Output meant for people stays whole when it is piped: no table cell wraps, no line is cut, no exception class."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from report_cli import report
from test_summary_metrics import full_summary

from netbench.reports.terminal import UNWRAPPED_WIDTH, make_console, summary_lines
from netbench.rundir.summary import terminal_metrics
from netbench.validation import error_text

REPO = Path(__file__).resolve().parents[1]
LONG_REASON = (
    "CPU: 64 workers outnumber the host's 2 cores; each worker waited 12% of the run for a core (limit 10%); try "
    "--dilation 39 (DieCast: links, delays and each node's CPU slowed alike, times divided back)"
)


def test_piped_summary_is_one_plain_line_per_row() -> None:
    summary = {**full_summary(), "fidelity": {"ok": False, "reasons": [LONG_REASON], "dilation": 32.0}}
    lines = summary_lines(summary)
    assert lines[0].startswith("netbench run abc: dct, 2 nodes")
    for m in terminal_metrics():
        assert sum(1 for line in lines if line.lstrip().startswith(f"{m.label}: ")) >= 1, m.label
    assert f"faithful emulation: NO: {LONG_REASON} (dilated x32)" in lines
    assert "step time: " in lines[1] and "(model " in lines[1]


def test_a_console_on_a_pipe_has_no_width_limit(monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == UNWRAPPED_WIDTH  # pytest's captured stdout is no terminal
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100  # the user's width wins


def test_report_of_a_run_piped_prints_whole_rows(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    run = next((REPO / "reports" / "target" / "runs").iterdir())
    shutil.copytree(run, tmp_path / run.name)
    done = report(str(tmp_path / run.name))
    assert done.code == 0, done.err
    rows = done.out.splitlines()
    assert any(r.startswith("step time: ") and r.endswith(" s)") for r in rows), done.out  # value and unit together
    assert any(r.startswith("loss (first -> last): ") for r in rows), done.out
    assert not any(r.startswith(("┃", "│", "┏")) for r in rows), done.out  # no table drawn into a pipe


def test_error_text_never_names_the_exception_class() -> None:
    assert error_text(ValueError("no step was recorded")) == "no step was recorded"
    assert error_text(KeyError("rank")) == "missing 'rank'"
    assert "Error" not in error_text(RuntimeError())
    assert error_text(KeyboardInterrupt()) == "interrupted (Ctrl-C)"


def test_a_run_that_cannot_start_says_so_in_one_line_through_the_console_script(tmp_path: Path) -> None:
    """A spec that cannot be read: the worker's own one-line error, no traceback, no class name."""
    bad = tmp_path / "spec.json"
    bad.write_text('{"iface": "lo", "out_path": "x", "rank": 3, "world_size": 2}')
    done = subprocess.run(
        [sys.executable, "-m", "netbench.worker", "--spec", str(bad)], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "rank 3 is outside world size 2" in done.stderr
    assert "Traceback" not in done.stderr and "ValueError" not in done.stderr and "SpecError" not in done.stderr
