"""How long netbench takes to refuse each crafted input whose cost would grow with its size if not checked first.

Each case is a file written to a temporary folder of its own and one command that must refuse it (exit 2, one line;
DIR in the command stands for the folder, else the file is named last). The command runs in this process after a
warm-up (the interpreter's start and imports are not the input's cost), and the script prints each refusal's median
time over a few runs against the 0.1 s target:

    python scripts/bench_refusals.py [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's netbench, not an installed one

TARGET_S = 0.1
SITES = '[[sites]]\nname = "a"\nnodes = N\nlan_bw = "1gbit"\n[[sites]]\nname = "b"\nnodes = 2\nlan_bw = "1gbit"\n'
WAN = '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n'
CASES: list[tuple[str, str, str, list[str]]] = [  # name, file, text, argv (FILE stands for the file)
    ("topology of 8000 nodes", "t.toml", SITES.replace("N", "8000") + WAN, ["plan", "-r", "full", "--topology"]),
    ("topology of 1e9 nodes", "t.toml", SITES.replace("N", "1000000000") + WAN, ["plan", "-r", "full", "--topology"]),
    ("TOML nested 100k deep", "t.toml", "a = " + "[" * 100_000 + "]" * 100_000, ["plan", "-r", "full", "--topology"]),
    ("JSON nested 1M deep", "s.json", "[" * 1_000_000 + "]" * 1_000_000, ["plan", "-r", "full", "--shapes"]),
    (
        "schedule of 40000 columns",
        "s.csv",
        ",".join(f"c{i}" for i in range(40_000)) + "\n",
        ["sweep", "--dry-run", "--schedule"],
    ),
    (
        "schedule of 600000 rows",
        "s.csv",
        "time_s,rate\n" + "1,10mbit\n" * 600_000,
        ["sweep", "--dry-run", "--schedule"],
    ),
    ("16-byte trace of 31 years", "s.mahi", "0\n999999999999\n", ["sweep", "--dry-run", "--schedule"]),
    ("16 MiB trace, last line bad", "s.mahi", "0\n" * 8_000_000 + "x\n", ["sweep", "--dry-run", "--schedule"]),
    (
        "scenario of 1e6 points",
        "sc.toml",
        "[grid]\nnodes = "
        + json.dumps(list(range(2, 65)))
        + "\nbw = "
        + json.dumps([f"{i + 10}mbit" for i in range(100)])
        + "\ndelay = "
        + json.dumps([f"{i}ms" for i in range(200)])
        + "\n",
        ["sweep", "--dry-run"],
    ),
    (
        "plan --sites 50000",
        "",
        "",
        ["plan", "--topology", "sites", "--sites", "50000", "--nodes", "50000", "--wan-bw", "1gbit"],
    ),
    (
        "999 [[points]] tables of 30 points",
        "sc.toml",
        '[grid]\nreplicator = ["full"]\n'
        + ('[[points]]\nnodes = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\nbw = ["10mbit", "20mbit", "30mbit"]\n') * 999,
        ["sweep", "--dry-run"],
    ),
    (
        "summary.csv of 30000 rows split by \\r",
        "summary.csv",
        "key,label,status,run_dir\n" + "k,l,ok,\r" * 30_000,
        ["report", "DIR"],
    ),
    ("plan --nodes of 1000 counts", "", "", ["plan", "-r", "full", "--nodes", ",".join(map(str, range(2, 1002)))]),
    ("plan --mfu 5e-324", "", "", ["plan", "-r", "full", "--accelerator", "h100-sxm", "--mfu", "5e-324"]),
    (
        "calibration holding NaN",
        "c.json",
        '{"version": 4, "software_overhead_s": NaN}',
        ["plan", "-r", "full", "--calibration"],
    ),
    (
        "NCCL fit of bus 5e-324 B/s",
        "f.json",
        '{"collectives": {"all_reduce": {"ranks": 2, "segments": [{"upto_bytes": 1e12, "bus_Bps": 5e-324}]}}}',
        ["plan", "-r", "full", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration"],
    ),
]


def refuse(argv: list[str]) -> tuple[int, str]:
    """``netbench ARGV`` in this process: its exit code and the last line it wrote to stderr."""
    from netbench.cli.app import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue().strip().rsplit("\n", 1)[-1]
    return 0, err.getvalue().strip().rsplit("\n", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    refuse(["plan", "--help"])  # imports, once
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, file, text, argv) in enumerate(CASES):
            folder = Path(tmp) / f"case{i}"
            folder.mkdir()
            full = [str(folder) if a == "DIR" else a for a in argv]
            if file:
                path = folder / file
                path.write_text(text)
                if "DIR" not in argv:
                    full.append(str(path))
            times, codes = [], set()
            for _ in range(args.runs):
                started = time.perf_counter()
                code, line = refuse(full)
                times.append(time.perf_counter() - started)
                codes.add(code)
            median = statistics.median(times)
            worst = max(worst, median)
            said = line.replace(tmp, "TMP").removeprefix("netbench: error: ")[:70]
            print(f"{name:30} {median * 1e3:8.1f} ms  exit {','.join(map(str, sorted(codes)))}  {said}")
    verdict = "met" if worst < TARGET_S else "NOT met"
    print(f"slowest refusal {worst:.2f} s: {worst / TARGET_S:.2f} of the {TARGET_S:g} s target ({verdict})")


if __name__ == "__main__":
    main()
