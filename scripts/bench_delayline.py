"""Delay line cost: CPU per packet, packets late, and goodput through the userspace delay line.

The delay line (netbench.emulation.delayline) is the one emulation process whose CPU grows with
the packet rate; on a two-core host it competes with the nodes' codecs, and can make a
run not faithful. Each case builds a two-node cluster with a one-way delay, sends iperf3
through it, and reads the delay line's own CPU time (/proc/PID/stat) and counters, for the native
delay line (delayline.c) and the Python one, with the ratio native / python:

    python scripts/bench_delayline.py [--seconds 6] [--repeats 3] [--json]

With --rtt, round trips instead: for each one-way delay (0 ms: no delay line at all), the median of probe's
UDP pings (the link's round trip, both ends' wake-ups left out, and the ping process's own view beside it)
against the configured round trip, the error, and the error less the undelayed path's own round trip
(the 0 ms case of the same build), medians over the repeats:

    python scripts/bench_delayline.py --rtt [--delays 0,1,20,200] [--pings 50] [--repeats 3]
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


def round_trip(delay: float, pings: int) -> dict:
    """Probe's UDP round trip through a 1gbit two-node cluster with ``delay`` one way (each direction crosses the
    delay line once)."""
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=1e9, delay_s=delay), down=DirectionSpec(rate_bps=1e9))
    with Cluster(spec) as cluster:
        rtt = measure_rtt(cluster.nodes[0], cluster.nodes[1], count=pings)
    return {"rtt_ms": rtt["rtt_ms"], "rtt_user_ms": rtt["rtt_user_ms"]}


def rtt_table(delays_ms: list[float], pings: int, repeats: int) -> list[dict]:
    """Median round trip per (build, delay) over ``repeats``, builds and delays interleaved; the 0 ms case is each
    build's path floor (no delay line runs there)."""
    runs: dict[tuple[str, float], list[dict]] = {}
    for _ in range(repeats):
        for build in BUILDS:
            os.environ[delayline_native.ENV] = build
            for d in delays_ms:
                runs.setdefault((build, d), []).append(round_trip(d / 1e3, pings))
    os.environ.pop(delayline_native.ENV, None)
    rows = []
    for (build, d), each in runs.items():
        rtt = statistics.median(r["rtt_ms"] for r in each)
        floor = statistics.median(r["rtt_ms"] for r in runs.get((build, 0.0), each))
        rows.append(
            {
                "build": build,
                "delay_ms": d,
                "configured_rtt_ms": 2 * d,
                "rtt_ms": rtt,
                "rtt_user_ms": statistics.median(r["rtt_user_ms"] for r in each),
                "error_ms": rtt - 2 * d,
                "error_less_floor_ms": rtt - 2 * d - floor,
                "repeats": len(each),
            }
        )
    return rows


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
    parser.add_argument("--rtt", action="store_true", help="round trips against the configured delay instead")
    parser.add_argument("--delays", default="0,1,20,200", help="--rtt: one-way delays in ms, comma list")
    parser.add_argument("--pings", type=int, default=50, help="--rtt: pings per cluster")
    args = parser.parse_args()
    if args.rtt:
        rows = rtt_table([float(d) for d in args.delays.split(",")], args.pings, args.repeats)
        if args.json:
            print(json.dumps(rows))
        for r in [] if args.json else rows:
            print(
                f"{r['delay_ms']:>6g} ms one way {r['build']:>6}  RTT {r['rtt_ms']:9.3f} ms (configured "
                f"{r['configured_rtt_ms']:g}, error {r['error_ms']:+.3f}, less the 0 ms path "
                f"{r['error_less_floor_ms']:+.3f})  as the ping process saw it {r['rtt_user_ms']:.3f} ms",
                flush=True,
            )
        return 0
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
