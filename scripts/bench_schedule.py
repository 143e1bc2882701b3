"""The link-schedule figures of reports/schedule/README.md, measured again: each run, then what it shows.

Runs `netbench run` (dct, 2 nodes, gpt2-small:blocks=2 shapes, 100 ms stand-in compute) under each schedule in
scenarios/schedules/ and scenarios/traces/, and prints per segment the median step, the model's (forecast and
replay) and the error; per change, how many steps after it the step time was within 20 % of the new segment's
median; for an outage the stalled steps; for the timeout run its one-line reason. As root, on a quiet machine:

    python scripts/bench_schedule.py [--out /tmp/schedule-runs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

WORKLOAD = [
    "-r",
    "dct",
    "--nodes",
    "2",
    "--bw",
    "100mbit",
    "-w",
    "shapes",
    "--shapes",
    "gpt2-small:blocks=2",
    "--compute-ms",
    "100",
]
RUNS = [  # (name, extra options)
    ("half", ["--steps", "56", "--schedule", "scenarios/schedules/half.csv"]),
    ("fluctuating", ["--steps", "80", "--schedule", "scenarios/traces/fluctuating.csv"]),
    ("stepped", ["--steps", "30", "--schedule", "scenarios/traces/stepped.mahi"]),
    ("outage", ["--steps", "55", "--timeout", "30", "--schedule", "scenarios/schedules/outage.csv"]),
    ("outage, timeout 3 s", ["--steps", "55", "--timeout", "3", "--schedule", "scenarios/schedules/outage.csv"]),
    ("straggler", ["--steps", "60", "--schedule", "scenarios/schedules/straggler.csv"]),
]


def follows(run_dir: Path, segments: list[dict]) -> list[str]:
    """Per change: the steps after it until one was within 20 % of the new segment's median."""
    steps = pd.read_csv(run_dir / "steps.csv")
    steps = steps[~steps["warmup"].astype(bool)]
    per = steps.groupby("step").agg(t=("schedule_elapsed_s", "min"), s=("step_s", "max"))
    out = []
    for seg in segments[1:]:
        after, median = per[per["t"] >= seg["start_s"]], seg.get("step_time_s")
        if median and not after.empty:
            lag = next((i for i, v in enumerate(after["s"]) if abs(v / median - 1) < 0.2), None)
            out.append(
                f"change at {seg['start_s']:g} s: step time within 20 % of the new median {lag} step(s) after it"
            )
    return out


def show(name: str, summary: dict) -> None:
    print(f"== {name}: {summary.get('status')}" + (f" ({summary.get('reason')})" if summary.get("reason") else ""))
    for seg in summary.get("schedule_segments") or []:
        line = f"  {seg['label']}: {seg['steps']} steps"
        if seg.get("step_time_s"):
            line += f", median {seg['step_time_s']:.3f} s"
        for key, error in (("predicted_step_time_s", "forecast_error"), ("replay_step_time_s", "replay_error")):
            if seg.get(key):
                line += f", {error.split('_')[0]} {seg[key]:.3f} s ({seg[error]:+.1%})"
        if seg.get("stalled_steps"):
            line += f", stalled steps {seg['stalled_steps']}"
        print(line)
    for key in ("schedule_forecast_step_error", "schedule_replay_step_error"):
        if key in summary:
            print(f"  {key}: {summary[key]:.1%}")
    if summary.get("run_dir") and summary.get("status") == "ok":
        for line in follows(Path(summary["run_dir"]), summary.get("schedule_segments") or []):
            print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/schedule-runs")
    args = parser.parse_args()
    for name, extra in RUNS:
        done = subprocess.run(
            [sys.executable, "-m", "netbench", "run", *WORKLOAD, *extra, "--out", args.out, "--json"],
            capture_output=True,
            text=True,
        )
        try:
            show(name, json.loads(done.stdout))
        except json.JSONDecodeError:
            print(f"== {name}: no summary (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")


if __name__ == "__main__":
    main()
