"""One side of a comparison read from a folder someone else may control: a sweep folder or a run directory.

``netbench compare`` runs as root in CI on folders a user hands it, so every file is read as untrusted
input (:mod:`netbench.untrusted`: a regular file, no link, a size cap, strict UTF-8, capped JSON).
Anything unreadable or of the wrong shape is a :class:`CompareError`: one line, exit 2, no value
from the file in it. Text that ends up on a terminal or a CI page (labels, statuses, reasons) has
its control characters removed here, once.

A sweep's ``sweep.json`` records the grid it was asked to run; that grid is the set of points its
``summary.csv`` must hold, which tells a point that went missing from a grid that changed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic

from netbench import untrusted
from netbench.reports.escape import printable
from netbench.reports.steps import per_step, spread
from netbench.rundir.layout import RunDir
from netbench.rundir.reading import BadInput, read_csv
from netbench.rundir.steps_schema import REQUIRED, Col
from netbench.rundir.summary import measured_steps, metric
from netbench.rundir.sweepdir import MAX_ROWS, SUMMARY, SWEEP_JSON, TEXT, run_path
from netbench.units import UnitError, format_rate, parse_rate, parse_time
from netbench.validation import message_of
from netbench.workloads.config import STORED, WorkloadConfig

__all__ = [
    "CompareError",
    "Key",
    "PointFigures",
    "Side",
    "MAX_GRID_POINTS",
    "read_regular",
    "clean_text",
    "key_label",
    "load_side",
]

Key = tuple[str, int, int, float, str]  # replicator, nodes, rate (bit/s), one-way delay (ms), variant
# a recorded scenario's grid, more and points -> (replicator, nodes, rate, delay, variant) as the scenario spells them
GridPoints = Callable[[dict[str, Any]], list[tuple[str, int, str, str, str]]]
WIRE_TX = metric(
    "wire_tx_bytes_per_step"
)  # bytes sent per node per step; its ``captured`` twin is the capture's MTU frames
MAX_GRID_POINTS = 100_000
MAX_TEXT = 200  # characters kept of a label, status or reason
COORDINATES = ("replicator", "nodes", "bw_bps", "delay_ms")
NEEDED_COLUMNS = frozenset({*COORDINATES, "status", "step_time_s", WIRE_TX.key})


class CompareError(ValueError):
    """Bad input to a comparison (one line for the user)."""


@dataclass(frozen=True)
class PointFigures:
    """One side's figures for one point, as read (nan where a figure is missing or unreadable)."""

    label: str
    status: str
    step_time_s: float
    wire_bytes: float
    step_noise_s: float | None  # standard error of the median step time (from the steps' MAD); None without steps.csv
    wire_noise: float | None
    wire_source: str  # "capture" or "counters"
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def broken_figures(self) -> list[str]:
        """What a comparison cannot use: ``step time inf``, ``wire bytes nan`` (missing), a non-finite noise."""
        out = []
        for name, value in {"step time": self.step_time_s, "wire bytes": self.wire_bytes}.items():
            if not (math.isfinite(value) and value >= 0):
                out.append(f"{name} is {value:g}{' (missing or not a number)' if math.isnan(value) else ''}")
        for name, value in {"step times": self.step_noise_s, "wire bytes": self.wire_noise}.items():
            if value is not None and not math.isfinite(value):
                out.append(f"steps.csv {name} are not all finite numbers")
        return out


@dataclass(frozen=True)
class Side:
    """A sweep or run: its points by coordinates, the points it was asked to run, its failures, its workload."""

    points: dict[Key, PointFigures]
    expected: frozenset[Key] | None  # from sweep.json's grid; None where the folder records none
    failed: tuple[PointFigures, ...]  # every row whose status is not ok, duplicates of a coordinate included
    workload: dict[str, Any] | None
    rows: int


def clean_text(value: Any, limit: int = MAX_TEXT) -> str:
    """``value`` as one line of printable text: control and format characters dropped, cut at ``limit``."""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return printable(" ".join(printable(text, len(text) + 1).split()), limit)


def read_regular(path: Path) -> str | None:
    """A file's text read as untrusted input (:mod:`netbench.untrusted`), None where nothing is at ``path``."""
    try:
        return untrusted.read_text_if_present(path, untrusted.RUN_FILE)
    except untrusted.BadInput as exc:
        raise CompareError(str(exc)) from None


def _number(value: Any) -> float:
    """A figure as a float; nan where it is missing or not a number (inf stays inf: both are reported)."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _key(where: str, row: dict[str, Any]) -> Key:
    """A row's coordinates; a CompareError naming the field when one is not a usable value."""
    replicator = clean_text(row.get("replicator"), 64)
    nodes, bw, delay = (_number(row.get(c)) for c in COORDINATES[1:])
    problems = [
        ("replicator", not replicator),
        ("nodes", not (math.isfinite(nodes) and nodes >= 1 and nodes == int(nodes))),
        ("bw_bps", not (math.isfinite(bw) and bw > 0)),
        ("delay_ms", not (math.isfinite(delay) and delay >= 0)),
    ]
    for name, bad in problems:
        if bad:
            raise CompareError(f"{where}: {name} is not a usable coordinate")
    variant = row.get("variant")  # empty on the plain star
    return (
        replicator,
        int(nodes),
        int(round(bw)),
        round(delay, 3),
        clean_text(variant) if isinstance(variant, str) else "",
    )


def _steps_noise(run_dir: Path | None) -> tuple[float | None, float | None]:
    """Standard errors of a run's median step time and wire bytes, from its steps.csv; None where it has none."""
    path = RunDir(run_dir).steps_csv if run_dir is not None else None
    if path is None or not os.path.lexists(path):
        return None, None
    try:
        frame = read_csv(path)  # the verdict `report` gives the same file, and its parse shared with it
    except BadInput as exc:
        raise CompareError(str(exc)) from None
    if not set(REQUIRED) <= set(frame.columns) or frame.empty:
        return None, None
    try:
        steps = per_step(frame)
        every_node_finite = _all_finite(
            measured_steps(frame)[Col.STEP_S]
        )  # each node's step, before the max over nodes
    except (ValueError, TypeError, KeyError):
        raise CompareError(f"{clean_text(path)}: unreadable steps") from None
    step = _noise(steps[Col.STEP_S]) if every_node_finite else math.nan
    wire = _noise(steps["wire_tx_bytes"]) if "wire_tx_bytes" in steps else None
    return step, wire


def _all_finite(values: pd.Series) -> bool:
    return bool(np.isfinite(pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)).all())


def _noise(values: pd.Series) -> float | None:
    """The standard error of the series' median; nan where a value is not a finite number (reported, never averaged
    away).
    """
    if not _all_finite(values):
        return math.nan
    found = spread(values)
    return found.median_error if found else None


def _figures(label: str, summary: dict[str, Any], run_dir: Path | None) -> PointFigures:
    """A point's step time and wire bytes (the capture's MTU frames where captured), with the steps' spread."""
    captured = _number(summary.get(WIRE_TX.captured))
    wire, source = (
        (captured, "capture") if not math.isnan(captured) else (_number(summary.get(WIRE_TX.key)), "counters")
    )
    step_noise, wire_noise = _steps_noise(run_dir)
    return PointFigures(
        label,
        _status(summary.get("status")),
        _number(summary.get("step_time_s")),
        wire,
        step_noise,
        wire_noise,
        source,
        clean_text(summary.get("reason")),
    )


def _status(raw: Any) -> str:
    """``ok`` only for exactly ``ok``; anything else as printable text (``'ok '`` quoted, so it does not read as ok)."""
    if raw == "ok":
        return "ok"
    shown = clean_text(raw, 40)
    return repr(shown) if shown == "ok" else shown or "(none)"


def key_label(key: Key) -> str:
    """A point's coordinates as a label (where its row has none, or CURRENT lacks the point)."""
    return f"{key[0]} {key[1]}n {format_rate(key[2])} {key[3]:g}ms" + (f" {key[4]}" if key[4] else "")


def _run_dir(folder: Path, stored: Any) -> Path | None:
    """A row's run directory, only where it lies inside the sweep folder (as the sweep stores it: relative, no
    ``..``).
    """
    if not isinstance(stored, str) or Path(stored).is_absolute() or ".." in Path(stored).parts:
        return None
    return run_path(folder, stored)


def _summary_rows(folder: Path) -> list[dict[str, Any]]:
    path = folder / SUMMARY
    if not os.path.lexists(path):
        raise CompareError(f"{clean_text(path)}: missing")
    try:
        frame = read_csv(path, TEXT, max_rows=MAX_ROWS)
    except BadInput as exc:
        raise CompareError(str(exc)) from None
    if missing := NEEDED_COLUMNS - set(frame.columns):
        raise CompareError(f"{clean_text(path)}: not a sweep summary (no {', '.join(sorted(missing))} column)")
    return frame.to_dict("records")


def _sweep_side(folder: Path, grid: GridPoints | None) -> Side:
    points: dict[Key, PointFigures] = {}
    failed = []
    rows = _summary_rows(folder)
    for line, row in enumerate(rows, start=2):
        key = _key(f"{clean_text(folder / SUMMARY)}: line {line}", row)
        figures = _figures(clean_text(row.get("label")) or key_label(key), row, _run_dir(folder, row.get("run_dir")))
        if not figures.ok:
            failed.append(figures)
        if key not in points or not figures.ok or figures.broken_figures():  # a failed or broken duplicate of a
            points[key] = figures  # coordinate is what the comparison shows
    expected, workload = _scenario(folder, grid)
    return Side(points, expected, tuple(failed), workload, len(rows))


def _json_object(path: Path) -> dict[str, Any] | None:
    text = read_regular(path)
    if text is None:
        return None
    try:
        doc = untrusted.parse_json(text, path)
    except untrusted.BadInput as exc:
        raise CompareError(str(exc)) from None
    if not isinstance(doc, dict):
        raise CompareError(f"{clean_text(path)}: not a JSON object")
    return doc


def _section(path: Path, doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = doc.get(name)
    if value is not None and not isinstance(value, dict):
        raise CompareError(f"{clean_text(path)}: {name} is not an object")
    return value


def _workload(path: Path, raw: Any) -> dict[str, Any] | None:
    """A recorded workload with its defaults filled in (so two records of one workload compare equal)."""

    if raw is None:
        return None
    try:
        return WorkloadConfig.model_validate(raw, context=STORED).model_dump(mode="json")
    except pydantic.ValidationError as exc:
        raise CompareError(
            f"{clean_text(path)}: workload not readable ({message_of(exc.errors()[0], echo=False)})"
        ) from None


def grid_keys(path: Path, scenario: dict[str, Any], grid: GridPoints) -> frozenset[Key]:
    """The coordinates of every point a recorded scenario asks for (its grid, ``more`` grids and ``[[points]]``).

    ``grid`` expands the recorded scenario into (replicator, nodes, rate, delay, variant) per point; the caller
    hands it in (the sweep's own expansion), so reading a sweep folder needs nothing that runs sweeps. Points on a
    topology file are left out: their node count is the file's, which is not read here.
    """
    unreadable = CompareError(
        f"{clean_text(path)}: grid not readable (grid a table; more and points lists of tables; "
        f"at most {MAX_GRID_POINTS} points)"
    )
    extra = [scenario.get(k) or [] for k in ("more", "points")]
    if not all(isinstance(x, list) for x in extra):
        raise unreadable
    sections = [scenario.get("grid") or {}, *extra[0], *extra[1]]
    if not all(isinstance(x, dict) for x in sections):
        raise unreadable
    if sum(math.prod(len(v) if isinstance(v, list) else 1 for v in x.values()) for x in sections) > MAX_GRID_POINTS:
        raise unreadable
    try:
        combos = grid({k: scenario[k] for k in ("grid", "more", "points") if k in scenario})
        # as the sweep records each point: its up-link rate, and its one-way delay (the up-link's) in ms
        return frozenset(
            (r, n, int(round(parse_rate(b))), round(parse_time(d) * 1e3, 3), v) for r, n, b, d, v in combos
        )
    except pydantic.ValidationError as exc:
        raise CompareError(
            f"{clean_text(path)}: grid not readable ({message_of(exc.errors()[0], echo=False)})"
        ) from None
    except UnitError as exc:
        raise CompareError(f"{clean_text(path)}: grid not readable ({exc.unquoted})") from None


def _scenario(folder: Path, grid: GridPoints | None) -> tuple[frozenset[Key] | None, dict[str, Any] | None]:
    """The grid's points and the workload a sweep.json records (None for either it does not record, and for the
    points without ``grid`` to expand them)."""
    path = folder / SWEEP_JSON
    doc = _json_object(path)
    scenario = _section(path, doc, "scenario") if doc is not None else None
    if scenario is None:
        return None, None
    expected = grid_keys(path, scenario, grid) if "grid" in scenario and grid is not None else None
    return expected, _workload(path, scenario.get("workload"))


def _run_side(run_dir: Path) -> Side:
    path = RunDir(run_dir).run_json
    doc = _json_object(path) or {}
    summary = _section(path, doc, "summary")
    config = _section(path, doc, "config") or {}
    if summary is None:
        raise CompareError(f"{clean_text(path)}: no summary")
    key = _key(clean_text(path), summary)
    figures = _figures(key_label(key), {**summary, "status": doc.get("status", summary.get("status"))}, run_dir)
    workload = _workload(path, config.get("workload")) if isinstance(config, dict) else None
    return Side({key: figures}, frozenset({key}), (figures,) if not figures.ok else (), workload, 1)


def load_side(path: Path, grid: GridPoints | None = None) -> Side:
    """A sweep folder (summary.csv) or one run's directory (run.json), as points by coordinates.

    ``grid``: expands a recorded sweep scenario into its points' coordinates, so that points the scenario asks
    for and the folder lacks count as missing (``netbench compare`` passes the sweep's own expansion).
    """
    if not path.is_dir():
        raise CompareError(f"{clean_text(path)}: {'not a folder' if path.exists() else 'no such folder'}")
    if os.path.lexists(path / SUMMARY):
        return _sweep_side(path, grid)
    if os.path.lexists(RunDir(path).run_json):
        return _run_side(path)
    raise CompareError(f"{clean_text(path)}: neither a sweep folder (summary.csv) nor a run directory (run.json)")
