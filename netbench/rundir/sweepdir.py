"""A sweep folder's layout, written down once: the sweep writes it, reports and compare read it.

    OUT/
        summary.csv        one row per point: coordinates, measured and predicted figures
        sweep.json         the scenario and the calibration the predictions use
        calibration.json   this host's model constants, measured for the sweep
        runs/STAMP-LABEL-RUNID/   one run directory per point (:mod:`netbench.rundir.layout`)

Run directories are stored in summary.csv relative to the folder, so a copied folder still resolves.
Reading treats the folder as untrusted input (:mod:`netbench.rundir.reading`): summary.csv's
numbers, sweep.json's types and every run directory's place inside the folder are checked, and
whatever is wrong is one :class:`~netbench.untrusted.BadInput` line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from netbench import safe_files
from netbench.rundir.reading import BadInput, numeric_column, read_csv, read_json_object, validated
from netbench.rundir.summary import METRICS, csv_measured, csv_predicted, predicted_column
from netbench.topology.graph import MAX_EMULATED_NODES
from netbench.topology.link import MAX_EMULATED_DELAY_S, MAX_RATE_BPS, MIN_RATE_BPS

__all__ = [
    "SUMMARY",
    "SWEEP_JSON",
    "CALIBRATION",
    "TEXT",
    "checked_summary",
    "is_sweep",
    "read_summary",
    "write_summary",
    "run_path",
    "read_sweep_json",
    "write_sweep_doc",
    "SweepDoc",
    "sweep_doc",
    "BadInput",
]

SUMMARY = "summary.csv"
SWEEP_JSON = "sweep.json"
CALIBRATION = "calibration.json"
# summary.csv columns that hold text (an all-empty one would otherwise read back as float NaN)
TEXT = (
    "key",
    "label",
    "replicator",
    "bw",
    "delay",
    "status",
    "reason",
    "run_dir",
    "prediction_error",
    "statistic",
    "fidelity_reasons",
    "variant",
    "topology",
    "wan_bw",
    "wan_delay",
    "rank_order",
    "bottleneck_model",
    "busiest_link",
    "bottleneck_measured",
)
MAX_ROWS = 20_000  # ten of the largest sweeps a scenario may ask for, in one folder
REQUIRED = ("key", "label", "status", "run_dir")  # every row has them; a point that ran also its coordinates:
COORDINATES = {
    "replicator": None,
    "nodes": (1, MAX_EMULATED_NODES),
    "bw_bps": (MIN_RATE_BPS, MAX_RATE_BPS),
    "delay_ms": (0, MAX_EMULATED_DELAY_S * 1e3),
    "step_time_s": None,
}
LARGEST = 1e18  # no time (s) or byte count a point measures comes near: keeps the figures' axes finite
_NONNEGATIVE = {m.key for m in METRICS if m.unit in ("s", "B")}
NUMERIC = tuple(
    dict.fromkeys(
        (
            "nodes",
            "bw_bps",
            "delay_ms",
            *csv_measured(),
            *(predicted_column(k) for k in csv_predicted()),
            "params",
            "dilation",
        )
    )
)


def is_sweep(folder: Path) -> bool:
    """A sweep folder has a summary.csv (a run directory has a run.json instead)."""
    return (folder / SUMMARY).is_file()


def read_summary(out: Path) -> pd.DataFrame:
    """summary.csv with its text columns as text and its numbers checked; an empty frame with the key columns when there
    is none yet.

    BadInput when the file is a link, a FIFO, not UTF-8 or not a CSV, lacks a column, or holds something other than a
    finite number where one belongs.
    """
    path = out / SUMMARY
    if not os.path.lexists(path):
        return pd.DataFrame(columns=["key", "status", "run_dir"])
    return checked_summary(read_csv(path, TEXT, max_rows=MAX_ROWS), path)


def checked_summary(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """A summary read from ``path`` (named in messages) with its columns, numbers and points checked: the verdict
    :func:`read_summary` gives, which a command that rewrites summary.csv asks of its new table before writing it."""
    missing = [c for c in REQUIRED if c not in frame]
    if missing:
        raise BadInput(f"{path}: no column {', '.join(map(repr, missing))}")
    for column in TEXT:
        if column in frame:
            frame[column] = frame[column].fillna("")
    for column in (c for c in NUMERIC if c in frame and c not in TEXT):
        low = 0.0 if column.removeprefix("pred_") in _NONNEGATIVE else -LARGEST
        values = numeric_column(frame, column, path, low, LARGEST)
        whole = values.notna().all() and (values % 1 == 0).all()
        frame[column] = values.astype("int64") if whole and column in ("nodes", "params") else values
    _check_points(frame[frame["status"] == "ok"], path)
    return frame


def _check_points(ok: pd.DataFrame, path: Path) -> None:
    """Every point that ran has its coordinates, each within what netbench can emulate (figures put them on log
    axes).
    """
    if ok.empty:
        return
    for column, bounds in COORDINATES.items():
        if column not in ok:
            raise BadInput(f"{path}: a point that ran (status ok) but no column {column!r}")
        if bounds is None:
            continue
        values = ok[column]
        if not values.between(*bounds).all() or (column == "nodes" and (values % 1 != 0).any()):
            raise BadInput(
                f"{path}: column {column!r}: every point that ran needs a "
                f"{'whole ' if column == 'nodes' else ''}number between {bounds[0]:g} and {bounds[1]:g} there"
            )
    if "step_time_s" in ok and (ok["step_time_s"] <= 0).any():
        raise BadInput(f"{path}: column 'step_time_s': a point that ran took no time")


def write_summary(out: Path, frame: pd.DataFrame) -> None:
    """Atomic rewrite, so an interrupted sweep never leaves half a CSV behind."""
    with safe_files.replace_from(out / SUMMARY) as fh:  # a fresh temporary name: never through a planted symlink
        frame.to_csv(fh, index=False)


def run_path(out: Path, run_dir: object) -> Path | None:
    """A row's run directory (stored relative to the sweep folder, so a copied folder still resolves).

    None unless it stays inside the folder: an absolute path, ``..`` or a link leading out is not
    this sweep's run, and reading it would put another folder's files into this report.
    """
    if not isinstance(run_dir, str) or not run_dir or "\0" in run_dir:
        return None
    relative = Path(run_dir)
    if relative.is_absolute() or ".." in relative.parts:
        return None
    path = out / relative
    inside = os.path.realpath(path).startswith(os.path.join(os.path.realpath(out), ""))
    return path if inside else None


class _Lax(BaseModel):
    model_config = ConfigDict(extra="allow")


class SweepGrid(_Lax):
    bw: list[str] = []
    replicator: list[str] = []
    nodes: list[int | str] = []
    delay: list[str] = []


class SweepWorkload(_Lax):
    kind: str | None = None
    shapes: str | None = None
    compute_ms: float | None = None


class SweepScenarioDoc(_Lax):
    name: str = "?"
    description: str = ""
    grid: SweepGrid = Field(default_factory=SweepGrid)
    workload: SweepWorkload = Field(default_factory=SweepWorkload)
    steps: int | None = None
    warmup: int | None = None


class SweepCalibrationDoc(_Lax):
    source: str | None = None
    path: str | None = None
    created: str | None = None


class SweepDoc(_Lax):
    """The parts of sweep.json a report shows, typed (the rest is kept as it was: re-predicting writes it back)."""

    scenario: SweepScenarioDoc = Field(default_factory=SweepScenarioDoc)
    calibration: SweepCalibrationDoc = Field(default_factory=SweepCalibrationDoc)


def sweep_doc(doc: dict[str, Any], folder: Path) -> SweepDoc:
    """sweep.json's typed view (BadInput naming the first field of the wrong type)."""
    return validated(SweepDoc, doc, folder / SWEEP_JSON)


def read_sweep_json(folder: Path) -> dict[str, Any]:
    """sweep.json as a dict ({} when the folder has none), its shown fields checked for type."""
    path = folder / SWEEP_JSON
    if not os.path.lexists(path):
        return {}
    doc = read_json_object(path)
    sweep_doc(doc, folder)
    return doc


def write_sweep_doc(folder: Path, doc: dict[str, Any]) -> None:
    """sweep.json, written atomically."""
    safe_files.write_text(folder / SWEEP_JSON, json.dumps(doc, indent=2) + "\n")
