#!/usr/bin/env python3
"""Hold ``netbench plan``'s predicted DCT traffic against the published DeToNATION DeMoReplicator.

The reference (``pip install --no-deps detonation==0.5.2; pip install mltiming einops``) sends,
per parameter and step, int32 indices and fp32 values through two ``torch.distributed.all_gather``
calls. This script runs it on tensors of a shapes preset in ``--world`` gloo processes on
127.0.0.1, wraps ``torch.distributed.all_gather`` to count the bytes each rank hands to it, then
asks ``netbench plan`` -- from a shapes *file* and explicit wire dtypes (``--index-dtype int32
--value-dtype fp32``) -- for the same configuration, and prints both and their ratio.

Exit status 0 when the main case agrees within ``--tolerance`` (3 %). A second, informational
case (``--edge-case``) uses dimensions that the chunk size does not divide, where DeMo picks the
largest divisor of each dimension <= chunk while netbench cuts full chunks plus an edge chunk:
there the two formulas differ, by design, and the script says by how much.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from netbench.shapes import resolve_shapes  # noqa: E402

# DeMo's chunking is degenerate on these (1000 = 2^3 5^3 -> 50, 1031 prime -> 1): shows where formulas part
EDGE_SHAPES = {"a.weight": [1000, 768], "b.weight": [768, 1031], "c.bias": [1031], "d.weight": [768, 768]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference_worker(rank: int, world: int, port: int, shapes: dict, args: argparse.Namespace, queue) -> None:
    """One rank of the reference: DeMoReplicator on random gradients; count bytes handed to all_gather."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(minutes=10)
    )
    counted = {"bytes": 0, "calls": 0}
    real_all_gather = dist.all_gather

    def counting_all_gather(tensor_list, tensor, *a, **kw):
        counted["bytes"] += tensor.numel() * tensor.element_size()  # own contribution
        counted["calls"] += 1
        return real_all_gather(tensor_list, tensor, *a, **kw)

    dist.all_gather = counting_all_gather  # the reference calls dist.all_gather at run time
    from detonation.repl.demo_replicator import DeMoReplicator

    torch.manual_seed(rank)
    params = [torch.nn.Parameter(torch.randn(*dims) * 0.02) for dims in shapes.values()]
    optim = torch.optim.SGD(params, lr=1e-3)
    repl = DeMoReplicator(compression_decay=0.999, compression_topk=args.topk, compression_chunk=args.chunk)
    repl.init(optim, replication_parallel_group=dist.group.WORLD)
    group = optim.param_groups[0]
    for _ in range(args.steps):
        repl.pre_step()
        for p in params:
            repl.replicate(torch.randn_like(p) * 1e-3, p, optim.state[p], group)
        repl.post_step()
    if rank == 0:
        chunks = {int(k): int(v) for k, v in repl.transform.shape_dict.items()}
        queue.put(
            {
                "bytes_per_step": counted["bytes"] / args.steps,
                "calls_per_step": counted["calls"] / args.steps,
                "logged_tx_per_step": sum(repl.data_transmitted) / args.steps,
                "chunks": chunks,
            }
        )
    dist.barrier()
    dist.destroy_process_group()


def run_reference(shapes: dict, args: argparse.Namespace) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(
        _reference_worker,
        args=(args.world, _free_port(), shapes, args, queue),
        nprocs=args.world,
        join=True,
        start_method="spawn",
    )
    return queue.get()


def run_plan(shapes_file: Path, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "netbench",
        "plan",
        "--shapes",
        str(shapes_file),
        "--replicator",
        "dct",
        "--nodes",
        str(max(2, args.world)),
        "--topk",
        str(args.topk),
        "--chunk",
        str(args.chunk),
        "--index-dtype",
        "int32",
        "--value-dtype",
        "fp32",
        "--json",
    ]
    print("$ " + " ".join(cmd[1:]))
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"netbench plan failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)["rows"][0]


def compare(label: str, shapes: dict, args: argparse.Namespace, folder: Path) -> float:
    path = folder / f"{label}.json"
    path.write_text(json.dumps({"shapes": shapes}))
    n = sum(torch.Size(d).numel() for d in shapes.values())
    print(
        f"\n== {label}: {len(shapes)} tensors, {n:,} params, topk {args.topk}, chunk {args.chunk}, "
        f"{args.world} gloo processes"
    )
    row = run_plan(path, args)
    ref = run_reference(shapes, args)
    predicted, measured = row["payload_bytes_per_step"], ref["bytes_per_step"]
    ratio = predicted / measured
    odd = {k: v for k, v in ref["chunks"].items() if k % args.chunk}
    print(
        f"reference DeMoReplicator: {measured:,.0f} B/step handed to all_gather per rank "
        f"({ref['calls_per_step']:.0f} calls; its own log says {ref['logged_tx_per_step']:,.0f})"
    )
    print(
        f"netbench plan:            {predicted:,.0f} B/step payload per node "
        f"({row['exchanges'][0]['calls']} call(s)); wire tx {row['wire_bytes_per_step']['tx']:,.0f} B"
    )
    print(f"ratio plan/reference:     {ratio:.4f}")
    if odd:
        print(f"DeMo chunk per dimension not divisible by {args.chunk}: {odd} (largest divisor <= chunk)")
    return ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="gpt2-small:blocks=2", help="shapes preset of the main case")
    ap.add_argument(
        "--world", type=int, default=2, help="gloo processes of the reference (>= 2; this host has 2 cores)"
    )
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--topk", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument(
        "--edge-case",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compare on dimensions the chunk does not divide (informational)",
    )
    args = ap.parse_args()
    if args.world < 2:
        # DeMoReplicator skips compression and communication entirely at world size 1
        raise SystemExit("--world: the reference only communicates with 2 or more processes")
    shapes = {s.name: list(s.shape) for s in resolve_shapes(args.shapes)}
    with tempfile.TemporaryDirectory() as tmp:
        ratio = compare(args.shapes.replace(":", "_"), shapes, args, Path(tmp))
        ok = abs(ratio - 1) <= args.tolerance
        print(f"\nmain case within {args.tolerance:.0%}: {'yes' if ok else 'NO'}")
        if args.edge_case:
            edge = compare("non_divisible_dims", EDGE_SHAPES, args, Path(tmp))
            print(
                f"\nnon-divisible dims: plan/reference {edge:.3f} -- DeMo's divisor chunking vs netbench's edge chunks"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
