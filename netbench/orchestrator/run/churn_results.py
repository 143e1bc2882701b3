"""A run through churn against the goodput model: the model's rules played over the run's own leaves and joins.

:func:`netbench.model.goodput.simulate` trains through the run's schedule (its fixed rows or its ``--churn`` draws)
window after window at the model's step for the members in force (each segment's prediction), with the run's own
recovery: the replicator's commit period, the modelled heal, the lighthouse's wait after a leave, the run's bound on
a wait on peers (a member gone while it asked for a quorum), a joining worker's measured start and the modelled
configuration of a re-formed quorum's process group (the median over the segments'). Its committed
steps per second set beside the run's give ``goodput_model_error``. The same rules answer ``plan --mtbf``; here they
answer for the changes that happened, so the error is the rules', not the draw's. Each change lands in the model's
windows, not the run's: a leave the run took inside an exchange (a heal of the survivors) may fall before it in the
model, so over a schedule of one or two changes the figure swings by a heal; over a random churn of many it settles.
``churn_model_error`` (:mod:`~netbench.orchestrator.run.schedule_results`) instead prices each segment's changes as
they happened.
"""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING, Any

import pandas as pd

from netbench.declarations.registry import spec
from netbench.model.goodput import QUORUM_WAIT_S, Recovery, Simulated, StepAt, simulate, window_shape
from netbench.rundir.churn_figures import span_s
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps

if TYPE_CHECKING:
    from netbench.orchestrator.config import RunConfig

__all__ = ["restart_s", "run_recovery", "simulate_run", "churn_model"]


def restart_s(steps: pd.DataFrame, applied: list[dict[str, Any]], dilation: float) -> float:
    """A joining worker's start in the cluster's seconds: from each join as applied to the first step any node began
    after it, the median (0 for a run without a join)."""
    joins = [float(a["wall_time"]) for a in applied if "joined" in str(a.get("what", ""))]
    starts = []
    for at in joins:
        after = steps.loc[steps[Col.T_START] > at, Col.T_START]
        if not after.empty:
            starts.append(float(after.min() - at) / dilation)
    return median(starts) if starts else 0.0


def run_recovery(
    config: RunConfig, steps: pd.DataFrame, found: list[dict[str, Any]], cluster: dict[str, Any], dilation: float
) -> tuple[StepAt, Recovery] | None:
    """The model's step per member count (the nearest segment's prediction) and the run's recovery, as
    :func:`~netbench.model.goodput.simulate` takes them; None where no segment was priced or the run recorded no
    bound on its waits on peers (a run without a quorum)."""
    step_of = {
        s["members"]: (s["predicted_step_time_s"], s.get("predicted_comm_time_s") or 0.0)
        for s in found
        if s.get("predicted_step_time_s") is not None
    }
    timeout = (cluster.get("quorum") or {}).get("exchange_timeout_s")
    if not step_of or timeout is None:
        return None
    period = spec(config.replicator.name).period(config.replicator)
    counts = sorted(step_of)

    def step_at(members: int) -> tuple[float, float, float]:
        return window_shape(*step_of[min(counts, key=lambda m: abs(m - members))], period)

    heals = [s["predicted_heal_s"] for s in found if "predicted_heal_s" in s]
    reforms = [s["predicted_reform_s"] for s in found if "predicted_reform_s" in s]
    recovery = Recovery(
        period=period,
        heal_s=heals[0] if heals else 0.0,
        quorum_wait_s=QUORUM_WAIT_S,
        restart_s=restart_s(steps, (cluster.get("schedule") or {}).get("applied", []), dilation),
        exchange_timeout_s=float(timeout),
        reform_s=median(reforms) if reforms else 0.0,
    )
    return step_at, recovery


def simulate_run(
    config: RunConfig, steps: pd.DataFrame, found: list[dict[str, Any]], cluster: dict[str, Any], dilation: float
) -> tuple[StepAt, Recovery, Simulated] | None:
    """The model's rules trained through the run's own leaves and joins over its measured steps' span, with the step
    and recovery they took (:func:`run_recovery`); None where that has nothing to price."""
    priced = run_recovery(config, steps, found, cluster, dilation)
    if priced is None or config.schedule is None:
        return None
    names = [n.name for n in config.cluster.topology.nodes]
    return *priced, simulate(config.schedule.changes, names, span_s(measured_steps(steps)), *priced)


def churn_model(
    config: RunConfig,
    steps: pd.DataFrame,
    found: list[dict[str, Any]],
    cluster: dict[str, Any],
    dilation: float,
    goodput: float | None,
) -> dict[str, Any]:
    """The goodput the model's rules give over the run's own changes (``goodput_model_steps_per_s``) and its error
    against the run's ``goodput`` (``goodput_model_error``), and how often they lose the training and start it
    afresh (``restarts_model``, beside the run's recorded ``restarts``); nothing for a run without a quorum or a
    change."""
    if config.schedule is None or not any(c.member in ("leave", "join") for c in config.schedule.changes):
        return {}
    replayed = simulate_run(config, steps, found, cluster, dilation) if goodput else None
    if replayed is None:
        return {}
    simulated = replayed[2]
    if simulated.committed_steps == 0:
        return {"goodput_model_steps_per_s": 0.0, "restarts_model": simulated.restarts}
    return {
        "goodput_model_steps_per_s": simulated.steps_per_s,
        "goodput_model_error": simulated.steps_per_s / goodput - 1,
        "restarts_model": simulated.restarts,
    }
