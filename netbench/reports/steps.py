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
from netbench.rundir.reading import BadInput, read_csv
from netbench.rundir.steps_schema import REQUIRED, Col
from netbench.rundir.summary import measured_steps, metric

__all__ = ["Spread", "read_steps", "per_step", "spread", "step_time_spread", "WIRE_COLUMNS"]

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


def read_steps(
    run_dir: Path | None, columns: tuple[str, ...] | None = None, kind: untrusted.Kind = untrusted.RUN_FILE
) -> pd.DataFrame | None:
    """A run's steps.csv, or None where the run directory (or its file) is not there or is not one netbench wrote.

    Read as untrusted input: a link, a FIFO, text that is not UTF-8 or a table without numbers
    where they belong counts as absent (the point is drawn without its per-step spread), never as
    a hang or a crash. Non-finite or negative times are dropped row by row. ``columns``: the ones
    the caller needs besides the required ones (all where None), the only ones converted.
    """
    if run_dir is None or not os.path.lexists(RunDir(run_dir).steps_csv):
        return None
    try:
        frame = read_csv(RunDir(run_dir).steps_csv, kind=kind)
    except BadInput:
        return None
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
    rest of :func:`per_step`.
    """
    steps = read_steps(run_dir, columns=(), kind=untrusted.POINT_STEPS)  # a sweep's report reads thousands
    if steps is None:
        return None
    return spread(measured_steps(steps).groupby(Col.STEP)[Col.STEP_S].max().to_numpy(dtype=float))


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
