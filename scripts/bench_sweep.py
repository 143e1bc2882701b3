#!/usr/bin/env python3
"""What a sweep costs beyond its training: wall time, training time and the overhead's share of the wall.

Runs ``netbench sweep SCENARIO --fresh`` into a private temporary folder (or ``--keep DIR``), as a
user would (the calibration the scenario asks for included), and reads back every point's
steps.csv. Training time is, per point, the wall time from the first rank's first step (warm-up
included) to the last rank's last step, summed over points: what the sweep would cost if it did
nothing but train. Overhead is the rest of the wall time: calibration, building and tearing down
clusters, starting workers, joining process groups, writing results and the report. Also printed:
the sum of each step's slowest rank's step time as reported (divided by the point's time dilation,
so below the wall time its steps took where a point was dilated).

    python3 scripts/bench_sweep.py                                  # scenarios/ci.toml, clusters and workers reused
    python3 scripts/bench_sweep.py --scenario scenarios/fidelity.toml
    python3 scripts/bench_sweep.py --baseline                       # also with --no-reuse, and the ratio
    python3 scripts/bench_sweep.py --no-reuse                       # only with --no-reuse
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def training_s(sweep: Path) -> tuple[float, float, int]:
    """Over the sweep's points: the wall time their steps took, the sum of each step's slowest reported step time
    (warm-up included in both), and the number of points."""
    wall, reported, points = 0.0, 0.0, 0
    with (sweep / "summary.csv").open() as fh:
        for row in csv.DictReader(fh):
            steps = sweep / row["run_dir"] / "steps.csv"
            if not steps.exists():
                continue
            slowest: dict[str, float] = {}
            first, last = float("inf"), 0.0
            with steps.open() as sf:
                for step in csv.DictReader(sf):
                    slowest[step["step"]] = max(slowest.get(step["step"], 0.0), float(step["step_s"]))
                    first, last = min(first, float(step["t_start"])), max(last, float(step["t_end"]))
            wall += last - first
            reported += sum(slowest.values())
            points += 1
    return wall, reported, points


def phases(sweep: Path, wall: float) -> dict[str, float]:
    """Where the wall time went, summed over points, from the sweep folder's file times and the workers' records:
    before each point's workers (naming the run, re-shaping, spec files), forking them until every one has joined,
    the start gate to the first step, the steps, the last step to the run directory written, the report, and the
    rest (starting netbench, the fork server's imports, the calibration, leaving)."""
    runs = sorted((sweep / "runs").iterdir(), key=lambda p: (p / "workers" / "rank0.spec.json").stat().st_mtime)
    began = (sweep / "sweep.json").stat().st_mtime  # written once the calibration is there
    sums = dict.fromkeys(
        ("between points", "fork and join", "gate to first step", "steps", "last step to written"), 0.0
    )
    previous = began
    for run in runs:
        forked = (run / "workers" / "rank0.spec.json").stat().st_mtime
        joined, first, last = 0.0, float("inf"), 0.0
        for path in (run / "workers").glob("rank*.jsonl"):
            for line in path.read_text().splitlines():
                record = json.loads(line)
                if record.get("event") == "start":
                    joined = max(joined, record["t"])
                elif record.get("event") == "step":
                    first, last = min(first, record["t_start"]), max(last, record["t_end"])
        written = max(
            (run / name).stat().st_mtime for name in ("steps.csv", "run.json", "trace.json") if (run / name).exists()
        )
        sums["between points"] += forked - previous
        sums["fork and join"] += joined - forked
        sums["gate to first step"] += first - joined
        sums["steps"] += last - first
        sums["last step to written"] += max(0.0, written - last)
        previous = max(written, last)
    ended = (sweep / "report.html").stat().st_mtime
    sums["report"] = ended - previous
    sums["start, calibration, exit"] = wall - (ended - began)
    return sums


def bench(scenario: Path, reuse: bool, keep: Path | None) -> dict[str, Any]:
    """One fresh sweep of ``scenario``; its wall time, training time and overhead share."""
    with tempfile.TemporaryDirectory(prefix="netbench-bench-sweep-") as tmp:
        out = (keep / ("reuse" if reuse else "no-reuse")) if keep else Path(tmp) / "sweep"
        argv = [sys.executable, "-m", "netbench", "sweep", str(scenario), "--fresh", "--out", str(out)]
        if not reuse:
            argv.append("--no-reuse")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        began = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
        train, reported, points = training_s(out)
        try:
            spent = phases(out, wall)
        except (OSError, ValueError, KeyError):  # a failed point left a file out: no breakdown
            spent = {}
    return {
        "wall_s": wall,
        "training_s": train,
        "reported_s": reported,
        "points": points,
        "overhead": (wall - train) / wall,
        "code": done.returncode,
        "phases": spent,
    }


def show(label: str, figures: dict[str, Any]) -> None:
    print(
        f"{label:9s} {figures['points']:3.0f} points  wall {figures['wall_s']:7.1f} s  training "
        f"{figures['training_s']:6.1f} s  "
        f"overhead {figures['overhead']:6.1%} of wall  (step times as reported: {figures['reported_s']:.1f} s, "
        f"{1 - figures['reported_s'] / figures['wall_s']:.1%} of wall beside them; exit {figures['code']:.0f})"
    )
    if figures["phases"]:
        print("  " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in figures["phases"].items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "ci.toml")
    parser.add_argument(
        "--baseline", action="store_true", help="also run the sweep with --no-reuse and print the ratio"
    )
    parser.add_argument("--no-reuse", action="store_true", help="run only the sweep with --no-reuse")
    parser.add_argument(
        "--keep", type=Path, help="keep the sweeps in DIR/reuse and DIR/no-reuse (for `netbench compare`)"
    )
    args = parser.parse_args()
    print(f"{args.scenario}; load before: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} cores)")
    if args.no_reuse:
        show("no-reuse", bench(args.scenario, reuse=False, keep=args.keep))
        print(f"load after: {os.getloadavg()[0]:.2f}")
        return 0
    reused = bench(args.scenario, reuse=True, keep=args.keep)
    show("reuse", reused)
    if args.baseline:
        fresh = bench(args.scenario, reuse=False, keep=args.keep)
        show("no-reuse", fresh)
        print(f"wall no-reuse / reuse: {fresh['wall_s'] / reused['wall_s']:.2f}x")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
