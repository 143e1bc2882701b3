#!/usr/bin/env python3
"""Runs through random churn against plan's goodput for a run of their length (``plan --for``): each stored run
folder's measured goodput beside

* plan's long-run figure (``plan --mtbf``, no ``--for``);
* plan's figure for a run of the run's own length, every node present at its start (``plan --for``): the mean over
  the seeded draws and their 10th-90th percentiles (the band a run falls in by chance alone);
* plan's figure for the run's own seed (``plan --for ... --seed``): the very leaves and joins the run drew, priced
  with plan's steps;
* plan's figure for the run as it was run (``plan --for LEN --steps N [--seed S]``, LEN the churn's ``for=``, N the
  run's ``--steps`` less its warm-up): the churn drawn over LEN, then every node present until N steps commit since
  the training last started afresh, the mean and band over the draws and the run's own seed;
* the rules over the run's recorded changes with the run's own segments' steps, heal, worker start and exchange
  timeout (``goodput_model_steps_per_s``, priced again with this code and ``--calibration``);
* the same rules over the same changes as the run was run (until its N steps commit, not over its span), and the
  range they take when every step is :data:`STEP_NUDGES` longer or shorter: how far one run's figure moves when a
  leave falls on the other side of a window's edge;

and each error, model / measured - 1. A run's length is its measured steps' span in the cluster's seconds. Beside
goodput, the progress kept (the steps the training holds at the run's end, per second of its span: goodput less what
restarts threw away): the run's (``kept_steps_per_s``), plan's for the run as run and its own seed, and the rules'
over the run's changes.

Plan is given each run's own local work: its measured compute per step (run.json's ``summary.compute_time_s``, in
the cluster's seconds), or ``--compute-ms`` for every run.

    PYTHONPATH=$PWD python3 scripts/bench_churn_runs.py --shapes SHAPES.json \\
        --calibration reports/ci/calibration.json RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from bench_run_churn import exchange_timeout  # the script's own folder is on the path

from netbench.model.calibration import Calibration, read_calibration
from netbench.model.goodput import Recovery, Simulated, StepAt, simulate
from netbench.model.schemes import scheme_from_config
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.churn_results import simulate_run
from netbench.orchestrator.run.schedule_results import segment_summary
from netbench.planning import PlanRequest, plan
from netbench.rundir.churn_figures import churn_figures, span_s
from netbench.rundir.restarts import restart_figures
from netbench.rundir.summary import measured_steps

TOLERANCE = 0.10  # the requirement: goodput within 10 % of plan's
STEP_NUDGES = (0.99, 0.995, 1.005, 1.01)  # the steps scaled by these: one run's sensitivity to its step


def run_folder(path: Path) -> Path:
    """``path`` where it holds run.json, else the one run folder inside it."""
    return (
        path if (path / "run.json").exists() else next(p for p in sorted(path.iterdir()) if (p / "run.json").exists())
    )


@dataclass(frozen=True)
class StoredRun:
    """A stored run through churn as these scripts read it: its folder, run.json, config and steps."""

    folder: Path
    run_json: dict[str, Any]
    config: RunConfig
    steps: pd.DataFrame

    @classmethod
    def read(cls, given: Path) -> StoredRun:
        """The run at ``given`` (:func:`run_folder`)."""
        folder = run_folder(given)
        run_json = json.loads((folder / "run.json").read_text())
        return cls(folder, run_json, RunConfig.model_validate(run_json["config"]), pd.read_csv(folder / "steps.csv"))

    @property
    def compute_ms(self) -> float:
        """The run's measured compute per step in the cluster's milliseconds: the local work plan is given."""
        return 1e3 * float(self.run_json["summary"]["compute_time_s"])

    @property
    def dilation(self) -> float:
        return float(self.run_json.get("dilation") or 1.0)

    def rules(self, calibration: Calibration) -> tuple[StepAt, Recovery, Simulated] | None:
        """The goodput rules over the run's own changes, its segments' steps priced with this code and
        ``calibration`` (:func:`netbench.orchestrator.run.churn_results.simulate_run`)."""
        segments = segment_summary(self.config, self.steps, None, calibration, os.cpu_count(), None)
        timeout = exchange_timeout(self.folder, self.run_json)
        cluster = self.run_json["cluster"] | {"quorum": {"exchange_timeout_s": timeout}}
        return simulate_run(self.config, self.steps, segments, cluster, self.dilation)


def churn_of(source: str) -> tuple[float, float, int, float]:
    """MTBF, away, seed and length (``for=``) of a ``--churn`` as run.json names its source."""
    found = re.search(r"churn mtbf=([\d.e+]+)s away=([\d.e+]+)s seed=(\d+) for=([\d.e+]+)s", source)
    if found is None:
        raise SystemExit(f"not a run through --churn: {source[:80]}")
    return float(found.group(1)), float(found.group(2)), int(found.group(3)), float(found.group(4))


def as_run_cell(
    stored: StoredRun, replayed: tuple[StepAt, Recovery, Simulated], churn_s: float, measured: float
) -> tuple[float, str]:
    """The rules over the run's changes until its steps commit (the figure, and its cell with the range the figure
    takes with the steps nudged)."""
    step_at, recovery, _ = replayed
    config = stored.config
    assert config.schedule is not None
    names = [n.name for n in config.cluster.topology.nodes]
    steps = config.steps - config.warmup_steps

    def rate(scale: float) -> float:
        def nudged(members: int) -> tuple[float, float, float]:
            step_s, vulnerable_s, exchange_s = step_at(members)
            return scale * step_s, scale * vulnerable_s, scale * exchange_s

        found = simulate(config.schedule.changes, names, churn_s, nudged, recovery, steps=steps)
        return found.committed_steps / found.horizon_s if found.horizon_s > 0 else 0.0

    as_run, nudged_rates = rate(1.0), [rate(scale) for scale in STEP_NUDGES]
    return as_run, f"{as_run:.3f} ({err(as_run, measured)}; {min(nudged_rates):.2f}-{max(nudged_rates):.2f})"


def err(model: float, measured: float) -> str:
    return f"{100 * (model / measured - 1):+.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--shapes", required=True, help="the runs' parameter shapes (a file or a preset)")
    parser.add_argument(
        "--compute-ms", type=float, help="compute per step for every run, as plan takes it (default: each run's own)"
    )
    parser.add_argument("--calibration", type=Path, required=True)
    args = parser.parse_args()
    calibration = read_calibration(args.calibration)
    print(
        "| run | length | measured | long run | run of its length: mean (p10-p90) | in band | its seed "
        "| as run: mean (p10-p90) | as run: its seed | the run's changes | the run's changes as run (steps +-1 %) "
        "| kept: measured | kept: as run, its seed "
        "| kept: the run's changes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    batches: dict[str, list[AsRun]] = {}
    for given in args.runs:
        stored = StoredRun.read(given)
        config, steps = stored.config, stored.steps
        measured_rows = measured_steps(steps)
        measured = churn_figures(measured_rows)["goodput_steps_per_s"]
        length = span_s(measured_rows)
        mtbf, away, seed, churn_s = churn_of(config.schedule.source if config.schedule else "")
        rep = config.replicator
        scheme = scheme_from_config(rep)
        request = PlanRequest(
            schemes=(scheme,),
            shapes=args.shapes,
            nodes=(config.cluster.nodes,),
            bw=config.cluster.up.rate_bps,
            delay=config.cluster.up.delay_s + config.cluster.down.delay_s,
            compute_ms=args.compute_ms if args.compute_ms is not None else stored.compute_ms,
            mtbf=mtbf,
            away=away,
            churn_for=length,
            churn_seed=seed,
        )
        churn = plan(request, calibration, args.calibration, derived=False).doc["rows"][0]["churn"]
        run = churn["run"]
        as_run_request = request.model_copy(
            update={"churn_for": churn_s, "churn_steps": config.steps - config.warmup_steps}
        )
        as_run = plan(as_run_request, calibration, args.calibration, derived=False).doc["rows"][0]["churn"]["run"]
        replayed = stored.rules(calibration)
        own = f"{replayed[2].steps_per_s:.3f} ({err(replayed[2].steps_per_s, measured)})" if replayed else "-"
        own_as_run_s, own_as_run = as_run_cell(stored, replayed, churn_s, measured) if replayed else (None, "-")
        batches.setdefault(rep.name, []).append(
            AsRun(measured, as_run["steps_per_s"], as_run["sd"], as_run["seed_steps_per_s"], own_as_run_s)
        )
        kept = restart_figures(steps).get("kept_steps_per_s")
        kept_cells = (
            (
                f"{kept:.3f}",
                f"{as_run['seed_kept_steps_per_s']:.3f} ({err(as_run['seed_kept_steps_per_s'], kept)})",
                f"{replayed[2].kept_steps_per_s:.3f} ({err(replayed[2].kept_steps_per_s, kept)})" if replayed else "-",
            )
            if kept
            else ("-", "-", "-")
        )
        inside = run["p10"] <= measured <= run["p90"]
        near = abs(run["steps_per_s"] / measured - 1) <= TOLERANCE
        print(
            f"| {rep.name} seed {seed}, compute {request.compute_ms:.1f} ms | {length:.0f} s | {measured:.3f} | "
            f"{churn['steps_per_s']:.3f} "
            f"({err(churn['steps_per_s'], measured)}) | {run['steps_per_s']:.3f} ({run['p10']:.3f}-{run['p90']:.3f}; "
            f"{err(run['steps_per_s'], measured)}) | {'yes' if inside else 'no'}{', within 10 %' if near else ''} | "
            f"{run['seed_steps_per_s']:.3f} ({err(run['seed_steps_per_s'], measured)}) | "
            f"{as_run['steps_per_s']:.3f} ({as_run['p10']:.3f}-{as_run['p90']:.3f}; "
            f"{err(as_run['steps_per_s'], measured)}) | "
            f"{as_run['seed_steps_per_s']:.3f} ({err(as_run['seed_steps_per_s'], measured)}) | {own} | {own_as_run} | "
            f"{' | '.join(kept_cells)} |"
        )
    print_batches(batches)


@dataclass(frozen=True)
class AsRun:
    """One run's goodput beside plan's for it as it was run: the mean over plan's draws and their standard deviation,
    plan's figure for its own seed, and the rules over its own changes (None where the run recorded none)."""

    measured: float
    plan_mean: float
    plan_sd: float
    plan_seed: float
    rules: float | None


def print_batches(batches: dict[str, list[AsRun]]) -> None:
    """Per replicator, the runs' mean goodput against the mean of plan's figures for them as run: one run scatters
    as widely as plan's band, so the mean over N runs is what plan's mean is held to, with plan's own spread over N
    (its standard deviation over the root of N) beside the gap; and the mean error of plan's figure for each run's
    own seed and of the rules over each run's changes."""
    print()
    print(
        "| replicator | runs | measured: mean (s.e.) | plan as run: mean of its means | error of the means "
        "| plan's s.d. of a mean of this many runs | its seed as run: mean error (mean abs) "
        "| the run's changes as run: mean error (mean abs) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in batches.items():
        count = len(runs)
        measured = [r.measured for r in runs]
        mean = sum(measured) / count
        spread = (sum((m - mean) ** 2 for m in measured) / (count - 1)) ** 0.5 / count**0.5 if count > 1 else 0.0
        plan_mean = sum(r.plan_mean for r in runs) / count
        plan_spread = (sum(r.plan_sd**2 for r in runs) / count) ** 0.5 / count**0.5

        def errors(pairs: list[tuple[float, float]]) -> str:
            found = [model / m - 1 for model, m in pairs]
            if not found:
                return "-"
            mean_error, mean_abs = sum(found) / len(found), sum(abs(e) for e in found) / len(found)
            return f"{100 * mean_error:+.1f} % ({100 * mean_abs:.1f} %)"

        print(
            f"| {name} | {count} | {mean:.3f} ({spread:.3f}) | {plan_mean:.3f} | {err(plan_mean, mean)} | "
            f"{plan_spread:.3f} ({100 * plan_spread / plan_mean:.1f} %) | "
            f"{errors([(r.plan_seed, r.measured) for r in runs])} | "
            f"{errors([(r.rules, r.measured) for r in runs if r.rules is not None])} |"
        )


if __name__ == "__main__":
    main()
