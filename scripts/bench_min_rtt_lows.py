#!/usr/bin/env python3
"""How often bbr's PROBE_RTT comes on a connection whose calls sample the unloaded round trip.

bbr keeps the least round trip it sampled for 10 s and probes (PROBE_RTT) when that window runs out without a lower
sample. A call whose bytes leave paced below the line rate (a gossip pair's exchange at 1gbit) samples the unloaded
round trip itself, give or take the hosts' noise, so a call whose least sample is a new low renews the window. With
independent noise the k-th call since the last probe sets a new low with chance 1/k, and the model takes the gaps
between probes to average e^gamma windows: e^-gamma = 0.561 probes per window where a loaded connection makes one
(:data:`netbench.model.gloo_tcp.UNLOADED_PROBE_SHARE`).

The first part simulates that renewal (calls every ``gap`` of the window, a new low at the k-th with chance 1/k, a
probe where the window passes without one) and prints probes per window against e^-gamma. With ``--run`` it then
runs scenarios/gossip-grid.toml at ``--nodes``, ``--bw`` and ``--delay`` for ``--steps`` measured steps while polling
``ss -tin`` in every node's namespace, and prints per run the PROBE_RTT episodes it saw (a connection's window at 4
segments; a short one between two polls is missed, so this counts at most what happened) and the new lows (bbr's
min_rtt falling), per connection and window of wall time after the first, beside 1 (no renewal) and e^-gamma.

    python3 scripts/bench_min_rtt_lows.py
    python3 scripts/bench_min_rtt_lows.py --run --nodes 4 6 --bw 1gbit --delay 50ms --steps 80
"""

from __future__ import annotations

import argparse
import math
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.model.gloo_tcp import BBR_CWND_MIN_SEGMENTS, BBR_MIN_RTT_WINDOW_S, UNLOADED_PROBE_SHARE  # noqa: E402

CALLS = 400_000
NODE_NAMESPACE = re.compile(r"^netbench-[0-9a-f]+-n(\d+)$")
POLL_S = 0.05


def renewed_probes_per_window(gap: float, calls: int = CALLS, seed: int = 1) -> float:
    """Probes per window of a connection calling every ``gap`` windows, a new low at the k-th call since the last
    probe with chance 1/k (each renewing the window), a probe at the first call past a window without one."""
    rng = random.Random(seed)
    since_low, k, probes = 0.0, 1, 0
    for _ in range(calls):
        since_low += gap
        if since_low >= 1.0:
            probes, since_low, k = probes + 1, 0.0, 1
            continue
        k += 1
        if rng.random() < 1.0 / k:
            since_low = 0.0
    return probes / (calls * gap)


def poll(out: list[dict], stop: threading.Event) -> None:
    """Append one record per connection of every node namespace per poll: time, node, ends, window, bbr's min_rtt."""
    while not stop.is_set():
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        for name in names:
            node = NODE_NAMESPACE.match(name)
            if node is None:
                continue
            now = time.time()
            text = subprocess.run(
                ["ip", "netns", "exec", name, "ss", "-tinH", "state", "established"], capture_output=True, text=True
            ).stdout.splitlines()
            for head, info in zip(text[::2], text[1::2]):
                ends, window, low = head.split(), re.search(r"\bcwnd:(\d+)", info), re.search(r"mrtt:([0-9.]+)", info)
                if len(ends) >= 4 and window and low and ends[2].rsplit(":", 1)[0] != ends[3].rsplit(":", 1)[0]:
                    out.append(
                        {"t": now, "node": int(node.group(1)), "conn": (ends[2], ends[3]),
                         "cwnd": int(window.group(1)), "mrtt": float(low.group(1))}
                    )  # fmt: skip
        stop.wait(POLL_S)


def count(records: list[dict]) -> tuple[int, int, int, float]:
    """(connections, PROBE_RTT episodes, new lows, windows of wall time after the first) of one run's polls."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        by[r["conn"]].append(r)
    t0 = min(r["t"] for r in records)
    span = max(r["t"] for r in records) - t0
    episodes = lows = 0
    for samples in by.values():
        probing, low = False, math.inf
        for r in samples:
            now = r["cwnd"] <= BBR_CWND_MIN_SEGMENTS
            episodes += now and not probing and r["t"] - t0 >= BBR_MIN_RTT_WINDOW_S
            probing = now
            lows += r["mrtt"] < low and low < math.inf
            low = min(low, r["mrtt"]) if not now else low
    return len(by), episodes, lows, max(0.0, span / BBR_MIN_RTT_WINDOW_S - 1.0)


def run(nodes: int, bw: str, delay: str, steps: int) -> tuple[int, int, int, float]:
    """One gossip run of the grid's scenario while polling its namespaces."""
    records: list[dict] = []
    stop = threading.Event()
    poller = threading.Thread(target=poll, args=(records, stop), daemon=True)
    poller.start()
    with tempfile.TemporaryDirectory(prefix="nb-lows-") as out:
        argv = ["netbench", "sweep", str(REPO / "scenarios" / "gossip-grid.toml"), "--nodes", str(nodes)]
        argv += ["--bw", bw, "--delay", delay, "--steps", str(steps), "--out", out]
        subprocess.run(argv, check=True, capture_output=True)
    stop.set()
    poller.join()
    return count(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="also count probes on emulated gossip runs (root)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 6])
    parser.add_argument("--bw", default="1gbit")
    parser.add_argument("--delay", default="50ms")
    parser.add_argument("--steps", type=int, default=80)
    args = parser.parse_args()
    print(f"renewal by new lows, simulated ({CALLS} calls): probes per window, against e^-gamma = "
          f"{UNLOADED_PROBE_SHARE:.3f}")  # fmt: skip
    for gap in (0.01, 0.05, 0.1, 0.2, 0.35):
        share = renewed_probes_per_window(gap)
        print(f"  a call every {gap:4.2f} window: {share:.3f} ({share / UNLOADED_PROBE_SHARE:.2f} x e^-gamma)")
    if not args.run:
        return
    print(f"gossip at {args.bw}, {args.delay}, {args.steps} measured steps: per connection and window after the first")
    for nodes in args.nodes:
        conns, episodes, lows, windows = run(nodes, args.bw, args.delay, args.steps)
        per = episodes / (conns * windows) if conns and windows else float("nan")
        print(
            f"  {nodes} nodes: {conns} connections, {windows:.1f} windows, {episodes} PROBE_RTT episodes seen "
            f"({per:.2f} per window; {per / UNLOADED_PROBE_SHARE:.2f} x e^-gamma), {lows} new lows"
        )


if __name__ == "__main__":
    main()
