"""How a run's network misbehaved: stalls, retransmissions, and its slowdown against the model.

A lossy or flapping link does not fail a run, it slows it, and a median step time hides most of
that (a retransmission timeout hits a few steps hard and leaves the rest alone). So a run's
summary also says:

* ``stalls``: steps that took far longer than the run's typical step at the slowest node,
  more than ``STALL_FACTOR`` x the median and at least ``STALL_MIN_S``: a link that went down and
  came back, or a burst of losses that ran into TCP's retransmission timeout;
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

from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import reduced_metrics

STALL_FACTOR = 5.0
STALL_MIN_S = 2.0


def stalls(steps: pd.DataFrame) -> list[dict[str, Any]]:
    """Steps (warm-up included) whose slowest node took over STALL_FACTOR x the median step and STALL_MIN_S."""
    if steps.empty or Col.STEP_S not in steps:
        return []
    slowest = steps.groupby(Col.STEP)[Col.STEP_S].max()
    typical = float(slowest.median())
    limit = max(STALL_MIN_S, STALL_FACTOR * typical)
    return [
        {"step": int(step), "seconds": round(float(seconds), 3), "typical_s": round(typical, 3)}
        for step, seconds in slowest.items()
        if seconds > limit
    ]


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
