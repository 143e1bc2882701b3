"""How well the jiffies counter measures the kernel's tick: the raw rate of each of ``--repeats`` measurements of
``--interval`` seconds (what ``netbench calibrate`` takes where no kernel configuration is readable), the value each
snaps to, and the CONFIG_HZ the build configuration gives where it is readable. Needs root (``/proc/timer_list``):

    sudo python3 scripts/bench_kernel_hz.py [--repeats 20] [--interval 0.25] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from netbench.calibrate.kernel import MEASURE_S, configured_hz, jiffies_rate, snapped_hz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--interval", type=float, default=MEASURE_S)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rates = [jiffies_rate(interval_s=args.interval) for _ in range(args.repeats)]
    if any(rate is None for rate in rates):
        print("the jiffies counter in /proc/timer_list is not readable (run as root)", file=sys.stderr)
        return 2
    measured = [rate for rate in rates if rate is not None]
    configured = configured_hz()
    result = {
        "interval_s": args.interval,
        "repeats": args.repeats,
        "rate_min": min(measured),
        "rate_mean": statistics.fmean(measured),
        "rate_max": max(measured),
        "snapped": sorted({snapped_hz(rate) for rate in measured}, key=str),
        "configured_hz": None if configured is None else configured[0],
    }
    print(json.dumps(result) if args.json else "\n".join(f"{key}: {value}" for key, value in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
