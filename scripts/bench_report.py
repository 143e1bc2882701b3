"""`netbench report` on a large sweep folder: how long it takes and how large its figures and page are.

Builds a sweep folder of N points by hand (tests/synthetic_sweep.py: summary.csv, sweep.json and each point's
steps.csv; 5 replicators x 3 rates x many node counts), then runs the console script's `netbench report FOLDER` and
prints the wall time against the 30 s target, every figure's size in pixels and bytes, and report.html's size.
The figures must not grow with the sweep (one panel per replicator, at most MAX_BARS bars, bounded legends). On a
quiet machine:

    python scripts/bench_report.py [--points 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_S = 30.0
REPLICATORS = ("full", "dct", "random", "diloco", "striding")
RATES = ("10mbit", "100mbit", "1gbit")


def points(count: int) -> list[dict]:
    """``count`` points: every replicator and rate at node counts 2, 3, ... (64 at most, then variants)."""
    out: list[dict] = []
    n = 2
    while len(out) < count:
        for r in REPLICATORS:
            for b in RATES:
                if len(out) < count:
                    nodes = min(n, 64)
                    variant = {"variant": f"v{n}"} if n > 64 else {}
                    out.append(
                        {"replicator": r, "nodes": nodes, "bw": b, "step": 0.1 + n / 500, "wire": 1e6 / n, **variant}
                    )
        n += 1
    return out


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels from the PNG header."""
    head = path.read_bytes()[16:24]
    return int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3, help="times the report is made (the median is quoted)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from synthetic_sweep import write_sweep

    netbench = shutil.which("netbench") or sys.exit("the netbench console script is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        source = write_sweep(Path(tmp) / "source", points(args.points))
        times = []
        for i in range(args.runs):
            folder = Path(tmp) / f"sweep{i}"
            shutil.copytree(source, folder)
            started = time.perf_counter()
            done = subprocess.run([netbench, "report", str(folder)], capture_output=True, text=True)
            times.append(time.perf_counter() - started)
            if done.returncode:
                sys.exit(f"netbench report failed: {done.stderr.strip()}")
        median = statistics.median(times)
        each = ", ".join(f"{t:.1f}" for t in times)
        print(f"{args.points} points: report in {median:.1f} s (median of {args.runs}: {each})")
        print(f"target {TARGET_S:.0f} s: {median / TARGET_S:.2f} of it ({'met' if median < TARGET_S else 'NOT met'})")
        for figure in sorted(folder.glob("*.png")):
            w, h = png_size(figure)
            print(f"  {figure.name:28} {w:5d} x {h:5d} px {figure.stat().st_size / 1e3:8.0f} kB")
        print(f"  {'report.html':28} {(folder / 'report.html').stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
