"""What crafted inputs whose cost could grow faster than their size cost: each timed at a size and at four times it.

- ``report`` of a sweep whose N summary rows all name one 1.9 MB steps.csv (tests/synthetic_sweep.py's folder, the
  rows repeated): each file is read and parsed once per command, so the time grows with the rows, not rows x file;
- the NCCL fit of an nccl-tests log of N rows (three segments searched from prefix sums: O(N^2));
- a sweep scenario of N ``[[points]]`` tables, refused from the count of the points they expand to.

Each command runs in this process after a warm-up; the script prints the median over a few runs at N and 4N, the
ratio, and the most the stated order allows (8 for linear, 32 for quadratic: twice what 4x the input gives):

    python scripts/bench_input_costs.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this tree's netbench, not an installed one
sys.path.insert(0, str(REPO / "tests"))


def command(argv: list[str]) -> int:
    """``netbench ARGV`` in this process, its output dropped: the exit code (bench_refusals.py's runner)."""
    from bench_refusals import refuse

    return refuse(argv)[0]


def sweep_naming_one_run(folder: Path, rows: int) -> list[str]:
    """A sweep folder whose ``rows`` rows name one run with 8000 steps of 2 nodes (a 1.9 MB steps.csv)."""
    import pandas as pd
    from synthetic_sweep import grid, write_sweep

    write_sweep(folder, grid(reps=("full",), rates=("10mbit",)), steps=8000)
    frame = pd.read_csv(folder / "summary.csv")
    frame = pd.concat([frame] * rows, ignore_index=True).assign(key=[f"k{i}" for i in range(rows)])
    frame.to_csv(folder / "summary.csv", index=False)
    return ["report", str(folder)]


def nccl_log(folder: Path, rows: int) -> list[str]:
    """An nccl-tests log of ``rows`` sizes in two regimes."""
    source = (REPO / "tests" / "fixtures" / "nccl_tests" / "gcp-a3mega-2x8-h100-all_reduce.txt").read_text()
    head = source[: source.index("           8             2")]
    lines = []
    for i in range(rows):
        size = 8 * (i + 1)
        us = 10 + size / (1e3 if i < rows // 2 else 3e2)
        lines.append(f"{size} {size // 4} float sum -1 {us:.2f} 1.0 1.8 0 {us:.2f} 1.0 1.8 0")
    (folder / "log.txt").write_text(head + "\n".join(lines) + "\n")
    return ["calibrate", "--from-nccl-tests", str(folder / "log.txt"), "--out", str(folder / "fit.json")]


def points_tables(folder: Path, tables: int) -> list[str]:
    table = '[[points]]\nnodes = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\nbw = ["10mbit", "20mbit", "30mbit"]\n'
    (folder / "sc.toml").write_text('[grid]\nreplicator = ["full"]\n' + table * tables)
    return ["sweep", "--dry-run", str(folder / "sc.toml")]


# name, order of growth, N, build(folder, n) -> argv
CASES: list[tuple[str, int, int, Callable[[Path, int], list[str]]]] = [
    ("report: rows naming one steps.csv", 1, 150, sweep_naming_one_run),
    ("calibrate --from-nccl-tests: rows", 2, 128, nccl_log),
    ("sweep --dry-run: [[points]] tables", 1, 250, points_tables),
]


def timed(argv: list[str], runs: int) -> tuple[float, int]:
    times, code = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        code = command(argv)
        times.append(time.perf_counter() - started)
    return statistics.median(times), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    command(["plan", "--help"])  # imports, once
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, order, n, build) in enumerate(CASES):
            folders = [Path(tmp) / f"case{i}-{size}" for size in (n, 4 * n)]
            for folder in folders:
                folder.mkdir()
            argvs = [
                build(f / "in" if build is sweep_naming_one_run else f, size) for f, size in zip(folders, (n, 4 * n))
            ]
            command(argvs[0])  # warm: the figures' fonts, the first parse
            (small, code_small), (large, code_large) = (timed(a, runs) for a in argvs)
            ratio, allowed = large / small, 2 * 4**order
            worst = max(worst, ratio / allowed)
            print(
                f"{name:38} N={n:<5} {small:7.2f} s  4N {large:7.2f} s  ratio {ratio:5.1f} (at most {allowed}, "
                f"O(N^{order}))  exit {code_small},{code_large}"
            )
    print(f"worst ratio {worst:.2f} of what its order allows ({'met' if worst <= 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
