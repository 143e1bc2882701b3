"""Write the link traces shipped in scenarios/traces/ (deterministic: run it again and the files are the same).

    python scripts/make_traces.py [--out scenarios/traces]

* ``stepped.mahi``: a Mahimahi trace (one line per 1500-byte delivery opportunity, in milliseconds) of three
  3-second steps, 30mbit, 15mbit, 10mbit: a link that degrades in stages. Packets are spread evenly in each
  millisecond grid, so each 1-second window holds exactly rate / 12000 opportunities.
* ``fluctuating.csv``: a rate trace (``time_s,rate``) of 2-second windows whose rate wanders between 20mbit and
  60mbit: a random walk in log-rate (seed 30, steps of N(0, 0.35)), reflected at the bounds and rounded to 1mbit.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

STEPPED_MBIT = (30, 15, 10)
STEP_S = 3
FLUCTUATING = dict(seed=30, windows=15, window_s=2, low=20.0, high=60.0, sigma=0.35, start=40.0)


def stepped_lines() -> list[str]:
    """Delivery opportunities (ms) for each step: rate/12000 per second, spread evenly over the second."""
    lines = []
    for i, mbit in enumerate(STEPPED_MBIT):
        per_second = math.ceil(mbit * 1e6 / (1500 * 8))  # never under the rate: 10mbit stays shapeable
        for second in range(STEP_S):
            base = (i * STEP_S + second) * 1000
            lines += [str(base + k * 1000 // per_second) for k in range(per_second)]
    return lines


def fluctuating_rows() -> list[str]:
    """``time_s,rate`` rows of the random walk (log-rate, reflected at the bounds)."""
    p = FLUCTUATING
    rng = random.Random(p["seed"])
    low, high, log_rate = math.log(p["low"]), math.log(p["high"]), math.log(p["start"])
    rows = ["time_s,rate"]
    for w in range(p["windows"]):
        rows.append(f"{w * p['window_s']},{round(math.exp(log_rate))}mbit")
        log_rate += rng.gauss(0.0, p["sigma"])
        log_rate = (
            low + abs(log_rate - low)
            if log_rate < low
            else high - abs(log_rate - high)
            if log_rate > high
            else log_rate
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("scenarios/traces"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stepped.mahi").write_text("\n".join(stepped_lines()) + "\n")
    (args.out / "fluctuating.csv").write_text("\n".join(fluctuating_rows()) + "\n")
    print(f"wrote {args.out / 'stepped.mahi'} and {args.out / 'fluctuating.csv'}")


if __name__ == "__main__":
    main()
