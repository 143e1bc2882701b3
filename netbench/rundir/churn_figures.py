"""What churn cost a run that trains through it: steps lost, heals, goodput (from steps.csv's quorum columns).

A step is *lost* when a node ran it but it was not committed (a peer left during its exchange, or its quorum
changed): the node runs it again. A *heal* is a node catching up from a live peer: the weights and optimizer state it
received (``heal_bytes``) and how long that took. *Goodput* is the training's committed steps per wall second of
the emulated cluster (a dilated run's wall time divided back, as its durations are): each committed step is
recorded by every node of its quorum, so a row counts ``1 / quorum_replicas`` of a step.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from netbench.rundir.steps_schema import Col

__all__ = ["churn_figures", "healed", "span_s"]


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


def churn_figures(measured: pd.DataFrame) -> dict[str, Any]:
    """The summary's churn figures from the measured (post-warm-up) steps; {} for a run without a quorum."""
    if Col.COMMITTED not in measured or measured[Col.COMMITTED].isna().all():
        return {}
    rows = measured[measured[Col.COMMITTED].notna()]
    committed = rows[Col.COMMITTED].astype(bool)
    heals = rows[healed(rows)]
    replicas = rows.loc[committed, Col.QUORUM_REPLICAS].clip(lower=1)
    span = span_s(rows)
    out: dict[str, Any] = {"steps_lost": int((~committed).sum()), "heals": len(heals)}
    if len(heals):
        out["heal_bytes"] = float(heals[Col.HEAL_BYTES].median())
        out["heal_time_s"] = float(heals[Col.HEAL_S].median())
    if span > 0:
        out["goodput_steps_per_s"] = float((1.0 / replicas).sum()) / span
    return out
