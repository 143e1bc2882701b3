"""Churn under `netbench exec`: how promptly a node leaves and joins, and what the restarted program costs to start.

A program of fixed 0.1 s steps (no communication: what is timed is netbench's part) runs on 4 nodes at 100mbit with
10 ms of delay; node n3 leaves at 6 s and joins at 12 s. Printed: each change's lateness against its due time
(schedule.csv's ``late_s``; target: under 0.2 s, twice the watch loop's period), the time from the join to the
restarted program's first step (an interpreter's start and ``import netbench``: host-specific), and that every step
of every node is in steps.csv once, with ``schedule_members`` 3 while n3 was away.

Run it alone on the machine (figures are timings): ``sudo python scripts/bench_churn.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from netbench.rundir.steps_schema import Col

REPO = Path(__file__).resolve().parents[1]
LATE_TARGET_S = 0.2
STEPS = 150
PROGRAM = f"import time, netbench\nfor i in range({STEPS}):\n    with netbench.step():\n        time.sleep(0.1)\n"
SCHEDULE = "time_s,link,member\n6,n3,leave\n12,n3,join\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the run folder goes (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-churn-") as tmp:
        out = args.out or Path(tmp)
        schedule = Path(tmp) / "churn.csv"
        schedule.write_text(SCHEDULE)
        command = [sys.executable, "-m", "netbench", "exec", "--json", "--nodes", "4", "--bw", "100mbit"]
        command += ["--delay", "10ms", "--no-capture", "--out", str(out), "--schedule", str(schedule)]
        done = subprocess.run(
            [*command, "--", sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise SystemExit(f"netbench exec failed ({done.returncode}): {done.stderr[-2000:]}")
        run_dir = Path(json.loads(done.stdout)["run_dir"])
        return report(run_dir)


def report(run_dir: Path) -> int:
    with open(run_dir / "schedule.csv", newline="") as fh:
        applied = list(csv.DictReader(fh))
    steps = pd.read_csv(run_dir / "steps.csv")
    print(f"4 nodes, 100mbit + 10 ms, n3 leaves at 6 s and joins at 12 s ({run_dir})")
    ok = True
    for row in applied:
        late = float(row["late_s"])
        ok &= late < LATE_TARGET_S
        print(f"  {row['what']:<10} due at {float(row['time_s']):g} s, late {late * 1e3:.0f} ms (target < 200 ms)")
    joined = next(float(r["wall_time"]) for r in applied if r["what"].endswith("joined"))
    n3 = steps[steps[Col.RANK] == 3].sort_values(Col.STEP)
    first_after = float(n3[n3[Col.T_START] >= joined][Col.T_START].min())
    print(f"  join to the restarted program's first step: {first_after - joined:.2f} s")
    counts = steps.groupby(Col.RANK)[Col.STEP].agg(["count", "nunique", "max"])
    whole = all(int(c["count"]) == int(c["nunique"]) == int(c["max"]) + 1 for _, c in counts.iterrows())
    ok &= whole
    per_node = {int(rank): int(n) for rank, n in counts["count"].items()}
    print(f"  steps per node: {per_node}; each recorded once, numbered without a gap: {whole}")
    away = steps[(steps[Col.RANK] == 0) & (steps[Col.SCHEDULE_MEMBERS] == 3)]
    print(f"  rank 0's steps while n3 was away: {len(away)} ({len(away) * 0.1:.1f} s of 0.1 s steps; 6 s expected)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
