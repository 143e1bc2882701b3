"""How a run's network misbehaved: stalls, retransmissions, and its slowdown against the model.

A lossy or flapping link does not fail a run, it slows it, and a median step time hides most of
that (a retransmission timeout hits a few steps hard and leaves the rest alone). So a run's
summary also says:

* ``stalls``: steps that took far longer than the run's typical step at the slowest node,
  more than ``STALL_FACTOR`` x the median and at least ``STALL_MIN_S``: a link that went down and
  came back, or a burst of losses that ran into TCP's retransmission timeout. Under churn a step
  that heals a node, re-forms the quorum or drops its update is slow by design; such a stall
  carries ``membership`` (what the step did) so that it is not taken for the network's fault;
* ``retrans_segs_per_step`` (from each node's TCP counters; always there) and
  ``retrans_bytes_per_step`` (retransmitted TCP payload seen by the capture), both means per node
  per step, since retransmissions are rare events a median would show as zero; plus
  ``retrans_fraction``, the share of the captured payload that was sent again;
* ``step_time_mean_s``: the slowest node's mean step, which a run's wall time follows;
* ``slowdown_vs_model``: ``step_time_mean_s`` over the model's step time. The model knows the
  link's rate and delay but not its loss, so this is the cost of loss (and stalls) on top of
  a clean link of the same rate and delay: about 1 for a clean run, above 1 for a lossy one.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from netbench.rundir.churn_figures import healed
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import reduced_metrics

STALL_FACTOR = 5.0
STALL_MIN_S = 2.0


def stalls(steps: pd.DataFrame) -> list[dict[str, Any]]:
    """Steps (warm-up included) whose slowest node took over STALL_FACTOR x the median step and STALL_MIN_S, each
    with ``membership`` where a change of the quorum's members explains that node's step
    (:func:`membership_changes`)."""
    if steps.empty or Col.STEP_S not in steps:
        return []
    slowest_row = steps[steps[Col.STEP_S].notna()].groupby(Col.STEP)[Col.STEP_S].idxmax()  # a step none timed: none
    typical = float(steps.loc[slowest_row, Col.STEP_S].median())
    limit = max(STALL_MIN_S, STALL_FACTOR * typical)
    changes = membership_changes(steps)
    found = []
    for step, row in slowest_row.items():
        seconds = float(steps.at[row, Col.STEP_S])
        if seconds > limit:
            stall = {"step": int(step), "seconds": round(seconds, 3), "typical_s": round(typical, 3)}
            if row in changes:
                stall["membership"] = changes[row]
            found.append(stall)
    return found


def membership_changes(steps: pd.DataFrame) -> dict[Any, str]:
    """What each row of a step that a change of members made slow did, by the row's index (empty for a run without
    quorums): ``heal`` (the node received a live peer's state), ``restart`` (the quorum trained afresh),
    ``dropped`` (an update not kept: a peer left during the exchange), ``re-formed`` (the node's quorum held
    another number of nodes than at its previous step, or a node left or joined while the step ran: the nodes
    present differ at its next step), ``left`` (the node's last step before it left: its next step is a fresh
    worker's, numbered from where that worker began) or ``heal sent`` (the step ran while another node received a
    heal, which a live node sends). The first that applies names it."""
    if Col.QUORUM_REPLICAS not in steps or steps[Col.QUORUM_REPLICAS].isna().all():
        return {}
    order = Col.T_START if Col.T_START in steps and steps[Col.T_START].notna().all() else Col.STEP
    frame = steps.sort_values([Col.RANK, order], kind="stable")  # a worker back after a restart numbers from 0 again
    by_rank = frame.groupby(Col.RANK)
    reformed = by_rank[Col.QUORUM_REPLICAS].diff().fillna(0) != 0
    if Col.SCHEDULE_MEMBERS in frame:
        after = by_rank[Col.SCHEDULE_MEMBERS].shift(-1)
        reformed |= after.notna() & (after != frame[Col.SCHEDULE_MEMBERS])
    following = by_rank[Col.STEP].shift(-1)
    absent = pd.Series(float("nan"), index=frame.index)
    heals = healed(frame)
    kinds = {
        "heal": heals,
        "restart": frame.get(Col.RESTART_QUORUM, absent).notna(),
        "dropped": ~frame.get(Col.COMMITTED, absent).fillna(True).astype(bool),
        "re-formed": reformed,
        "left": following.notna() & (following <= frame[Col.STEP]),
        "heal sent": _during_others(frame, heals),
    }
    out: dict[Any, str] = {}
    for kind, marked in kinds.items():
        for row in frame.index[marked]:
            out.setdefault(row, kind)
    return out


def _during_others(frame: pd.DataFrame, marked: pd.Series) -> pd.Series:
    """Rows whose step overlaps in wall time a marked row of another rank (False where steps.csv holds no times)."""
    out = pd.Series(False, index=frame.index)
    if Col.T_START not in frame or Col.T_END not in frame or not marked.any():
        return out
    for _, other in frame[marked].iterrows():
        overlaps = (frame[Col.T_START] < other[Col.T_END]) & (frame[Col.T_END] > other[Col.T_START])
        out |= overlaps & (frame[Col.RANK] != other[Col.RANK])
    return out


def _mean(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame or not frame[column].notna().any():
        return None
    return float(frame[column].mean())


def figures(measured: pd.DataFrame, steps: pd.DataFrame) -> dict[str, Any]:
    """Stalls over every step; retransmissions and the mean step time over the measured (post-warm-up) ones."""
    out: dict[str, Any] = {"stalls": stalls(steps)}
    if measured.empty:
        return out
    out["step_time_mean_s"] = float(measured.groupby(Col.RANK)[Col.STEP_S].mean().max())
    for m in reduced_metrics("mean"):  # retransmitted segments and bytes (rundir/summary.py)
        value = _mean(measured, m.source)
        if value is not None:
            out[m.key] = value
    payload = _mean(measured, Col.CAPTURE_TX_PAYLOAD_BYTES)
    if payload and "retrans_bytes_per_step" in out:
        out["retrans_fraction"] = out["retrans_bytes_per_step"] / payload
    return out


def slowdown(summary: dict[str, Any]) -> dict[str, float]:
    """``{"slowdown_vs_model": ...}`` when the summary has both a mean step and the model's step time."""
    predicted = (summary.get("predicted") or {}).get("step_time_s")
    measured = summary.get("step_time_mean_s")
    if not predicted or measured is None:
        return {}
    return {"slowdown_vs_model": measured / predicted}
