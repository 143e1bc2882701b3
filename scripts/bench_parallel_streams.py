#!/usr/bin/env python3
"""N parallel TCP streams between two emulated nodes, against what the NCCL socket model assumes of them.

The socket transport's model (netbench/model/nccl.py) gives N connections between two nodes the payload rate
``min(line x 1448/1514, N x window / RTT)``: each connection carries at most its buffers' window per round trip
(``netbench.model.nccl.tcp_window_bytes`` of the nodes' TCP settings, read back from the namespaces), and together
they fill the line. This measures it: for each link rate and one-way delay, one emulated cluster of two nodes,
``iperf3 -P N`` from node 0 to node 1 (steady state: the receiver's per-second sums after the first second, median),
beside the model, with the ratio and whether it is within 5 %.

    sudo python3 scripts/bench_parallel_streams.py                       # 10mbit-1gbit x 10-100 ms x N = 1, 4, 8
    sudo python3 scripts/bench_parallel_streams.py --rates 100mbit --delays 50ms --streams 1 4 --seconds 4

Needs root (or user namespaces) and iperf3; builds and removes its own namespaces.
"""

from __future__ import annotations

import argparse
import json
import select
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.cli.cluster_options import cluster_spec  # noqa: E402
from netbench.emulation.cluster import Cluster  # noqa: E402
from netbench.emulation.probe import INTERVAL_S, PROBE_PORT, WARMUP_S, steady_receiver_goodput  # noqa: E402
from netbench.emulation.tcpsettings import read_tcp_settings  # noqa: E402
from netbench.frames import FRAME_BYTES, MSS  # noqa: E402
from netbench.model.nccl import tcp_window_bytes  # noqa: E402
from netbench.tcp import TcpSettings  # noqa: E402
from netbench.units import parse_rate, parse_time  # noqa: E402

TOLERANCE = 0.05


def model_bps(rate_bps: float, rtt_s: float, streams: int, tcp: TcpSettings) -> float:
    """What N connections carry: the line's payload rate, or N windows per round trip if less."""
    return min(rate_bps * MSS / FRAME_BYTES, streams * tcp_window_bytes(tcp) * 8 / rtt_s)


def iperf_parallel(client, server, streams: int, seconds: float) -> float:
    """Steady-state goodput (bit/s) of ``iperf3 -P streams`` from client to server (the receiver's sums)."""
    srv = server.popen(
        ["iperf3", "-s", "-1", "-J", "-i", str(INTERVAL_S), "-p", str(PROBE_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    args = ["iperf3", "-c", server.address, "-p", str(PROBE_PORT), "-P", str(streams)]
    args += ["-t", str(seconds + WARMUP_S), "-J", "--get-server-output"]
    for _ in range(50):
        out = client.run(args, timeout=seconds + 60)
        data = json.loads(out.stdout or "{}")
        if "error" not in data and out.returncode == 0:
            srv.wait(timeout=10)
            return steady_receiver_goodput(data)[0]
        if "refused" not in data.get("error", ""):
            raise RuntimeError(f"iperf3: {data.get('error', out.stderr.strip())}")
        select.select([], [], [], 0.1)
    raise RuntimeError("iperf3 server in the node did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", nargs="+", default=["10mbit", "100mbit", "1gbit"])
    parser.add_argument(
        "--delays", nargs="+", default=["10ms", "50ms", "100ms"], help="one-way delay between the nodes"
    )
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=6.0, help="steady-state seconds measured per point")
    parser.add_argument(
        "--tcp-wmem-max",
        type=int,
        default=4194304,
        help="the nodes' largest TCP buffers (a stock distribution's 4 MiB: a window-bound connection on long paths)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not shutil.which("iperf3"):
        print("bench_parallel_streams: needs iperf3", file=sys.stderr)
        return 2
    rows = []
    print("iperf3 -P N between two emulated nodes vs min(line payload, N x window / RTT)")
    print(f"  {'rate':>8} {'delay':>6} {'N':>3} {'measured':>12} {'model':>12} {'ratio':>6}  window  bound")
    for rate in args.rates:
        for delay in args.delays:
            spec = cluster_spec({"nodes": 2, "bw": rate, "delay": delay, "tcp_wmem_max": args.tcp_wmem_max})
            with Cluster(spec) as cluster:
                client, server = cluster.nodes[0], cluster.nodes[1]
                tcp = TcpSettings(
                    **{k: v for k, v in read_tcp_settings(client).items() if k in TcpSettings.model_fields}
                )
                rtt = 2 * parse_time(delay)
                for n in args.streams:
                    measured = iperf_parallel(client, server, n, args.seconds)
                    model = model_bps(parse_rate(rate), rtt, n, tcp)
                    ratio = measured / model
                    bound = "line" if model >= parse_rate(rate) * MSS / FRAME_BYTES * 0.999 else "window"
                    rows.append(
                        {
                            "rate": rate,
                            "delay": delay,
                            "streams": n,
                            "measured_bps": measured,
                            "model_bps": model,
                            "ratio": ratio,
                            "window_bytes": tcp_window_bytes(tcp),
                            "bound": bound,
                            "within": abs(ratio - 1) <= TOLERANCE,
                        }
                    )
                    print(
                        f"  {rate:>8} {delay:>6} {n:>3} {measured / 1e6:>9.2f} Mb/s {model / 1e6:>9.2f} Mb/s "
                        f"{ratio:>6.3f}  {tcp_window_bytes(tcp) / 2**20:.1f}MiB  {bound}",
                        flush=True,
                    )
    within = sum(r["within"] for r in rows)
    ratios = [r["ratio"] for r in rows]
    print(
        f"{within} of {len(rows)} points within {100 * TOLERANCE:.0f} % of the model; ratio median "
        f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
