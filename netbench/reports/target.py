"""Time to a target loss: how long each replicator takes to train to the same loss, measured and projected.

A replicator that sends less per step may need more steps to reach a loss; which one gets there
first depends on the link. For runs that train a real workload (transformer, mlp: the shapes
kind's quadratic has no meaningful loss), each run's loss per step (mean over nodes, a trailing
mean over ``SMOOTH`` steps against batch noise) is put against

* measured wall-clock: the cumulative step time at the slowest node, warm-up steps included
  (they train too), and
* projected wall-clock on any link rate: the model's time for the steps to the target there (the predictions
  stored per point, interpolated log-log along the rate axis), phase by phase: a replicator whose declaration opens
  the run with a phase that ends (1-bit Adam's ``freeze_step`` steps of dense all-reduce) has those steps priced at
  the model's step in that phase, the rest at its lasting step (:func:`netbench.declarations.phases.run_time_s`).

The target defaults to the worst replicator's final (smoothed) loss, so every replicator reaches
it. The rate at which the fastest-to-target replicator changes is found on the projection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from netbench.declarations.phases import run_time_s
from netbench.reports.steps import step_series
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import predicted_column
from netbench.rundir.sweepdir import run_path
from netbench.topology.link import MAX_RATE_BPS, MIN_RATE_BPS

__all__ = [
    "SMOOTH",
    "LOSS_KINDS",
    "LossCurve",
    "Pricing",
    "Crossover",
    "TargetGroup",
    "as_pricing",
    "smooth",
    "steps_to_target",
    "measured_time_to",
    "crossovers",
    "rate_text",
    "loss_curves",
    "on_the_narrowest_link",
    "time_to_target",
    "interpolated_step_time",
    "loggable",
]

STEP_MODEL = predicted_column("step_time_s")  # summary.csv's model column
DENSE_MODEL = predicted_column("dense_step_time_s")  # the model's step in the phases that open the run
DENSE_STEPS = predicted_column("dense_steps")  # how many steps those phases last

SMOOTH = 5  # trailing mean over this many steps
LOSS_KINDS = ("transformer", "mlp")  # workloads whose loss means something

StepTime = Callable[[float], float]  # link rate (bit/s) -> the model's step time (s)


@dataclass(frozen=True)
class Pricing:
    """The model's time for a run's first steps along the rate axis: ``dense_steps`` at ``dense``'s step, the rest
    at ``step``'s (``dense_steps`` 0: every step at ``step``'s)."""

    step: StepTime
    dense: StepTime | None = None
    dense_steps: int = 0

    def seconds(self, steps: int, rate: float) -> float:
        """Wall time of the first ``steps`` steps at ``rate`` bit/s."""
        if self.dense is None or not self.dense_steps:
            return steps * self.step(rate)
        return run_time_s(steps, self.dense_steps, self.dense(rate), self.step(rate))


def as_pricing(price: Pricing | StepTime) -> Pricing:
    """``price`` as a :class:`Pricing` (a bare step time prices every step alike)."""
    return price if isinstance(price, Pricing) else Pricing(price)


@dataclass(frozen=True)
class LossCurve:
    """One run's loss per step (smoothed) and its cumulative measured time."""

    replicator: str
    nodes: int
    delay_ms: float
    bw_bps: float
    loss: np.ndarray  # after step i+1
    elapsed_s: np.ndarray  # wall-clock at the end of step i+1
    model_step_s: float | None  # the model's step time at this run's rate (summary.csv)


@dataclass(frozen=True)
class Crossover:
    """At ``rate_bps`` the order in which the replicators reach the target changes (fastest first)."""

    rate_bps: float
    below: tuple[str, ...]
    above: tuple[str, ...]

    def describe(self) -> str:
        """``A overtakes B (below: C < B < A; above: C < A < B)``."""
        swaps = [
            f"{b} overtakes {a}"
            for i, a in enumerate(self.below)
            for b in self.below[i + 1 :]
            if self.above.index(b) < self.above.index(a)
        ]
        return f"{', '.join(swaps)} (below: {' < '.join(self.below)}; above: {' < '.join(self.above)})"


@dataclass
class TargetGroup:
    """Time to target for one (nodes, delay) group of a sweep."""

    nodes: int
    delay_ms: float
    target: float
    rates: list[float]
    steps_needed: dict[str, int | None]  # per replicator, from its loss curve (median over its runs)
    measured_s: dict[tuple[str, float], float | None]  # (replicator, rate) -> measured time to target
    projected_s: dict[tuple[str, float], float | None]  # (replicator, rate) -> the model's time for those steps
    crossovers: list[Crossover]
    span: tuple[float, float]  # rates searched for crossovers
    curves: list[LossCurve] = field(repr=False)
    pricing: dict[str, Pricing] = field(repr=False)


def rate_text(bps: float) -> str:
    """A found (not configured) rate to three significant digits: ``638mbit``, ``1.25gbit``."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g}{unit}"
    return f"{bps:.3g}bit"


def smooth(loss: Sequence[float], window: int = SMOOTH) -> np.ndarray:
    """Trailing mean over ``window`` steps (fewer at the start)."""
    return pd.Series(np.asarray(loss, dtype=float)).rolling(window, min_periods=1).mean().to_numpy()


def steps_to_target(loss: Sequence[float], target: float) -> int | None:
    """How many steps until the loss first reaches ``target`` (1-based), None if it never does."""
    hits = np.nonzero(np.asarray(loss, dtype=float) <= target)[0]
    return int(hits[0]) + 1 if hits.size else None


def measured_time_to(curve: LossCurve, target: float) -> float | None:
    """Wall-clock at the end of the step the run first reached ``target``."""
    k = steps_to_target(curve.loss, target)
    return float(curve.elapsed_s[k - 1]) if k else None


def crossovers(
    step_times: dict[str, Pricing | StepTime],
    steps_needed: dict[str, int | None],
    lo_bps: float,
    hi_bps: float,
    points: int = 80,
) -> list[Crossover]:
    """Rates where the order of the replicators' times to target changes (bisection between log-grid points)."""
    reps = [r for r, k in steps_needed.items() if k]
    if len(reps) < 2:
        return []
    priced = {r: as_pricing(step_times[r]) for r in reps}

    def order(rate: float) -> tuple[str, ...]:
        return tuple(sorted(reps, key=lambda r: priced[r].seconds(steps_needed[r], rate)))

    out = []
    grid = np.geomspace(lo_bps, hi_bps, points)
    for a, b in zip(grid[:-1], grid[1:]):
        left = order(a)
        if left == order(b):
            continue
        lo, hi = math.log(a), math.log(b)
        for _ in range(40):
            mid = (lo + hi) / 2
            if order(math.exp(mid)) == left:
                lo = mid
            else:
                hi = mid
        out.append(Crossover(math.exp((lo + hi) / 2), left, order(math.exp(hi))))
    return out


def loggable(values: pd.Series) -> pd.Series:
    """Where ``values`` are finite numbers above zero: what a log-log axis can hold. A zero time or rate (a summary
    may hold one) has no logarithm, so the points that carry one are left out rather than pulling the line to
    infinity."""
    numbers = pd.to_numeric(values, errors="coerce")
    return numbers.gt(0) & np.isfinite(numbers)


def interpolated_step_time(rates: Sequence[float], times: Sequence[float]) -> StepTime:
    """The model's step times at the measured rates (each above zero), interpolated log-log (held flat beyond
    them)."""
    order = np.argsort(rates)
    x = np.log(np.asarray(rates, dtype=float)[order])
    y = np.log(np.asarray(times, dtype=float)[order])
    return lambda rate: float(np.exp(np.interp(math.log(rate), x, y)))


def on_the_narrowest_link(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``bw_bps`` and ``delay_ms`` those of the link that sets each point's step: the WAN's (its slowest
    trunk direction, its longest trunk delay) on a topology with trunks, else the access link's. Points on two sites
    share their access links and differ in their WAN, so that is the axis their times run along."""
    if frame.empty or not {"wan_bw_bps", "wan_delay_ms"} <= set(frame.columns):
        return frame
    wan_bps = pd.to_numeric(frame["wan_bw_bps"], errors="coerce")
    wan_ms = pd.to_numeric(frame["wan_delay_ms"], errors="coerce")
    on_wan = wan_bps.notna()
    return frame.assign(
        bw_bps=wan_bps.where(on_wan, frame["bw_bps"]),
        delay_ms=wan_ms.where(on_wan, frame["delay_ms"]).fillna(frame["delay_ms"]),
    )


def loss_curves(frame: pd.DataFrame, folder: Path, window: int = SMOOTH) -> list[LossCurve]:
    """Every successful point whose run directory still has a steps.csv with losses (a run that several rows name is
    one curve, its first row's)."""

    out = []
    seen: set[Path] = set()
    for r in on_the_narrowest_link(frame[frame["status"] == "ok"]).to_dict("records"):
        path = run_path(folder, r.get("run_dir"))
        if path is None or path in seen:
            continue
        seen.add(path)
        series = step_series(path)
        if series is None or Col.LOSS not in series or series[Col.LOSS].isna().all():
            continue
        pred = r.get(STEP_MODEL)
        out.append(
            LossCurve(
                str(r["replicator"]),
                int(r["nodes"]),
                float(r["delay_ms"]),
                float(r["bw_bps"]),
                smooth(series[Col.LOSS].to_numpy(float), window),
                series[Col.STEP_S].cumsum().to_numpy(float),
                float(pred) if pred is not None and np.isfinite(pred) else None,
            )
        )
    return out


def _median_curve(curves: list[LossCurve]) -> np.ndarray:
    n = min(len(c.loss) for c in curves)
    return np.median(np.vstack([c.loss[:n] for c in curves]), axis=0)


def time_to_target(
    curves: list[LossCurve],
    step_time: dict[tuple[str, int, float], Pricing | StepTime],
    target: float | None = None,
    span: tuple[float, float] | None = None,
) -> list[TargetGroup]:
    """Per (nodes, delay) group: steps to target per replicator, measured and projected times, crossover rates.

    ``step_time[(replicator, nodes, delay_ms)]`` prices its steps at any rate (a :class:`Pricing`, or a bare step
    time for a replicator whose every step is alike); ``span``
    is the rate range searched for crossovers (default: the measured rates, widened 10x each way
    within what the emulator can shape: the model projects beyond what was measured).
    """
    groups = []
    for nodes, delay in sorted({(c.nodes, c.delay_ms) for c in curves}):
        here = [c for c in curves if (c.nodes, c.delay_ms) == (nodes, delay)]
        reps = list(dict.fromkeys(c.replicator for c in here))
        per_rep = {rep: _median_curve([c for c in here if c.replicator == rep]) for rep in reps}
        goal = target if target is not None else max(float(loss[-1]) for loss in per_rep.values())
        steps_needed = {rep: steps_to_target(loss, goal) for rep, loss in per_rep.items()}
        rates = sorted({c.bw_bps for c in here})
        fns = {rep: as_pricing(step_time[(rep, nodes, delay)]) for rep in reps if (rep, nodes, delay) in step_time}
        measured, projected = {}, {}
        for rep in reps:
            for rate in rates:
                run = next((c for c in here if c.replicator == rep and c.bw_bps == rate), None)
                measured[(rep, rate)] = measured_time_to(run, goal) if run else None
                k = steps_needed[rep]
                projected[(rep, rate)] = fns[rep].seconds(k, rate) if k and rep in fns else None
        lo, hi = span or (max(MIN_RATE_BPS, min(rates) / 10), min(MAX_RATE_BPS, max(rates) * 10))
        cross = crossovers(fns, {r: k for r, k in steps_needed.items() if r in fns}, lo, hi) if lo < hi else []
        groups.append(
            TargetGroup(nodes, delay, goal, rates, steps_needed, measured, projected, cross, (lo, hi), here, fns)
        )
    return groups


def step_time_functions(frame: pd.DataFrame) -> dict[tuple[str, int, float], Pricing]:
    """The model's price of a run's steps along the rate axis per (replicator, nodes, delay): the predictions stored
    per point, interpolated; the step of the phases that open the run (``dense_steps`` of them) where the points
    predicted one."""
    ok = frame[(frame["status"] == "ok")] if STEP_MODEL in frame else frame.iloc[0:0]
    ok = on_the_narrowest_link(ok)
    ok = ok[loggable(ok[STEP_MODEL]) & loggable(ok["bw_bps"])] if not ok.empty else ok
    out: dict[tuple[str, int, float], Pricing] = {}
    for (rep, nodes, delay), group in ok.groupby(["replicator", "nodes", "delay_ms"]):
        key = (str(rep), int(nodes), float(delay))
        step = interpolated_step_time(group["bw_bps"].tolist(), group[STEP_MODEL].astype(float).tolist())
        out[key] = Pricing(step, *_dense_pricing(group))
    return out


def _dense_pricing(group: pd.DataFrame) -> tuple[StepTime | None, int]:
    """The opening phases' step time along the rate axis and how many steps they last, from the points that
    predicted both (none: every step is the lasting one)."""
    if DENSE_MODEL not in group or DENSE_STEPS not in group:
        return None, 0
    times = pd.to_numeric(group[DENSE_MODEL], errors="coerce")
    counts = pd.to_numeric(group[DENSE_STEPS], errors="coerce")
    known = loggable(times) & loggable(group["bw_bps"]) & counts.notna() & (counts > 0)
    if not known.any():
        return None, 0
    rates = group.loc[known, "bw_bps"].tolist()
    return interpolated_step_time(rates, times[known].astype(float).tolist()), int(counts[known].max())
