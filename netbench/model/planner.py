"""Derived answers, solved numerically on the step model (bracketed searches, :mod:`~netbench.model.search`).

* the bandwidth at which communication time equals compute time (per scheme and node count);
* the node count at which a scheme's step time doubles relative to two nodes (up to 100 000);
* the crossover bandwidths where two schemes' step times are equal (e.g. where a sparse codec's
  compression cost outweighs the bytes it saves over the dense all-reduce).

Bandwidth answers scale the up and down rates together (an asymmetric link keeps its ratio) over
1 kbit/s .. 1 Pbit/s on a log scale; each answer says why when there is none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from netbench.model.backends import GlooBackend
from netbench.model.calibration import Calibration
from netbench.model.schemes import Scheme, shape_key
from netbench.model.search import bisect_int, bisect_log, sign_change_log
from netbench.model.steptime import MAX_PLANNED_WORKERS, Scenario, StepEstimate
from netbench.shapes import ParamShape, total_params

if TYPE_CHECKING:
    from netbench.model.backends import Backend

__all__ = ["Planner", "BW_RANGE_BPS"]

BW_RANGE_BPS = (1e3, 1e15)
GRID_PER_DECADE = 8
COARSE_STEP = GRID_PER_DECADE  # grid points between the samples a crossover search models first
CROSSOVER_REL_TOL = 1e-6  # a crossover bandwidth to a millionth: far below what a link or a plan distinguishes
# the bandwidths a crossover search models first, GRID_PER_DECADE a decade over BW_RANGE_BPS
CROSSOVER_GRID = tuple(
    BW_RANGE_BPS[0] * 10 ** (i / GRID_PER_DECADE)
    for i in range(int(math.log10(BW_RANGE_BPS[1] / BW_RANGE_BPS[0]) * GRID_PER_DECADE) + 1)
)


@dataclass
class Planner:
    """Evaluates schemes on one shape list and base scenario with one backend; answers derived questions.

    ``backend``: what carries the collectives (:mod:`~netbench.model.backends`); gloo with ``calibration`` when
    left out.
    """

    shapes: Sequence[ParamShape]
    calibration: Calibration
    backend: Backend | None = None

    def __post_init__(self) -> None:

        self.shapes = shape_key(self.shapes)
        self.params = total_params(list(self.shapes))
        if self.backend is None:
            self.backend = GlooBackend(self.shapes, self.calibration, self.params)
        self._steps: dict[tuple[Scheme, Scenario], StepEstimate] = {}
        self._step_times: dict[tuple[Scheme, Scenario], float] = {}
        # the crossover grid's scenarios and step times, shared by every pair of schemes: each point is modelled once
        self._grid_scenarios: dict[Scenario, list[Scenario | None]] = {}
        self._grid_times: dict[tuple[Scheme, Scenario], list[float | None]] = {}

    def step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate:
        """One step of ``scheme`` in ``scenario``; each is modelled once (the searches and every pair of schemes
        ask for the same points)."""
        key = (scheme, scenario)
        found = self._steps.get(key)
        if found is None:
            found = self._steps[key] = self.backend.step(scheme, scenario)
            self._step_times[key] = found.step_time_s
        return found

    def step_time(self, scheme: Scheme, scenario: Scenario) -> float:
        """``step(scheme, scenario).step_time_s``, each modelled once: what the searches compare, at every point they
        probe, without the rest of the estimate where the backend can leave it out."""
        key = (scheme, scenario)
        seconds = self._step_times.get(key)  # every step modelled whole is here too: one look-up
        if seconds is None:
            seconds = self._step_times[key] = self.backend.step_time(scheme, scenario)
        return seconds

    @staticmethod
    def _at_bw(scenario: Scenario, bw_bps: float) -> Scenario:
        """The scenario with its bottleneck rate set to ``bw_bps``, up/down ratio kept."""
        scale = bw_bps / scenario.bw_bps
        return scenario.model_copy(update={"up_bps": scenario.up_bps * scale, "down_bps": scenario.down_bps * scale})

    @staticmethod
    def _rates(scenario: Scenario, bw_bps: float) -> dict[str, float]:
        scale = bw_bps / scenario.bw_bps
        return {"bw_bps": bw_bps, "up_bps": scenario.up_bps * scale, "down_bps": scenario.down_bps * scale}

    def comm_equals_compute(self, scheme: Scheme, scenario: Scenario) -> dict:
        """Bandwidth where communication time equals compute time, or why there is none."""
        out: dict = {"replicator": scheme.name, "nodes": scenario.workers, "bw_bps": None}
        compute = scenario.compute_s
        if compute <= 0:
            return out | {"reason": "compute time is 0 (pass --compute-ms)"}

        def gap(bw: float) -> float:
            return self.step(scheme, self._at_bw(scenario, bw)).comm_time_s - compute

        lo, hi = BW_RANGE_BPS
        g_lo, g_hi = gap(lo), gap(hi)
        if g_hi > 0:
            floor = g_hi + compute
            text = f"communication takes {floor:.4g}s even at {hi:.0e} bit/s"
            if self.backend.name == "gloo":  # its floor is the per-message latency
                return out | {"reason": f"latency-bound: {text}"}
            # a GPU backend's is what caps its bus bandwidth apart from the NIC (socket streams, windows, NVLink)
            cause = self.backend.floor_reason(self._at_bw(scenario, hi))
            return out | {"reason": f"{text}: {cause}", "comm_floor_s": floor, "floor_cause": cause}
        if g_lo < 0:
            return out | {"reason": f"communication is shorter than compute even at {lo:.0e} bit/s"}
        bw = sign_change_log(gap, lo, hi)
        at = self.step(scheme, self._at_bw(scenario, bw))
        return (
            out | self._rates(scenario, bw) | {"comm_time_s": at.comm_time_s, "compute_time_s": compute, "reason": None}
        )

    def doubling_nodes(self, scheme: Scheme, scenario: Scenario, max_nodes: int = MAX_PLANNED_WORKERS) -> dict:
        """Smallest node count whose step time is at least twice that at two nodes (two machines if G > 1).

        A geometric scan finds the first node count at or past double, then integer bisection
        narrows the bracket before it; node counts stay multiples of G.
        """
        g = scenario.gpus_per_node
        base_nodes = 2 * g
        out: dict = {"replicator": scheme.name, "bw_bps": scenario.bw_bps, "baseline_nodes": base_nodes, "nodes": None}
        if base_nodes > max_nodes:
            return out | {"reason": f"two nodes of {g} accelerators exceed {max_nodes}"}
        base = self.step_time(scheme, scenario.model_copy(update={"workers": base_nodes}))
        out["baseline_step_time_s"] = base
        if base <= 0:
            return out | {"reason": "step time at two nodes is 0"}

        def step_at(machines: int) -> float:
            return self.step_time(scheme, scenario.model_copy(update={"workers": machines * g}))

        def doubled(machines: int) -> bool:
            return step_at(machines) >= 2 * base

        top = max_nodes // g
        prev, m = 2, 4
        while True:
            m = min(m, top)
            if doubled(m):
                found = bisect_int(doubled, prev, m)
                return out | {"nodes": found * g, "step_time_s": step_at(found), "reason": None}
            if m == top:
                # (gloo's JSON keeps its wording: it names the worker count nodes)
                reach = f"{top * g} nodes" if self.backend.name == "gloo" else f"{top * g} workers"
                return out | {
                    "reason": f"step time stays below double ({step_at(top):.4g}s vs {2 * base:.4g}s) up to {reach}"
                }
            prev, m = m, m * 2

    def crossovers(self, a: Scheme, b: Scheme, scenario: Scenario) -> dict:
        """Bandwidths where ``a`` and ``b`` take equal step time, with which is faster on each side: every sign change
        of their difference on a grid of ``GRID_PER_DECADE`` points a decade, each narrowed to ``CROSSOVER_REL_TOL``."""

        def diff(bw: float) -> float:
            s = self._at_bw(scenario, bw)
            return self.step_time(a, s) - self.step_time(b, s)

        lo, hi = BW_RANGE_BPS
        grid = CROSSOVER_GRID
        values = self._differences(a, b, scenario)
        found = []
        for x0, x1, v0, v1 in zip(grid, grid[1:], values, values[1:]):
            if (v0 < 0) == (v1 < 0):
                continue
            bw = bisect_log(
                diff, x0, x1, CROSSOVER_REL_TOL
            )  # step curves cross where they jump: halving, not interpolation
            below, above = (a.name, b.name) if v0 < 0 else (b.name, a.name)
            found.append(self._rates(scenario, bw) | {"faster_below": below, "faster_above": above})
        out: dict = {"pair": [a.name, b.name], "nodes": scenario.workers, "crossovers": found}
        if not found:
            if all(v == 0 for v in values):
                out["reason"] = "equal step times at every bandwidth"
            else:
                faster = a.name if values[0] < 0 else b.name
                out["reason"] = f"{faster} is never slower from {lo:.0e} to {hi:.0e} bit/s"
        return out

    def _differences(self, a: Scheme, b: Scheme, scenario: Scenario) -> list[float]:
        """``a``'s step time minus ``b``'s at each point of :data:`CROSSOVER_GRID`, or a value of the same sign where
        no sign change can lie. Every ``COARSE_STEP``-th point is modelled first. Where both step times fall (or hold)
        from each such sample to the next along the whole grid, an interval whose ends bound one scheme strictly below
        the other throughout (a's slowest against b's fastest, and the other way round) takes its end's difference and
        is not modelled further; any other is halved at its middle point and each half asked again, down to single
        grid steps. Wherever a step time rises with the bandwidth between samples, every point is modelled."""
        known = {True: self._grid_row(a, scenario), False: self._grid_row(b, scenario)}

        def times(scheme: Scheme, i: int) -> float:
            row = known[scheme is a]
            found = row[i]
            if found is None:
                found = row[i] = self.step_time(scheme, self._grid_scenario(scenario, i))
            return found

        def difference(i: int) -> float:
            return times(a, i) - times(b, i)

        def falls(i: int, j: int) -> bool:
            return times(a, j) <= times(a, i) and times(b, j) <= times(b, i)

        def between(i: int, j: int) -> list[float]:
            """The values at i + 1 .. j, both step times falling from i to j."""
            if times(a, i) - times(b, j) < 0 or times(a, j) - times(b, i) > 0:  # one faster throughout
                return [difference(j)] * (j - i)
            if j - i == 1:
                return [difference(j)]
            m = (i + j) // 2
            if not (falls(i, m) and falls(m, j)):
                return [difference(k) for k in range(i + 1, j + 1)]
            return between(i, m) + between(m, j)

        last = len(CROSSOVER_GRID) - 1
        coarse = sorted({*range(0, last, COARSE_STEP), last})
        if not all(falls(i, j) for i, j in zip(coarse, coarse[1:])):
            return [difference(k) for k in range(last + 1)]
        values = [difference(0)]
        for i, j in zip(coarse, coarse[1:]):
            values += between(i, j)
        return values

    def _grid_row(self, scheme: Scheme, scenario: Scenario) -> list[float | None]:
        """``scheme``'s step times on :data:`CROSSOVER_GRID` in ``scenario``, each filled when first asked for."""
        row = self._grid_times.get((scheme, scenario))
        if row is None:
            row = self._grid_times[(scheme, scenario)] = [None] * len(CROSSOVER_GRID)
        return row

    def _grid_scenario(self, scenario: Scenario, i: int) -> Scenario:
        """``scenario`` at the ``i``-th bandwidth of :data:`CROSSOVER_GRID`, built once for every scheme."""
        row = self._grid_scenarios.get(scenario)
        if row is None:
            row = self._grid_scenarios[scenario] = [None] * len(CROSSOVER_GRID)
        found = row[i]
        if found is None:
            found = row[i] = self._at_bw(scenario, CROSSOVER_GRID[i])
        return found

    def derived(self, schemes: Sequence[Scheme], scenarios: Sequence[Scenario]) -> dict:
        """All derived answers for every scheme x scenario (and every pair of schemes)."""
        return {
            "comm_equals_compute_bw": [self.comm_equals_compute(s, sc) for sc in scenarios for s in schemes],
            "doubling_nodes": [self.doubling_nodes(s, sc) for s in schemes for sc in _by_bw(scenarios)],
            "crossover_bw": [self.crossovers(a, b, sc) for sc in scenarios for a, b in combinations(schemes, 2)],
        }


def _by_bw(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """One scenario per distinct link (the node count is what the doubling search varies)."""
    seen: dict[tuple, Scenario] = {}
    for sc in scenarios:
        seen.setdefault((sc.up_bps, sc.down_bps, sc.delay_s), sc)
    return list(seen.values())
