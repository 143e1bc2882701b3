"""How much does this host's codec speed drift? The same encode + decode, timed again and again.

A run's prediction takes each replicator's encode/decode cost from a calibration measured at another
moment; a codec-heavy run can only match it while the host's cores run as fast as they did then (the
fidelity check flags a run whose codec took over 5 % of its step more than calibrated). On this
project's VM the gpt2-small:blocks=2 dct codec took 149 ms a step at one moment and 242 ms minutes
later. This prints, per round, the median encode + decode CPU time of a step in two gloo processes
side by side (as a 2-node run has them), and the spread over the rounds:

    python3 scripts/bench_codec_drift.py [--shapes gpt2-small:blocks=2] [--replicator dct] [--rounds 5] [--pause 20]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
import warnings
from datetime import timedelta


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, port: int, shapes_text: str, replicator: str, steps: int, queue) -> None:
    import torch
    import torch.distributed as dist

    from netbench.declarations.config import ReplicatorConfig
    from netbench.replicators.build import build_replicator
    from netbench.shapes import resolve_shapes

    warnings.filterwarnings("ignore")
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=600)
    )
    try:
        shapes = resolve_shapes(shapes_text)
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(s.shape) * 0.02) for s in shapes]
        grads = [torch.randn(s.shape) * 1e-3 for s in shapes]
        rep = build_replicator(
            params, ReplicatorConfig(name=replicator), group=dist.group.WORLD, names=[s.name for s in shapes]
        )
        cpu = []
        for step in range(steps + 1):  # the first is a warm-up
            for p, g in zip(params, grads):
                p.grad = g.clone()
            stats = rep.step()
            if step:
                cpu.append(stats.compress_cpu_s + stats.decode_cpu_s)
        queue.put(statistics.median(cpu))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def one_round(shapes: str, replicator: str, steps: int) -> float:
    """Median encode + decode CPU seconds of a step, the slower of the two processes."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(
        _rank, args=(_free_port(), shapes, replicator, steps, queue), nprocs=2, join=True, start_method="spawn"
    )
    return max(queue.get(), queue.get())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="gpt2-small:blocks=2")
    parser.add_argument("--replicator", default="dct")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pause", type=float, default=20.0, help="seconds between rounds")
    args = parser.parse_args()
    seen = []
    for i in range(args.rounds):
        if i:
            time.sleep(args.pause)
        seen.append(one_round(args.shapes, args.replicator, args.steps))
        print(
            f"{time.strftime('%H:%M:%S')} round {i + 1}: encode + decode {seen[-1] * 1e3:.1f} ms CPU a step", flush=True
        )
    print(
        f"{args.replicator} on {args.shapes}: min {min(seen) * 1e3:.1f}, median {statistics.median(seen) * 1e3:.1f}, "
        f"max {max(seen) * 1e3:.1f} ms; max/min {max(seen) / min(seen):.2f} (1.00: the host's speed held)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
