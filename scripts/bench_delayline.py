"""Delay line cost: CPU per packet, packets late, and goodput through the userspace delay line.

The delay line (netbench.emulation.delayline) is the one emulation process whose CPU grows with
the packet rate; on a two-core host it competes with the nodes' codecs, and can make a
run not faithful. Each case builds a two-node cluster with a one-way delay, sends iperf3
through it, and reads the delay line's own CPU time (/proc/PID/stat) and counters, for the native
delay line (delayline.c) and the Python one, with the ratio native / python:

    python scripts/bench_delayline.py [--seconds 6] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from netbench.emulation import delayline_native
from netbench.emulation.cluster import Cluster
from netbench.emulation.probe import measure_goodput, measure_rtt
from netbench.emulation.spec import ClusterSpec, DirectionSpec

# (label, rate in bit/s, one-way delay in s)
CASES = [("100mbit+20ms", 100e6, 0.020), ("1gbit+5ms", 1e9, 0.005)]
BUILDS = ("native", "python")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (its threads included)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(rate: float, delay: float, seconds: float) -> dict:
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=rate, delay_s=delay), down=DirectionSpec(rate_bps=rate))
    with Cluster(spec) as cluster:
        client, server = cluster.nodes[0], cluster.nodes[1]
        pid = cluster.helper_pids.get("delay_line")
        rtt = measure_rtt(client, server, count=10)
        cpu0 = cpu_seconds(pid)
        stats0 = _stats(cluster)
        goodput, _, _ = measure_goodput(client, server, seconds)
        cpu = cpu_seconds(pid) - cpu0
        stats = _stats(cluster)
        packets = stats["passed"] - stats0["passed"]
        late = stats["late"] - stats0["late"]
    return {
        "goodput_ratio": goodput / rate,
        "rtt_ms": rtt["rtt_ms"],
        "packets": packets,
        "cpu_s": cpu,
        "us_per_packet": 1e6 * cpu / max(1, packets),
        "late_fraction": late / max(1, packets),
    }


def _stats(cluster: Cluster) -> dict:
    import time

    time.sleep(1.2)  # the delay line rewrites its counters every second
    with open(cluster.delay_line_stats_path) as fh:
        return json.load(fh)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for label, rate, delay in CASES:
        per_build = {}
        for build in BUILDS:
            os.environ[delayline_native.ENV] = build
            runs = [measure(rate, delay, args.seconds) for _ in range(args.repeats)]
            row = per_build[build] = {
                "link": label,
                "build": build,
                **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
            }
            rows.append(row)
            if not args.json:
                print(
                    f"{label:>13} {build:>6}  {row['us_per_packet']:5.1f} us CPU/packet  {row['packets']:8.0f} "
                    "packets  "
                    f"late {100 * row['late_fraction']:.2f}%  goodput/rate {row['goodput_ratio']:.3f}  rtt "
                    f"{row['rtt_ms']:.2f} ms",
                    flush=True,
                )
        ratio = per_build["native"]["us_per_packet"] / per_build["python"]["us_per_packet"]
        if not args.json:
            print(f"{label:>13}  CPU per packet, native / python: {ratio:.2f}", flush=True)
    os.environ.pop(delayline_native.ENV, None)
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
