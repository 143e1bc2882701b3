#!/usr/bin/env python3
"""A ring all-reduce loads both directions of every link at once: how close it comes to the line rate, with a
shaper that serves pure ACKs first (netbench's) and with a plain FIFO, under bbr and cubic.

In a FIFO each direction's pure ACKs queue behind the other direction's data; under bbr, whose window on a link
without delay is its ACK-aggregation allowance, the direction with the smaller window then runs at the ratio of the
windows (:mod:`netbench.emulation.acksfirst`). Per congestion control and queue this builds an emulated star,
runs ``--calls`` warm gloo all-reduces of ``--floats`` float32 on every node with a short pause between (a step's
compute), and prints the median call (first rank in to last rank out) against the line-rate time of the ring's bytes
(2 (n-1)/n of the buffer each way, in full frames at the link's rate) and the ratio.

    PYTHONPATH=$PWD python3 scripts/bench_bidirectional.py [--nodes 2 4] [--bw 10mbit] [--floats 393216] [--calls 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MASTER_PORT = 29631
PAUSE_S = 0.05


def probe(floats: int, calls: int, out: Path) -> None:
    """One rank: warm all-reduces, then ``calls`` timed ones; (start, end) per call to ``out`` as JSON."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    buffer = torch.ones(floats)
    for _ in range(3):
        dist.all_reduce(buffer)
    times = []
    for _ in range(calls):
        time.sleep(PAUSE_S)
        start = time.time()
        dist.all_reduce(buffer)
        times.append((start, time.time()))
    (out / f"rank{rank}.json").write_text(json.dumps(times))
    dist.barrier()


def measure(nodes: int, rate_bps: float, cc: str, acks_first: bool, floats: int, calls: int) -> float:
    """Median call span over the ranks, in seconds."""
    from netbench.emulation.capabilities import detect
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec
    from netbench.emulation.tcpsettings import TcpOptions

    link = DirectionSpec(rate_bps=rate_bps)
    spec = ClusterSpec(nodes=nodes, up=link, down=link, tcp=TcpOptions(cc=cc))
    capabilities = dataclasses.replace(detect(), acks_first=acks_first)
    with tempfile.TemporaryDirectory() as folder, Cluster(spec, capabilities=capabilities) as cluster:
        out = Path(folder)
        master = cluster.nodes[0].address
        procs = [
            node.popen(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--probe",
                    folder,
                    "--floats",
                    str(floats),
                    "--calls",
                    str(calls),
                ],
                env={
                    "RANK": str(i),
                    "WORLD_SIZE": str(nodes),
                    "MASTER_ADDR": master,
                    "MASTER_PORT": str(MASTER_PORT),
                    "GLOO_SOCKET_IFNAME": node.iface,
                    "PYTHONPATH": str(REPO),
                },
            )
            for i, node in enumerate(cluster.nodes)
        ]
        if any(proc.wait(timeout=600) for proc in procs):
            raise SystemExit("a prober failed")
        ranks = [json.loads((out / f"rank{i}.json").read_text()) for i in range(nodes)]
    spans = [max(r[k][1] for r in ranks) - min(r[k][0] for r in ranks) for k in range(calls)]
    return statistics.median(spans)


def line_rate_s(nodes: int, rate_bps: float, floats: int) -> float:
    """The ring's bytes each way in full frames at the link's rate."""
    from netbench.frames import FRAME_BYTES, MSS

    return 2 * (nodes - 1) / nodes * floats * 4 * FRAME_BYTES / MSS * 8 / rate_bps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--bw", default="10mbit")
    parser.add_argument("--floats", type=int, default=393_216)  # 1.5 MiB
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--probe", type=Path)
    args = parser.parse_args()
    if args.probe:
        probe(args.floats, args.calls, args.probe)
        return
    from netbench.units import parse_rate  # noqa: E402

    rate = parse_rate(args.bw)
    print(f"{'nodes':>5} {'cc':>6} {'queue':>12} {'median call':>12} {'line rate':>10} {'ratio':>6}")
    for nodes in args.nodes:
        line = line_rate_s(nodes, rate, args.floats)
        for cc in ("bbr", "cubic"):
            for acks_first in (True, False):
                span = measure(nodes, rate, cc, acks_first, args.floats, args.calls)
                queue = "ACKs first" if acks_first else "FIFO"
                print(f"{nodes:>5} {cc:>6} {queue:>12} {span:>11.3f}s {line:>9.3f}s {span / line:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
