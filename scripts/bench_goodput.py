#!/usr/bin/env python3
"""How close plan's goodput under churn (:func:`netbench.model.goodput.expected_goodput`: the rules simulated over
four seeded draws of a length it picks) and the analytic answer (:func:`netbench.model.goodput.goodput`) come to a
long simulation of the same rules over the changes ``--churn`` draws (:func:`netbench.model.goodput.simulate`), and
what ``plan --mtbf`` costs in time.

1. Four nodes, MTBF 20 s, away 6 s (``--churn 20s``'s default), an hour of draws for each of 10 seeds: committed
   steps per second, plan's and the analytic against the seeds' mean, for ``full`` (a 0.5 s step, a leave anywhere
   in it fails it) and DiLoCo (a 0.28 s step, windows of 5 and 20 steps whose last 0.3 s is the exchange), as the
   quorum's wait and the heal grow.
2. ``plan --shapes llama-7b -r full,diloco --nodes 8,64,512 --bw 10gbit --delay 5ms --mtbf 21600s``, median of
   ``--repeat`` fresh interpreters, beside the same plan without ``--mtbf`` (run it under the heavy lock).

    PYTHONPATH=$PWD python3 scripts/bench_goodput.py
    PYTHONPATH=$PWD python3 scripts/bench_goodput.py --skip-timing
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from netbench.model.goodput import Recovery, expected_goodput, goodput, simulate
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
    if not args.skip_timing:
        timing(args.repeat)


if __name__ == "__main__":
    main()
