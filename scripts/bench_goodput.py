#!/usr/bin/env python3
"""How close plan's goodput under churn (:func:`netbench.model.goodput.expected_goodput`: the rules simulated over
four seeded draws of a length it picks) and the analytic answer (:func:`netbench.model.goodput.goodput`) come to a
long simulation of the same rules over the changes ``--churn`` draws (:func:`netbench.model.goodput.simulate`), and
what ``plan --mtbf`` costs in time.

1. Four nodes, MTBF 20 s, away 6 s (``--churn 20s``'s default), an hour of draws for each of 10 seeds: committed
   steps per second, plan's and the analytic against the seeds' mean, for ``full`` (a 0.5 s step, a leave anywhere
   in it fails it) and DiLoCo (a 0.28 s step, windows of 5 and 20 steps whose last 0.3 s is the exchange), as the
   quorum's wait and the heal grow.
2. The wall time until the training holds N steps, restarts throwing away what it held: the closed form
   :meth:`netbench.model.goodput.Goodput.wall_s_to_keep`, (e^(rN/g) - 1) / r, with plan's restart rate r and goodput
   g (:func:`~netbench.model.goodput.expected_goodput`) and with a long simulation's, and N / g (committing the
   steps once), against the mean of :func:`~netbench.model.goodput.simulate` driven until N steps are kept, over
   ``KEPT_DRAWS`` draws of the churn, on clusters held out from everything else here (3-6 nodes, MTBF 10-30 s, away
   4-10 s), N the steps g trains in half and in twice the mean time between restarts.
3. ``plan --shapes llama-7b -r full,diloco --nodes 8,64,512 --bw 10gbit --delay 5ms --mtbf 21600s``, median of
   ``--repeat`` fresh interpreters, beside the same plan without ``--mtbf`` (run it under the heavy lock).

    PYTHONPATH=$PWD python3 scripts/bench_goodput.py
    PYTHONPATH=$PWD python3 scripts/bench_goodput.py --skip-timing
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from netbench.membership import draw_changes
from netbench.model.goodput import Goodput, Recovery, StepAt, expected_goodput, goodput, simulate
from netbench.schedule.churn import Churn, draw

NAMES = ("n0", "n1", "n2", "n3")
MTBF_S, AWAY_S, HORIZON_S, SEEDS = 20.0, 6.0, 3600.0, range(10)
ROOT = Path(__file__).resolve().parents[1]
PLAN = ["--shapes", "llama-7b", "-r", "full,diloco", "--nodes", "8,64,512", "--bw", "10gbit", "--delay", "5ms"]


def full_step(members: int) -> tuple[float, float, float]:
    step = 0.3 + 0.05 * members
    return step, step, 0.6 * step


def diloco_step(members: int) -> tuple[float, float, float]:
    return 0.2 + 0.02 * members, 0.3, 0.3


def measured_full_step(members: int) -> tuple[float, float, float]:
    """The steady steps a 4-node `full` run through random churn measured (100 Mbit/s, 10 ms): no split."""
    step = {2: 0.29, 3: 0.355}.get(members, 0.39)
    return step, step, 0.0


CASES = [
    ("full", full_step, Recovery(period=1, heal_s=0.5, quorum_wait_s=1.0)),
    ("full", full_step, Recovery(period=1, heal_s=1.0, quorum_wait_s=1.0)),
    ("full", full_step, Recovery(period=1, heal_s=1.0, quorum_wait_s=3.0)),
    ("full", full_step, Recovery(period=1, heal_s=2.0, quorum_wait_s=1.0)),
    ("full", full_step, Recovery(period=1, heal_s=5.0, quorum_wait_s=1.0)),
    ("diloco H=5", diloco_step, Recovery(period=5, heal_s=0.5, quorum_wait_s=1.0)),
    ("diloco H=20", diloco_step, Recovery(period=20, heal_s=0.5, quorum_wait_s=1.0)),
    ("diloco H=20", diloco_step, Recovery(period=20, heal_s=2.0, quorum_wait_s=1.0)),
    ("full", full_step, Recovery(period=1, heal_s=3.0, quorum_wait_s=1.0, exchange_timeout_s=5.0)),
    ("diloco H=4", diloco_step, Recovery(period=4, heal_s=4.4, quorum_wait_s=1.0, exchange_timeout_s=5.0)),
    ("full, as run", measured_full_step, Recovery(period=1, heal_s=2.9, restart_s=0.1, exchange_timeout_s=5.0)),
]


def accuracy() -> None:
    draws = [draw(Churn(mtbf_s=MTBF_S, away_s=AWAY_S, seed=s, for_s=HORIZON_S), NAMES) for s in SEEDS]
    print(
        "| replicator | quorum wait | heal | exchange timeout | plain steps/s | simulated | plan | ratio | analytic "
        "| ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, step_at, recovery in CASES:
        found = goodput(len(NAMES), MTBF_S, AWAY_S, step_at, recovery)
        planned = expected_goodput(len(NAMES), MTBF_S, AWAY_S, step_at, recovery).steps_per_s
        simulated = statistics.mean(simulate(c, NAMES, HORIZON_S, step_at, recovery).steps_per_s for c in draws)
        print(
            f"| {name} | {recovery.quorum_wait_s:g} s | {recovery.heal_s:g} s | {recovery.exchange_timeout_s:g} s | "
            f"{found.plain_steps_per_s:.3f} | {simulated:.3f} | {planned:.3f} | {planned / simulated:.3f} | "
            f"{found.steps_per_s:.3f} | {found.steps_per_s / simulated:.3f} |"
        )


# (replicator, step, recovery, nodes, MTBF s, away s): none of them tuned on, none used above
KEPT_CASES = [
    ("full", full_step, Recovery(period=1, heal_s=1.0), 3, 15.0, 6.0),
    ("full", full_step, Recovery(period=1, heal_s=2.0), 4, 20.0, 6.0),
    ("diloco H=5", diloco_step, Recovery(period=5, heal_s=1.0), 5, 12.0, 8.0),
    ("diloco H=20", diloco_step, Recovery(period=20, heal_s=0.5), 3, 30.0, 10.0),
    ("full", full_step, Recovery(period=1, heal_s=1.0), 6, 10.0, 4.0),
    ("full, as run", measured_full_step, Recovery(period=1, heal_s=2.9, restart_s=0.1, exchange_timeout_s=5.0), 4,
     20.0, 6.0),
]  # fmt: skip
KEPT_DRAWS = range(1000, 1200)  # seeds of the draws each budget is simulated over, apart from every other seed here
KEPT_SHARES = (0.5, 2.0)  # budgets: the steps trained in these shares of the mean time between restarts
LONG_RUN_S, LONG_RUN_SEEDS = 20_000.0, range(500, 510)  # the long simulation that measures r and g themselves
DRAW_REACH = 30  # each draw lasts this many times the expected wall time: every draw holds N before its churn ends


def _long_run(names: tuple[str, ...], mtbf: float, away: float, step_at: StepAt, recovery: Recovery) -> Goodput:
    """r and g over a long simulation (``LONG_RUN_SEEDS`` draws of ``LONG_RUN_S``), the rest as plan's."""
    found = [
        simulate(draw_changes(names, mtbf, away, LONG_RUN_S, s, max_changes=10**7), names, LONG_RUN_S, step_at,
                 recovery)
        for s in LONG_RUN_SEEDS
    ]  # fmt: skip
    total_s = LONG_RUN_S * len(found)
    return Goodput(
        steps_per_s=sum(f.committed_steps for f in found) / total_s,
        plain_steps_per_s=1 / step_at(len(names))[0],
        member_share=1.0,
        leaves_per_s=0.0,
        mean_away=0.0,
        stalled_share=0.0,
        restarts_per_s=sum(f.restarts for f in found) / total_s,
    )


def kept() -> None:
    print(
        "| replicator | nodes | MTBF | away | r (plan) | g (plan) | N | simulated (± s.e.) | closed form, plan's r, g "
        "| closed form, long run's r, g | N / g |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors: dict[str, list[float]] = {"plan": [], "long": [], "once": []}
    for name, step_at, recovery, nodes, mtbf, away in KEPT_CASES:
        names = tuple(f"n{i}" for i in range(nodes))
        planned = expected_goodput(nodes, mtbf, away, step_at, recovery)
        long_run = _long_run(names, mtbf, away, step_at, recovery)
        for share in KEPT_SHARES:
            steps = max(recovery.period, round(share * planned.steps_per_s / planned.restarts_per_s))
            horizon = DRAW_REACH * planned.wall_s_to_keep(steps)
            times = [
                simulate(draw_changes(names, mtbf, away, horizon, s, max_changes=10**7), names, horizon, step_at,
                         recovery, steps=steps).horizon_s
                for s in KEPT_DRAWS
            ]  # fmt: skip
            mean, se = statistics.fmean(times), statistics.stdev(times) / math.sqrt(len(times))
            cells = []
            for key, wall in (
                ("plan", planned.wall_s_to_keep(steps)),
                ("long", long_run.wall_s_to_keep(steps)),
                ("once", planned.wall_s(steps)),
            ):
                errors[key].append(wall / mean - 1)
                cells.append(f"{wall:.0f} s ({100 * (wall / mean - 1):+.1f} %)")
            print(
                f"| {name} | {nodes} | {mtbf:g} s | {away:g} s | {planned.restarts_per_s:.4f}/s | "
                f"{planned.steps_per_s:.3f} | {steps} | {mean:.0f} s (± {se:.0f}) | {' | '.join(cells)} |"
            )
    for key, label in (("plan", "closed form, plan's r and g"), ("long", "closed form, a long run's r and g"),
                       ("once", "N / g")):  # fmt: skip
        found = errors[key]
        print(
            f"{label}: error {100 * min(found):+.1f} % to {100 * max(found):+.1f} %, "
            f"mean |error| {100 * statistics.fmean(abs(e) for e in found):.1f} %"
        )


def _timed(args: list[str], repeat: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETBENCH_CALIBRATION": str(ROOT / "reports/ci/calibration.json")}
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "netbench", "plan", *args], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def timing(repeat: int) -> None:
    plain = _timed(PLAN, repeat)
    churned = _timed([*PLAN, "--mtbf", "21600s"], repeat)
    print(f"plan {' '.join(PLAN)}: {plain:.2f} s; with --mtbf 21600s: {churned:.2f} s (target 3 s: {churned / 3:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    accuracy()
    kept()
    if not args.skip_timing:
        timing(args.repeat)


if __name__ == "__main__":
    main()
