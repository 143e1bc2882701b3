"""Goodput under churn for a plan's rows (``plan --mtbf``): each member count's step, the heal, the wall time.

A replicator that trains through churn (its declaration says what state it keeps, so what a heal sends) gets, beside
its plain row, the committed steps per wall second of :func:`netbench.model.goodput.expected_goodput` while nodes
leave every ``--mtbf`` on average and stay away ``--away``: the step at each member count is the plan's own step for
a cluster of that many nodes on the same links, the heal is :func:`netbench.model.heal.heal_time_s` over one node's
link (the slower of up and down) and the one-way delay.

A replicator that commits every step asks for its quorum as the step begins, so a leave anywhere in the step fails
it, for every node (in a run through random churn no survivor of 25 leaves was left a step behind and healed); one
that commits every H steps asks for it at the sync, so only a leave during the sync's exchange fails the window, and
some survivors may commit it. A member gone while it asked for a quorum costs torchft's wait on peers, bounded as `run`
bounds it (:func:`netbench.model.waits.exchange_timeout_s` of the slower of the step's collective and a heal's
largest message). Every re-formed quorum configures a new process group before it trains
(:func:`netbench.model.reform.reform_time_s`). The wall time to ``--tokens`` is until the training holds them,
restarts throwing away what it held
(:meth:`netbench.model.goodput.Goodput.wall_s_to_keep`).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from netbench.declarations.registry import spec
from netbench.model.framing import Framing
from netbench.model.goodput import (
    MIN_QUORUM,
    QUORUM_WAIT_S,
    Goodput,
    Recovery,
    expected_goodput,
    run_goodput,
    window_shape,
)
from netbench.model.heal import heal_bytes, heal_time_s, largest_message_s
from netbench.model.planner import Planner
from netbench.model.reform import reform_time_s
from netbench.model.schemes import Scheme
from netbench.model.view import cluster_scenario
from netbench.model.waits import exchange_timeout_s
from netbench.planning.request import PlanRequest
from netbench.shapes import ParamShape

__all__ = ["churn_settings", "churn_row"]


def churn_settings(request: PlanRequest) -> dict[str, Any]:
    """What the plan's churn is and what it assumes, for the document."""
    return {
        "mtbf_s": request.mtbf,
        "away_s": request.away_s,
        "quorum_wait_s": QUORUM_WAIT_S,
        "min_members": MIN_QUORUM,
        "heal_path": "one node's link (the slower of --up and --down) and --delay",
        **({"for_s": request.churn_for, "run_spread": "10th-90th percentile"} if request.churn_for else {}),
        **({"seed": request.churn_seed} if request.churn_seed is not None else {}),
        **({"steps": request.churn_steps} if request.churn_steps is not None else {}),
    }


def churn_row(
    request: PlanRequest,
    planner: Planner,
    scheme: Scheme,
    shapes: list[ParamShape],
    machines: int,
    compute_s: float,
    framing: Framing,
    tokens: tuple[float, float] | None = None,
    overhead_s: float = 0.0,
) -> dict[str, Any]:
    """Goodput, heal and wall time of ``scheme`` on ``machines`` nodes under the request's churn; ``tokens``: the
    budget and the tokens a step of every node trains, for its wall time; ``overhead_s``: the calibration's software
    time per message, which each of a heal's messages pays."""
    config = scheme.config
    if spec(config.name).kept_state is None:
        return {"reason": f"{config.name} trains with every node throughout: it does not train through churn"}
    if request.gpus_per_node > 1:
        return {"reason": "churn is priced for nodes of one worker (--gpus-per-node 1)"}
    period = spec(config.name).period(config)

    @cache  # the goodput model and the exchange timeout both ask for the whole cluster's step
    def estimate(members: int) -> Any:
        scenario = cluster_scenario(
            members, request.up_bps, request.down_bps, request.delay, compute_s, request.tcp, framing, 1,
            request.intra_bits_per_s, request.algorithm,
        )  # fmt: skip
        return planner.step(scheme, scenario)

    def step_at(members: int) -> tuple[float, float, float]:
        est = estimate(members)
        return window_shape(est.step_time_s, est.comm_time_s, period)

    heal_s = heal_time_s(
        config,
        shapes,
        min(request.up_bps, request.down_bps),
        request.delay,
        tcp=request.tcp,
        framing=framing,
        overhead_s=overhead_s,
    )
    # torchft's waits on peers, bounded as `run` bounds them: the slowest call or a heal's largest message
    largest_s = largest_message_s(config, shapes, min(request.up_bps, request.down_bps), request.delay)
    exchange_s = exchange_timeout_s(max(largest_s, period * estimate(machines).comm_time_s))
    assert request.mtbf is not None
    reform_s = reform_time_s(
        scheme, shapes, machines, min(request.up_bps, request.down_bps), request.delay, compute_s=compute_s,
        tcp=request.tcp, framing=framing,
    )  # fmt: skip
    recovery = Recovery(period=period, heal_s=heal_s, exchange_timeout_s=exchange_s, reform_s=reform_s)
    found = expected_goodput(machines, request.mtbf, request.away_s, step_at, recovery)
    row: dict[str, Any] = {
        **found.as_dict(),
        "heal_bytes": heal_bytes(config, shapes),
        "heal_s": heal_s,
        "exchange_timeout_s": exchange_s,
        "reform_s": reform_s,
        "period": period,
    }
    if request.churn_for is not None:  # one run of that length: its mean and spread over draws, and its seed's
        found_run = run_goodput(
            machines,
            request.mtbf,
            request.away_s,
            request.churn_for,
            step_at,
            recovery,
            request.churn_seed,
            steps=request.churn_steps,
        )
        row["run"] = found_run.as_dict()
    if tokens is not None:
        row.update(_token_budget(found, *tokens))
    return row


def _token_budget(found: Goodput, budget: float, per_step: float) -> dict[str, Any]:
    """The expected wall time until the training holds ``budget`` tokens (``token_budget_wall_s``; None where nothing
    trains), or, where that is out of reach without a checkpoint, how often the training is lost instead
    (``token_budget_restart_every_s``)."""
    steps = found.steps_for_tokens(budget, per_step)
    if found.out_of_reach(steps):
        return {"token_budget_wall_s": None, "token_budget_restart_every_s": 1 / found.restarts_per_s}
    wall = found.wall_s_to_keep(steps)
    return {"token_budget_wall_s": wall if math.isfinite(wall) else None}
