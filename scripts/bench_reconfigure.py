#!/usr/bin/env python3
"""What a re-formed quorum's new process group costs before it trains: its configuration and its first collective.

Every time torchft's quorum changes, each member configures a new process group (``BoundedGloo.configure``: a
connect to the quorum's store, a TCPStore client, the ready keys, gloo's full mesh of connections) and the first
collective on it runs on fresh TCP connections, from the initial window. This measures both over netbench's
emulated network: ``netbench exec`` starts one prober per node; node 0 holds the store, as the quorum's store is on
one of its members; every round all nodes configure a new group for a new quorum id together, then all-reduce the
workload's gradients twice (the first on the fresh connections, the second on warm ones). Per node count and delay
it prints the configuration's time (first member in to last member out) beside the model's
(:func:`netbench.model.reform.configure_time_s`) and the first all-reduce's time over the second's, the median over
the rounds; then per node count a least-squares line in the round trip (how many round trips a configuration takes
and the hosts' own time), and a line through those in the number of peers: the model's constants.

    PYTHONPATH=$PWD python3 scripts/bench_reconfigure.py [--nodes 2 4 6] [--bw 100mbit] \
        [--delay 0ms 5ms 10ms 25ms] [--params 470528] [--rounds 12]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE_PORT = 29611
TIMEOUT_S = 30.0


def probe(rounds: int, params: int, out: Path) -> None:
    """One node's rounds: configure, all-reduce on the fresh group, all-reduce again; times to ``out`` as JSON."""
    import torch
    from torch.distributed import TCPStore

    from netbench.worker.bounded_gloo import BoundedGloo

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host = os.environ["MASTER_ADDR"]
    timeout = timedelta(seconds=TIMEOUT_S)
    store = TCPStore(host, STORE_PORT, world, is_master=rank == 0, timeout=timeout, wait_for_workers=False)
    group = BoundedGloo(timeout)
    grads = torch.ones(params)
    times = []
    for q in range(1, rounds + 1):
        store.set(f"round{q}/{rank}", b"1")
        store.wait([f"round{q}/{r}" for r in range(world)], timeout)
        start = time.time()
        group.configure(f"{host}:{STORE_PORT}/torchft/{q}/0", f"node{rank}", rank, world, q)
        configured = time.time()
        group.allreduce([grads], torch.distributed.ReduceOp.SUM).wait()
        first = time.time()
        group.allreduce([grads], torch.distributed.ReduceOp.SUM).wait()
        times.append((start, configured, first, time.time()))
    out.write_text(json.dumps({"rank": rank, "times": times}))
    store.set(f"done/{rank}", b"1")
    if rank == 0:  # the store's host stays until every member is done with it
        store.wait([f"done/{r}" for r in range(world)], timeout)


def measure(nodes: int, bw: str, delay: str, params: int, rounds: int) -> list[tuple[float, float, float]]:
    """Per round: the configuration (first start to last configured), the first all-reduce less the second (each
    first member in to last member out), and the second."""
    with tempfile.TemporaryDirectory() as folder:
        outs = Path(folder)
        command = [
            "netbench", "exec", "--nodes", str(nodes), "--bw", bw, "--delay", delay, "--no-capture",
            "--out", str(outs / "runs"), "--",
            sys.executable, str(Path(__file__).resolve()), "--probe", str(outs), "--rounds", str(rounds),
            "--params", str(params),
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ | {"PYTHONPATH": str(REPO)})
        per_rank = [json.loads(p.read_text())["times"] for p in sorted(outs.glob("rank*.json"))]
    rows = []
    for q in range(rounds):
        start = min(r[q][0] for r in per_rank)
        configured = max(r[q][1] for r in per_rank)
        first = max(r[q][2] for r in per_rank) - configured
        second = max(r[q][3] for r in per_rank) - max(r[q][2] for r in per_rank)
        rows.append((configured - start, first - second, second))
    return rows


def seconds(text: str) -> float:
    return float(text.removesuffix("ms")) / 1e3


def line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares: (intercept, slope)."""
    mean_x = statistics.mean(x for x, _ in points)
    mean_y = statistics.mean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - slope * mean_x, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 6])
    parser.add_argument("--bw", default="100mbit")
    parser.add_argument("--delay", nargs="+", default=["0ms", "5ms", "10ms", "25ms"], help="one-way, per link")
    parser.add_argument("--params", type=int, default=470_528, help="fp32 values all-reduced (run's workload)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        probe(args.rounds, args.params, args.probe / f"rank{os.environ['RANK']}.json")
        return
    from netbench.model.reform import configure_time_s

    print(
        "| nodes | one-way delay | configuration (median) | the model's | first all-reduce over the second | second |"
    )
    print("|---|---|---|---|---|---|")
    fits = []
    for nodes in args.nodes:
        points = []
        for delay in args.delay:
            rows = measure(nodes, args.bw, delay, args.params, args.rounds)[1:]  # the first round warms the store
            one_way = seconds(delay)  # the delay is on each node's uplink: one a way between two nodes
            configure, slow, second = (statistics.median(r[i] for r in rows) for i in range(3))
            points.append((2 * one_way, configure))
            print(
                f"| {nodes} | {delay} | {configure:.3f} s | {configure_time_s(one_way, nodes):.3f} s | "
                f"+{slow:.3f} s | {second:.3f} s |"
            )
        if len(points) > 1:
            fits.append((nodes, *line(points)))
    for nodes, software, round_trips in fits:
        print(f"{nodes} nodes: configuration = {software:.4f} s + {round_trips:.1f} round trips")
    if len(fits) > 1:
        base, per_peer = line([(n - 1, r) for n, _, r in fits])
        soft, soft_per_peer = line([(n - 1, s) for n, s, _ in fits])
        print(
            f"over the peers (members - 1): {base:.1f} + {per_peer:.1f} per peer round trips, "
            f"{soft:.4f} + {soft_per_peer:.4f} s per peer of the hosts' time"
        )


if __name__ == "__main__":
    main()
