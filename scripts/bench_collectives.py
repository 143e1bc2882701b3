"""Time single gloo collectives on an emulated cluster, beside an alpha-beta model and the gloo/TCP model.

Why: the step model's communication term is judged on whole training runs, where compute,
compression and many calls mix. This benchmark isolates one collective call of a chosen size on
a cluster of chosen rate, delay, nodes and TCP settings, so the gloo/TCP terms of
:mod:`netbench.model.gloo_tcp` can be checked one at a time (and captured with ``--ss``).

Each rank repeats ``--iters`` times: sleep ``--gap-ms`` (the link rests as it would during
compute), one call -- a training step's rhythm, so every rank settles into the same period and
the skew a barrier leaves between ranks does not enter. Per round the period minus the gap is
one call's time; reported is the median over rounds of the slowest rank's.

    nb-shared python scripts/bench_collectives.py --nodes 4 --bw 1gbit --delay 50ms \
        --collective all_reduce --bytes 4e6 --iters 5 --gap-ms 50

Prints one line per point (and ``--json`` one JSON object per point): measured, the alpha-beta
model (hops x (delay + overhead) + bytes / rate, printed as ``old``), and the gloo/TCP model (``new``), with ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _worker(args: argparse.Namespace) -> None:
    """One rank: init gloo over the node's interface, time ``iters`` calls, print JSON times."""
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = args.iface
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}:29512",
        rank=args.rank,
        world_size=args.nodes,
        timeout=datetime.timedelta(seconds=120),
    )
    n = max(1, int(args.bytes) // 4)
    x = torch.ones(n, dtype=torch.float32)
    outs = [torch.empty_like(x) for _ in range(args.nodes)]
    tiny = torch.zeros(1)

    def call() -> None:
        if args.collective == "all_reduce":
            dist.all_reduce(x)
        else:
            dist.all_gather(outs, x)

    for _ in range(2):  # opens what gloo opens lazily, warms the connections
        call()
    dist.all_reduce(tiny)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.iters):
            time.sleep(args.gap_ms / 1e3)
            call()
        times.append((time.perf_counter() - t0) / args.iters - args.gap_ms / 1e3)
    dist.all_reduce(tiny)
    print(json.dumps({"rank": args.rank, "times": times}), flush=True)
    dist.destroy_process_group()


def _ss(node) -> str:
    """TCP state of the node's gloo sockets (cwnd, rtt, send buffer) while a call runs."""
    out = node.run(["ss", "-tmi", "state", "established"], timeout=10).stdout
    return out


def _models(args: argparse.Namespace, tcp: dict) -> dict:
    from netbench.model.collectives import Link, cost, pattern
    from netbench.model.framing import Framing
    from netbench.model.gloo_tcp import gloo_time
    from netbench.tcp import TcpSettings
    from netbench.units import parse_rate, parse_time

    rate, delay = parse_rate(args.bw), parse_time(args.delay)
    p = pattern(args.collective, "ring", float(args.bytes), args.nodes)
    old_cost = cost(p, Link(rate, rate, delay), Framing())
    old = old_cost.time_s
    wire_factor = old_cost.transfer_s * rate / 8 / p.critical_bytes
    settings = TcpSettings.model_validate(tcp) if tcp else TcpSettings()
    new = gloo_time(
        args.collective,
        float(args.bytes),
        args.nodes,
        rate / 8 / wire_factor,
        delay,
        0.0,
        Framing().mss,
        settings,
        args.gap_ms / 1e3,
    ).time_s
    return {"old_s": old, "new_s": new}


def _main(args: argparse.Namespace) -> None:
    from netbench.cli.cluster_options import cluster_spec
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.tcpsettings import TcpOptions

    opts = TcpOptions(
        cc=args.tcp_cc,
        wmem_max=args.tcp_wmem_max,
        slow_start_after_idle=False if args.no_slow_start_after_idle else None,
    )
    spec = cluster_spec({"nodes": args.nodes, "bw": args.bw, "delay": args.delay}).model_copy(update={"tcp": opts})
    with Cluster(spec) as cluster:
        tcp = dict(cluster.tcp)
        master = cluster.nodes[0].address
        procs = [
            node.popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    "--rank",
                    str(node.index),
                    "--nodes",
                    str(args.nodes),
                    "--master",
                    master,
                    "--iface",
                    node.iface,
                    "--bytes",
                    str(args.bytes),
                    "--iters",
                    str(args.iters),
                    "--rounds",
                    str(args.rounds),
                    "--gap-ms",
                    str(args.gap_ms),
                    "--collective",
                    args.collective,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for node in cluster.nodes
        ]
        snapshots = []
        if args.ss:
            while procs[0].poll() is None and len(snapshots) < 200:
                snapshots.append(_ss(cluster.nodes[0]))
                time.sleep(0.05)
        outs = [p.communicate(timeout=600) for p in procs]
        cluster.down()
    bad = [(i, e) for i, (o, e) in enumerate(outs) if procs[i].returncode]
    if bad:
        raise SystemExit(f"rank {bad[0][0]} failed: {bad[0][1].strip().splitlines()[-1:]}")
    per_rank = [json.loads(o.strip().splitlines()[-1])["times"] for o, _ in outs]
    slowest = [max(ts) for ts in zip(*per_rank)]
    measured = statistics.median(slowest)
    models = _models(args, tcp)
    row = {
        "collective": args.collective,
        "nodes": args.nodes,
        "bytes": args.bytes,
        "bw": args.bw,
        "delay": args.delay,
        "gap_ms": args.gap_ms,
        "tcp": tcp,
        "measured_s": measured,
        "all_s": slowest,
        **models,
    }
    print(
        f"{args.collective:10s} P={args.nodes} {args.bytes:>10.0f} B {args.bw:>7s} {args.delay:>5s} cc={tcp.get('cc')} "
        f"measured {measured * 1e3:8.1f} ms  old {models['old_s'] * 1e3:8.1f} ms ({models['old_s'] / measured:5.2f})  "
        f"new {models['new_s'] * 1e3:8.1f} ms ({models['new_s'] / measured:5.2f})",
        flush=True,
    )
    if args.json:
        print(json.dumps(row))
    if args.ss:
        for snap in snapshots[:: max(1, len(snapshots) // 20)]:
            print(snap)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--bw", default="1gbit")
    ap.add_argument("--delay", default="0ms")
    ap.add_argument("--collective", choices=("all_reduce", "all_gather"), default="all_reduce")
    ap.add_argument("--bytes", type=float, default=4e6, help="all_reduce buffer / all_gather contribution per rank")
    ap.add_argument("--iters", type=int, default=4, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds")
    ap.add_argument("--gap-ms", type=float, default=50.0, help="idle time before each call (compute stand-in)")
    ap.add_argument("--tcp-cc", default=None)
    ap.add_argument("--tcp-wmem-max", type=int, default=None)
    ap.add_argument("--no-slow-start-after-idle", action="store_true")
    ap.add_argument("--ss", action="store_true", help="print ss -tmi snapshots of node 0 while it runs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--master", default="", help=argparse.SUPPRESS)
    ap.add_argument("--iface", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
    else:
        _main(args)


if __name__ == "__main__":
    main()
