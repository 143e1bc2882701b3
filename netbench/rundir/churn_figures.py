"""What churn cost a run that trains through it: steps lost, heals, goodput (from steps.csv's quorum columns).

A step is *lost* when a node ran it but it was not committed (a peer left during its exchange, or its quorum
changed): the node runs it again. A *heal* is a node catching up from a live peer: the weights and optimizer state it
received (``heal_bytes``) and how long that took. *Goodput* is the training's committed steps per wall second of
the emulated cluster (a dilated run's wall time divided back, as its durations are): each committed step is
recorded by every node of its quorum, so a row counts ``1 / quorum_replicas`` of a step. Goodput counts a step the
training later lost to a restart (:mod:`netbench.rundir.restarts`); the *progress kept*, :func:`kept_steps_per_s`,
counts only the steps it holds at the run's end.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from netbench.rundir.steps_schema import Col

__all__ = ["churn_figures", "committed_steps", "healed", "kept_steps_per_s", "span_s"]


def healed(rows: pd.DataFrame) -> pd.Series:
    """Which rows healed their node (it received a live peer's state that step); all False without the column."""
    if Col.HEAL_BYTES not in rows:
        return pd.Series(False, index=rows.index)
    return rows[Col.HEAL_BYTES].fillna(0) > 0


def span_s(rows: pd.DataFrame) -> float:
    """The steps' span in the emulated cluster's seconds: the schedule's clock (wall time divided by the run's
    dilation), which every run through churn has; the wall clock otherwise."""
    if Col.SCHEDULE_ELAPSED_S in rows and rows[Col.SCHEDULE_ELAPSED_S].notna().all():
        elapsed = pd.to_numeric(rows[Col.SCHEDULE_ELAPSED_S])
        return float((elapsed + rows[Col.STEP_S]).max() - elapsed.min())
    return float(rows[Col.T_END].max() - rows[Col.T_START].min())


def committed_steps(rows: pd.DataFrame) -> float:
    """The training's committed steps among ``rows``: every member of a quorum records its step, so a committed row
    counts ``1 / quorum_replicas`` of one."""
    done = rows[rows[Col.COMMITTED].fillna(False).astype(bool)]
    return float((1.0 / done[Col.QUORUM_REPLICAS].clip(lower=1)).sum())


def _quorum_rows(measured: pd.DataFrame) -> pd.DataFrame:
    """The measured rows a quorum decided (committed or not): goodput's steps and span."""
    return measured[measured[Col.COMMITTED].notna()]


def kept_steps_per_s(measured: pd.DataFrame, since: float) -> float | None:
    """The progress kept per second: the committed steps among the measured ones that ended at or after ``since``
    (wall time: when the training last started afresh) over goodput's span; goodput itself where ``since`` precedes
    them all. None where goodput has none."""
    rows = _quorum_rows(measured)
    span = span_s(rows) if len(rows) else 0.0
    return committed_steps(rows[rows[Col.T_END] >= since]) / span if span > 0 else None


def churn_figures(measured: pd.DataFrame) -> dict[str, Any]:
    """The summary's churn figures from the measured (post-warm-up) steps; {} for a run without a quorum."""
    if Col.COMMITTED not in measured or measured[Col.COMMITTED].isna().all():
        return {}
    rows = _quorum_rows(measured)
    committed = rows[Col.COMMITTED].astype(bool)
    heals = rows[healed(rows)]
    span = span_s(rows)
    out: dict[str, Any] = {"steps_lost": int((~committed).sum()), "heals": len(heals)}
    if len(heals):
        out["heal_bytes"] = float(heals[Col.HEAL_BYTES].median())
        out["heal_time_s"] = float(heals[Col.HEAL_S].median())
    if span > 0:
        out["goodput_steps_per_s"] = committed_steps(rows) / span
    return out
