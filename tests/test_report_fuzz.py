"""Fuzzing `netbench report` with crafted sweep folders and run directories: every case ends in a report (exit 0)
or one line (exit 2) -- never a traceback, a hang or an escape sequence on the terminal.

Cases start from folders netbench writes (tests/synthetic_sweep.py, a committed run.json) and change them the
way a damaged copy or a hostile author would: cells and JSON fields set to other types, hostile text or
extreme numbers, columns dropped, bytes that are not UTF-8, and files swapped for links, FIFOs or folders.
The many-cases tests leave the drawing out (matplotlib takes a second a figure): they cover every reader,
check, table and page; a few cases draw the figures too.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from report_cli import report, report_command
from synthetic_sweep import grid, write_sweep

REPO = Path(__file__).resolve().parent.parent
RUN_JSON = json.loads(next((REPO / "reports" / "target" / "runs").glob("*/run.json")).read_text())
HOSTILE = [
    "[/]",
    "[/x]",
    "[red]",
    "\x1b[2J",
    "\x1b]0;t\x07",
    "\u202e",
    "![e](/etc/hostname)",
    "../../etc/passwd",
    "<script>",
    "$\\undefined$",
    "|",
    "",
    " ",
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e300",
    "1e-300",
    "2.5",
    "65",
    "true",
    "None",
    "\x00",
]
NUMBERS = st.one_of(st.integers(-(10**20), 10**20), st.floats(allow_nan=True, allow_infinity=True))
CELLS = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12), NUMBERS)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, st.sampled_from(HOSTILE), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
FILE_KINDS = st.sampled_from(["as written"] * 30 + ["link", "fifo", "folder", "missing", "not utf-8", "empty"])
SUMMARY_COLUMNS = [
    "key",
    "label",
    "replicator",
    "nodes",
    "bw_bps",
    "delay_ms",
    "status",
    "reason",
    "run_dir",
    "step_time_s",
    "comm_time_s",
    "wire_tx_bytes_per_step",
    "pred_step_time_s",
    "pred_local_time_s",
    "params",
    "fidelity_ok",
    "fidelity_reasons",
    "statistic",
]
SWEEP_PATHS = [
    ("scenario",),
    ("scenario", "name"),
    ("scenario", "description"),
    ("scenario", "grid"),
    ("scenario", "grid", "bw"),
    ("scenario", "grid", "nodes"),
    ("scenario", "workload"),
    ("scenario", "workload", "kind"),
    ("scenario", "workload", "compute_ms"),
    ("scenario", "workload", "shapes"),
    ("scenario", "steps"),
    ("calibration",),
    ("calibration", "source"),
    ("calibration", "software_overhead_s"),
]
RUN_PATHS = [
    ("summary",),
    ("summary", "run_id"),
    ("summary", "replicator"),
    ("summary", "nodes"),
    ("summary", "delay_ms"),
    ("summary", "status"),
    ("summary", "bw_bps"),
    ("summary", "step_time_s"),
    ("summary", "fidelity"),
    ("summary", "fidelity", "reasons"),
    ("summary", "fidelity", "ok"),
    ("summary", "predicted"),
    ("summary", "predicted", "calibration"),
    ("summary", "first_loss"),
    ("summary", "statistic"),
    ("status",),
    ("reason",),
    ("launcher",),
    ("exec",),
    ("summary", "prediction_error"),
]


def _set(doc: Any, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(doc, dict):
            return
        doc = doc.setdefault(key, {})
    if isinstance(doc, dict):
        doc[path[-1]] = value


def _shape(path: Path, kind: str, outside: Path) -> None:
    """Turn the file at ``path`` into ``kind``: a link to a file outside, a FIFO, a folder, nothing, bytes that are not
    UTF-8.
    """
    if kind == "as written":
        return
    if path.exists():
        data = path.read_bytes()
        path.unlink()
    else:
        data = b""
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "not utf-8":
        path.write_bytes(data[: len(data) // 2] + b"\xff\xfe" + data[len(data) // 2 :])
    elif kind == "empty":
        path.write_bytes(b"")


def _assert_clean(done) -> None:
    event(f"exit {done.code}")
    assert done.code in (0, 2), (done.code, done.err)
    if done.code == 2:
        assert done.error_line and done.out == ""
    shown = done.out + done.err
    assert "Traceback" not in shown and not any(c in shown for c in "\x1b\x07\u202e\x00"), repr(shown)


@pytest.fixture(scope="module")
def place():
    base = Path(tempfile.mkdtemp(prefix="netbench-fuzz-"))
    secret = base / "secret"
    secret.write_text("secret\n")
    yield base, secret
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def no_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures left out (their data still read: the runs' steps for error bars and loss curves)."""
    import netbench.reports.plots as plots
    import netbench.reports.target_figures as target_figures

    monkeypatch.setattr(plots, "make_figures", lambda frame, folder: (plots.with_step_spread(frame, folder), [])[1])
    monkeypatch.setattr(target_figures, "loss_vs_time", lambda group, path: path)
    monkeypatch.setattr(target_figures, "time_to_target_vs_rate", lambda group, path: path)


SWEEP_CASE = st.fixed_dictionaries(
    {
        "points": st.integers(1, 3),
        "kind": st.sampled_from(["shapes", "transformer"]),
        "cells": st.lists(st.tuples(st.integers(0, 2), st.sampled_from(SUMMARY_COLUMNS), CELLS), max_size=4),
        "dropped": st.lists(st.sampled_from(SUMMARY_COLUMNS), max_size=1),
        "fields": st.lists(st.tuples(st.sampled_from(SWEEP_PATHS), JSON_VALUES), max_size=3),
        "steps": st.lists(
            st.tuples(st.integers(0, 20), st.sampled_from(["step", "rank", "step_s", "loss", "warmup"]), CELLS),
            max_size=3,
        ),
        "summary_kind": FILE_KINDS,
        "sweep_kind": FILE_KINDS,
        "steps_kind": FILE_KINDS,
    }
)
# A summary the reader takes whose model step has no logarithm: zero (a measured step of zero it refuses).
ZERO_TIMES = {
    "points": 3,
    "kind": "transformer",
    "cells": [(0, "pred_step_time_s", "0")],
    "dropped": [],
    "fields": [],
    "steps": [],
    "summary_kind": "as written",
    "sweep_kind": "as written",
    "steps_kind": "as written",
}


def _edit(frame: pd.DataFrame, cells: list[tuple[int, str, Any]]) -> pd.DataFrame:
    """``frame`` (as text and numbers) with each (row, column, value) set; a column it lacks is added."""
    frame = frame.astype(object)
    for row, column, value in cells:
        if column not in frame:
            frame[column] = pd.Series([None] * len(frame), dtype=object)
        frame.loc[frame.index[row % len(frame)], column] = value
    return frame


def _sweep_folder(base: Path, secret: Path, case: dict) -> Path:
    folder = Path(tempfile.mkdtemp(dir=base)) / "sweep"
    rates = ("10mbit", "100mbit", "1gbit")[: case["points"]]
    losses = {"full": [10.0 - s for s in range(8)]} if case["kind"] == "transformer" else None
    write_sweep(folder, grid(reps=("full",), rates=rates), kind=case["kind"], losses=losses)
    frame = _edit(pd.read_csv(folder / "summary.csv"), case["cells"])
    frame.drop(columns=[c for c in case["dropped"] if c in frame]).to_csv(folder / "summary.csv", index=False)
    doc = json.loads((folder / "sweep.json").read_text())
    for path, value in case["fields"]:
        _set(doc, path, value)
    (folder / "sweep.json").write_text(json.dumps(doc))
    steps_path = folder / "runs" / "r0" / "steps.csv"
    _edit(pd.read_csv(steps_path), case["steps"]).to_csv(steps_path, index=False)
    for name, kind in (("summary.csv", case["summary_kind"]), ("sweep.json", case["sweep_kind"])):
        _shape(folder / name, kind, secret)
    _shape(steps_path, case["steps_kind"], secret)
    return folder


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a log of zero, a mean of nothing: numbers not checked
@pytest.mark.timeout(180)
@settings(
    max_examples=500,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(case=ZERO_TIMES)
@given(case=SWEEP_CASE)
def test_crafted_sweep_folders_end_in_a_report_or_one_line(place, no_drawing, case: dict) -> None:
    base, secret = place
    folder = _sweep_folder(base, secret, case)
    done = report_command(folder)
    _assert_clean(done)
    if done.code == 0:
        assert "secret" not in (folder / "report.html").read_text()
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a log of zero, a mean of nothing: numbers not checked
@pytest.mark.timeout(180)
@settings(
    max_examples=6,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(case=ZERO_TIMES)
@given(case=SWEEP_CASE)
def test_crafted_sweep_folders_with_their_figures_drawn(place, case: dict) -> None:
    base, secret = place
    folder = _sweep_folder(base, secret, case)
    _assert_clean(report(str(folder)))
    shutil.rmtree(folder.parent, ignore_errors=True)


RUN_CASE = st.fixed_dictionaries(
    {
        "fields": st.lists(st.tuples(st.sampled_from(RUN_PATHS), JSON_VALUES), max_size=4),
        "exec": st.booleans(),
        "kind": FILE_KINDS,
    }
)


@pytest.mark.timeout(180)
@settings(
    max_examples=1500,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=RUN_CASE)
def test_crafted_run_directories_end_in_a_table_or_one_line(place, case: dict) -> None:
    base, secret = place
    folder = Path(tempfile.mkdtemp(dir=base))
    doc = copy.deepcopy(RUN_JSON)
    if case["exec"]:
        doc["exec"] = {
            "command": ["python3", "[/x]"],
            "nodes": [{"rank": 0, "exit_code": 1, "stopped_by": "[/]\x1b[2J", "wall_time_s": 1.0}],
        }
    for path, value in case["fields"]:
        _set(doc, path, value)
    (folder / "run.json").write_text(json.dumps(doc))
    _shape(folder / "run.json", case["kind"], secret)
    if case["kind"] in ("missing", "folder"):  # not a run directory then: `report` says there is no summary.csv
        (folder / "run.json").exists() or (folder / "run.json").write_text("{}")
    _assert_clean(report_command(folder))
    shutil.rmtree(folder, ignore_errors=True)
