#!/usr/bin/env python3
"""What a sweep costs beyond its training: wall time, training time and the overhead's share of the wall.

Runs ``netbench sweep SCENARIO --fresh`` into a private temporary folder, as a user would (the
calibration the scenario asks for included), and reads back every point's steps.csv. Training
time is the sum over points and steps (warm-up included) of the slowest rank's step time: what
the sweep would cost if it did nothing but train. Overhead is the rest of the wall time: building
and tearing down clusters, starting workers, joining process groups, writing results.

    python3 scripts/bench_sweep.py                                  # scenarios/ci.toml, clusters and workers reused
    python3 scripts/bench_sweep.py --scenario scenarios/fidelity.toml
    python3 scripts/bench_sweep.py --baseline                       # also with --no-reuse, and the ratio
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def training_s(sweep: Path) -> tuple[float, int]:
    """Sum over the sweep's points of every step's slowest rank (warm-up included), and the number of points."""
    total, points = 0.0, 0
    with (sweep / "summary.csv").open() as fh:
        for row in csv.DictReader(fh):
            steps = sweep / row["run_dir"] / "steps.csv"
            if not steps.exists():
                continue
            slowest: dict[str, float] = {}
            with steps.open() as sf:
                for step in csv.DictReader(sf):
                    slowest[step["step"]] = max(slowest.get(step["step"], 0.0), float(step["step_s"]))
            total += sum(slowest.values())
            points += 1
    return total, points


def bench(scenario: Path, reuse: bool) -> dict[str, float]:
    """One fresh sweep of ``scenario``; its wall time, training time and overhead share."""
    with tempfile.TemporaryDirectory(prefix="netbench-bench-sweep-") as tmp:
        out = Path(tmp) / "sweep"
        argv = [sys.executable, "-m", "netbench", "sweep", str(scenario), "--fresh", "--out", str(out)]
        if not reuse:
            argv.append("--no-reuse")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        began = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
        train, points = training_s(out)
    return {"wall_s": wall, "training_s": train, "points": points, "overhead": (wall - train) / wall, "code": done.returncode}


def show(label: str, figures: dict[str, float]) -> None:
    print(f"{label:9s} {figures['points']:3.0f} points  wall {figures['wall_s']:7.1f} s  training {figures['training_s']:6.1f} s  "
          f"overhead {figures['overhead']:6.1%} of wall  (exit {figures['code']:.0f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "ci.toml")
    parser.add_argument("--baseline", action="store_true", help="also run the sweep with --no-reuse and print the ratio")
    args = parser.parse_args()
    print(f"{args.scenario}; load before: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} cores)")
    reused = bench(args.scenario, reuse=True)
    show("reuse", reused)
    if args.baseline:
        fresh = bench(args.scenario, reuse=False)
        show("no-reuse", fresh)
        print(f"wall no-reuse / reuse: {fresh['wall_s'] / reused['wall_s']:.2f}x")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
