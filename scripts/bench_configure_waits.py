#!/usr/bin/env python3
"""How long a process group's configuration holds a survivor when a member of its quorum is gone, against the
exchange timeout T: torchft's ``ProcessGroupGloo`` beside netbench's ``BoundedGloo``, in the three cases of
tests/test_configure_waits.py (real gloo members and torch stores on 127.0.0.1, killed with SIGKILL).

    PYTHONPATH=$PWD python3 scripts/bench_configure_waits.py [--timeout 2 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # the survivor at 127.0.0.1, below the killed member's address

from test_configure_waits import CASES  # noqa: E402 - the cases are the test's
from torchft import ProcessGroupGloo  # noqa: E402

from netbench.worker.bounded_gloo import BoundedGloo  # noqa: E402

GROUPS = {"torchft ProcessGroupGloo": ProcessGroupGloo, "netbench BoundedGloo": BoundedGloo}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, nargs="+", default=[2.0, 5.0], help="T, seconds")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| T | case | group | held (median of runs) | held / T | ended by |")
    print("|---|---|---|---|---|---|")
    for timeout in args.timeout:
        for case, run in CASES.items():
            for name, group in GROUPS.items():
                runs = [run(lambda t, g=group: g(timeout=t), timeout) for _ in range(args.repeat)]
                held = statistics.median(h for h, _ in runs)
                ended = runs[-1][1].split("] ")[-1][:60]
                print(f"| {timeout:g} s | {case} | {name} | {held:.2f} s | {held / timeout:.2f} | {ended} |")


if __name__ == "__main__":
    main()
