"""Per-step figures of a run, read back from its steps.csv: the spread behind a summary's median.

A summary gives one number per point; figures and comparisons also need how much the steps
varied. Each run directory's ``steps.csv`` has one row per node per step; here every step is
reduced as the summary reduces a run (time at the slowest node, bytes per node), warm-up
steps dropped. Sweep folders whose ``runs/`` are gone (committed reports keep only
summary.csv) have no per-step data: callers get None and say so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from netbench import untrusted
from netbench.rundir.layout import RunDir
from netbench.rundir.reading import parse_csv
from netbench.rundir.steps_schema import REQUIRED, Col
from netbench.rundir.summary import measured_steps, metric

__all__ = ["Spread", "read_steps", "per_step", "spread", "step_series", "step_time_spread", "WIRE_COLUMNS"]

_WIRE_TX = metric("wire_tx_bytes_per_step")
# a step's wire bytes sent: the capture's MTU frames where captured, else the interface counters (the summary's sources)
WIRE_COLUMNS = (metric(_WIRE_TX.captured).source, _WIRE_TX.source)


@dataclass(frozen=True)
class Spread:
    """Quartiles and median absolute deviation of one per-step series."""

    n: int
    median: float
    q1: float
    q3: float
    mad: float

    @property
    def median_error(self) -> float:
        """Standard error of the median, from the MAD (normal-consistent: 1.4826 MAD ~ sigma; s.e. ~ 1.2533 sigma /
        sqrt(n)).
        """
        return 1.4826 * 1.2533 * self.mad / self.n**0.5


def _steps_path(run_dir: Path | None, kind: untrusted.Kind) -> Path | None:
    """The run's steps.csv where there is one within ``kind``'s cap (a larger one: the point is drawn without its
    per-step spread), else None."""
    path = RunDir(run_dir).steps_csv if run_dir is not None else None
    if path is None or not os.path.lexists(path):
        return None
    if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) > kind.max_bytes:
        return None
    return path


def read_steps(
    run_dir: Path | None, columns: tuple[str, ...] | None = None, kind: untrusted.Kind = untrusted.RUN_FILE
) -> pd.DataFrame | None:
    """A run's steps.csv, or None where the run directory has none, where it holds more than ``kind`` allows (the
    point is drawn without its per-step spread) or where it lacks the columns a spread needs.

    Read as untrusted input, with the verdict every command gives the file (:func:`~netbench.rundir.reading.read_csv`):
    a link, a FIFO, text that is not UTF-8 or not a CSV table is :class:`BadInput`. Non-finite or negative times are
    dropped row by row. ``columns``: the ones the caller needs besides the required ones (all where None), the only
    ones converted. Read and converted once per command, however many summary rows name the run.
    """
    path = _steps_path(run_dir, kind)
    if path is None:
        return None
    frame = untrusted.parsed(path, kind, f"steps {columns}", lambda text: _steps(text, path, columns))
    return None if frame is None else frame.copy()


def _steps(text: str, path: Path, columns: tuple[str, ...] | None) -> pd.DataFrame | None:
    frame = parse_csv(text, path)
    if not set(REQUIRED) <= set(frame.columns) or frame.empty:
        return None
    wanted = (Col.STEP, Col.RANK, Col.STEP_S, Col.WARMUP, *((Col.LOSS, *WIRE_COLUMNS) if columns is None else columns))
    for column in dict.fromkeys(wanted):
        if column in frame:
            values = pd.to_numeric(frame[column], errors="coerce") if column != Col.WARMUP else _flags(frame[column])
            frame[column] = values.where(np.isfinite(values.astype(float))) if column != Col.WARMUP else values
    frame = frame[frame[Col.STEP].notna() & frame[Col.RANK].notna() & (frame[Col.STEP_S] >= 0)]
    return frame if not frame.empty else None


def _flags(column: pd.Series) -> pd.Series:
    """steps.csv's warm-up flags (True/False, 1/0) as booleans; anything else counts as a measured step."""
    return column.astype(str).str.strip().str.lower().isin(("true", "1", "1.0"))


def per_step(steps: pd.DataFrame, include_warmup: bool = False) -> pd.DataFrame:
    """One row per step: step_s at the slowest node, wire bytes per node (median over nodes), mean loss."""
    frame = steps if include_warmup else measured_steps(steps)
    by_step = frame.groupby(Col.STEP)
    out = pd.DataFrame({Col.STEP_S: by_step[Col.STEP_S].max()})
    for column in WIRE_COLUMNS:
        if column in frame and frame[column].notna().any():
            out["wire_tx_bytes"] = by_step[column].median()
            break
    if Col.LOSS in frame:
        out[Col.LOSS] = by_step[Col.LOSS].mean()
    if Col.WARMUP in frame:
        out[Col.WARMUP] = by_step[Col.WARMUP].max().astype(bool)
    return out.reset_index()


def step_time_spread(run_dir: Path | None) -> Spread | None:
    """The spread of a run's step time at the slowest node over its measured steps; None without usable steps.

    The one figure a sweep's plots need from each of its (possibly thousands of) steps.csv, computed without the
    rest of :func:`per_step`, once per command for each file.
    """
    path = _steps_path(run_dir, untrusted.POINT_STEPS)  # a sweep's report reads thousands
    if path is None:
        return None
    return untrusted.parsed(path, untrusted.POINT_STEPS, "step time spread", lambda text: _time_spread(text, path))


def _time_spread(text: str, path: Path) -> Spread | None:
    steps = _steps(text, path, columns=())
    if steps is None:
        return None
    return spread(measured_steps(steps).groupby(Col.STEP)[Col.STEP_S].max().to_numpy(dtype=float))


def step_series(run_dir: Path | None) -> pd.DataFrame | None:
    """:func:`per_step` of a run's steps.csv, warm-up steps included (a loss curve's points); None without steps.
    Made once per command for each file."""
    path = _steps_path(run_dir, untrusted.RUN_FILE)
    if path is None:
        return None
    series = untrusted.parsed(path, untrusted.RUN_FILE, "per-step series", lambda text: _series(text, path))
    return None if series is None else series.copy()


def _series(text: str, path: Path) -> pd.DataFrame | None:
    steps = _steps(text, path, columns=None)
    if steps is None:
        return None
    return per_step(steps, include_warmup=True).sort_values(Col.STEP)


def spread(values: pd.Series | np.ndarray) -> Spread | None:
    """Quartiles and MAD of the finite values; None when there are none."""
    if isinstance(values, np.ndarray) and values.dtype == float:
        v = values[np.isfinite(values)]
    else:
        v = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce").dropna(), dtype=float)
    if v.size == 0:
        return None
    med = float(np.median(v))
    return Spread(
        n=int(v.size),
        median=med,
        q1=float(np.quantile(v, 0.25)),
        q3=float(np.quantile(v, 0.75)),
        mad=float(np.median(np.abs(v - med))),
    )
