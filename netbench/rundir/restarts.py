"""The times a run's training was lost and started afresh, from steps.csv's ``restart_quorum``.

A worker marks the step whose quorum held no member past step 0 after the run began (torchft's ``max_step``: every
node that held the training had left). Every member of that quorum marks it with the quorum's id. A marked quorum
whose step was not committed (a node back in it left) leaves its members at step 0, so the next marked quorum starts
the same fresh training: the two are one restart. A restart throws away the committed steps since the training last
started (the run's start or the restart before), counted up to the end of its quorum's step (the quorum formed after
the last node holding the training left): each committed row counts ``1 / quorum_replicas`` of a step, as goodput
counts them. For ``diloco`` the fresh nodes' inner steps before their first sync end before that, so each restart's
count is good to a window. One that threw away nothing (a quorum at step 0 before any commit) is no restart.

The *progress kept* is what the training holds at the run's end: the committed steps since the last restart
(``kept_steps``, warm-up included: the optimizer steps its weights have taken), and those of them the measured steps
trained per second of goodput's span (``kept_steps_per_s``; goodput where no restart threw anything away).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from netbench.rundir.churn_figures import committed_steps, kept_steps_per_s
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps

__all__ = ["training_restarts", "restart_figures"]


def _committed_between(rows: pd.DataFrame, after: float, until: float) -> float:
    """The training's committed steps that ended in [after, until): each row 1 / its quorum's members."""
    return committed_steps(rows[(rows[Col.T_END] >= after) & (rows[Col.T_END] < until)])


def training_restarts(steps: pd.DataFrame) -> list[dict[str, Any]]:
    """Each restart: its quorums' ids, when (``time_s`` from the first measured step where the run has a schedule's
    clock; ``t_end``, the wall time its quorum's step ended), the lowest step number marked, the nodes in its quorums,
    and ``committed_steps_lost``; [] for a run that records no restarts."""
    if Col.RESTART_QUORUM not in steps or Col.COMMITTED not in steps:
        return []
    marked = steps[steps[Col.RESTART_QUORUM].notna()]
    if marked.empty:
        return []
    kept = steps[Col.COMMITTED].fillna(False).astype(bool)
    quorums = sorted(
        ((float(rows[Col.T_END].min()), int(qid), rows) for qid, rows in marked.groupby(Col.RESTART_QUORUM)),
        key=lambda q: q[0],
    )
    found: list[dict[str, Any]] = []
    began, advanced = float("-inf"), True  # when the training last started; whether it committed since
    for at, qid, rows in quorums:
        members = {int(r) for r in rows[Col.RANK]}
        if found and not advanced:  # the last restart's quorums committed nothing: the same fresh training
            found[-1]["quorums"].append(qid)
            found[-1]["members"] = sorted(set(found[-1]["members"]) | members)
        else:
            lost = _committed_between(steps, began, at)
            if lost > 0:
                entry: dict[str, Any] = {
                    "quorums": [qid],
                    "t_end": at,
                    "step": int(rows[Col.STEP].min()),
                    "members": sorted(members),
                    "committed_steps_lost": round(lost, 3),
                }
                if Col.SCHEDULE_ELAPSED_S in rows and rows[Col.SCHEDULE_ELAPSED_S].notna().any():
                    entry["time_s"] = float(pd.to_numeric(rows[Col.SCHEDULE_ELAPSED_S]).min())
                found.append(entry)
                began = at
        advanced = bool(kept[rows.index].any())
    return found


def restart_figures(steps: pd.DataFrame) -> dict[str, Any]:
    """The summary's restart figures: how many (``restarts``), the committed steps they threw away in all
    (``restart_steps_lost``) and each one (``restart_events``), and the progress kept (``kept_steps``,
    ``kept_steps_per_s``); {} for a run without a quorum column."""
    if Col.RESTART_QUORUM not in steps or Col.COMMITTED not in steps:
        return {}
    found = training_restarts(steps)
    since = found[-1]["t_end"] if found else float("-inf")
    out: dict[str, Any] = {
        "restarts": len(found),
        "restart_steps_lost": round(sum(r["committed_steps_lost"] for r in found), 3),
        "restart_events": found,
        "kept_steps": round(committed_steps(steps[steps[Col.T_END] >= since]), 3),
    }
    kept_rate = kept_steps_per_s(measured_steps(steps), since)
    if kept_rate is not None:
        out["kept_steps_per_s"] = kept_rate
    return out
