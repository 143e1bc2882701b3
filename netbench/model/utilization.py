"""What a capacity planner asks first: compute utilisation, the bandwidth a target needs, a token budget's cost.

Compute utilisation is the share of wall time spent on forward and backward (the Streaming DiLoCo paper's
definition, arXiv 2501.18512 section 3.1): compute / step. The bandwidth needed for a target is found by a bracketed
search on log(bandwidth) (:func:`~netbench.model.search.sign_change_log`) over the planner's range (utilisation never
falls as bandwidth grows); published tables quote it on a grid (Streaming DiLoCo's Table 4: 50 log-spaced points from
0.1 to 1000 Gbit/s), which :func:`on_grid` gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from netbench.declarations.phases import run_time_s
from netbench.model.planner import BW_RANGE_BPS
from netbench.model.schemes import Scheme
from netbench.model.search import sign_change_log
from netbench.model.steptime import Scenario, StepEstimate
from netbench.settings import Setting, table

__all__ = [
    "Utilization",
    "utilization_of",
    "bandwidth_for",
    "curve",
    "token_budget",
    "log_grid",
    "on_grid",
    "PAPER_GRID",
    "DEFAULT_TARGETS",
]

DEFAULT_TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)


def log_grid(lo_bps: float, hi_bps: float, points: int) -> list[float]:
    """``points`` log-spaced bandwidths from ``lo_bps`` to ``hi_bps`` (both included)."""
    if points < 2:
        return [lo_bps]
    step = math.log(hi_bps / lo_bps) / (points - 1)
    return [lo_bps * math.exp(i * step) for i in range(points)]


PAPER_GRID = tuple(log_grid(0.1e9, 1000e9, 50))  # Streaming DiLoCo's Table 4 bandwidths (bit/s)


def on_grid(bw_bps: float | None, grid: Sequence[float] = PAPER_GRID) -> float | None:
    """The first grid bandwidth at or above ``bw_bps`` (None past the grid's end or without an answer)."""
    if bw_bps is None:
        return None
    return next((g for g in grid if g >= bw_bps * (1 - 1e-9)), None)


@dataclass(frozen=True)
class Utilization:
    """One scheme in one scenario: its step and the share of it spent computing."""

    estimate: StepEstimate

    @property
    def value(self) -> float:
        est = self.estimate
        return est.compute_time_s / est.step_time_s if est.step_time_s > 0 else 1.0


StepFn = Callable[[Scheme, Scenario], StepEstimate]


def at_bandwidth(scenario: Scenario, bw_bps: float) -> Scenario:
    """The scenario with its bottleneck rate set to ``bw_bps`` (the up/down ratio kept)."""
    scale = bw_bps / scenario.bw_bps
    return scenario.model_copy(update={"up_bps": scenario.up_bps * scale, "down_bps": scenario.down_bps * scale})


def utilization_of(step: StepFn, scheme: Scheme, scenario: Scenario) -> float:
    return Utilization(step(scheme, scenario)).value


def bandwidth_for(step: StepFn, scheme: Scheme, scenario: Scenario, target: float) -> dict:
    """The bandwidth at which ``scheme`` reaches compute utilisation ``target``, or why there is none."""
    out: dict = {"replicator": scheme.name, "nodes": scenario.workers, "target": target, "bw_bps": None}
    if scenario.compute_s <= 0:
        return out | {"reason": "compute time is 0 (pass --compute-ms or --accelerator with a batch)"}
    lo, hi = BW_RANGE_BPS

    allowed = scenario.compute_s / target  # the longest step that meets the target

    def gap(bw: float) -> float:
        # utilisation >= target where the step is at most ``allowed``: a step is a constant plus bytes over the
        # bandwidth, a straight line in 1 / bandwidth, which the search's secant meets in a few evaluations
        return allowed - step(scheme, at_bandwidth(scenario, bw)).step_time_s

    top = utilization_of(step, scheme, at_bandwidth(scenario, hi))
    if top < target:
        return out | {"reason": f"utilisation reaches only {top:.3f} even at {hi:.0e} bit/s", "max_utilization": top}
    if utilization_of(step, scheme, at_bandwidth(scenario, lo)) >= target:
        return out | {"bw_bps": lo, "reason": f"met at {lo:.0e} bit/s already"}
    bw = sign_change_log(gap, lo, hi, rel_tol=1e-6)
    bw *= 1 + 2e-6  # the bracket's upper side: the target is met there
    return out | {"bw_bps": bw, "grid_bps": on_grid(bw), "reason": None}


def curve(step: StepFn, scheme: Scheme, scenario: Scenario, grid: Sequence[float]) -> list[tuple[float, float]]:
    """(bandwidth, utilisation) at every grid bandwidth."""
    return [(bw, utilization_of(step, scheme, at_bandwidth(scenario, bw))) for bw in grid]


def token_budget(
    est: StepEstimate, tokens: float, tokens_per_step: float, dense: tuple[int, StepEstimate] | None = None
) -> dict:
    """Wall time, compute time and bytes per node to train ``tokens`` at ``tokens_per_step`` a step: ``dense``, the
    steps that open the run in phases that end and the step there (1-bit Adam's dense warm-up), prices those first
    steps at their own step, the rest at ``est``."""
    steps = math.ceil(tokens / tokens_per_step)
    opening, first = dense if dense is not None else (0, est)

    def total(per_step: Callable[[StepEstimate], float]) -> float:
        return run_time_s(steps, opening, per_step(first), per_step(est))

    return {
        "tokens": tokens,
        "steps": steps,
        "dense_steps": min(steps, opening),
        "wall_s": total(lambda e: e.step_time_s),
        "compute_s": total(lambda e: e.compute_time_s),
        "bytes_per_node": total(lambda e: e.tx.total),
    }


# The planner's questions of any backend: utilisation targets, a token budget, a figure
UTILIZATION_SETTINGS = table(
    (
        Setting(
            "--target-utilization",
            "target_utilization",
            "text",
            "compute utilisation targets, e.g. 0.5,0.9,0.99 (default: 0.5,0.8,0.9,0.95,0.99): the bandwidth each "
            "needs per replicator and node count.",
        ),
        Setting(
            "--tokens",
            "tokens",
            "text",
            "a token budget, e.g. 1e12: wall time and bytes per node to train it (with the batch).",
        ),
        Setting(
            "--figure",
            "figure",
            "path",
            "write compute utilisation against bandwidth, a curve per replicator (.png .svg .pdf).",
        ),
    )
)
