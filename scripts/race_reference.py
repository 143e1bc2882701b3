#!/usr/bin/env python3
"""Race netbench's `dct` against the published DeToNATION DeMoReplicator over an emulated link.

Both run in ONE emulated cluster (same namespaces, same tbf + delay line), one after the other, on
the same parameter shapes, with one torch thread per process and no stand-in compute, so the step
time is replication alone: encode, top-k, momentum bookkeeping, all-gathers over the shaped link,
decode, optimizer step. Prints the median step time of each, their ratio, and the bytes each
hands to the collectives per step.

Needs root and the reference: ``pip install --no-deps detonation==0.5.2 && pip install mltiming einops``.

    python3 scripts/race_reference.py                      # 100mbit, 20 ms, gpt2-small:blocks=2, topk 32, chunk 64
    python3 scripts/race_reference.py --bw 1gbit --delay 5ms --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PORT = 29600


def _worker(args: argparse.Namespace) -> None:
    """One rank: build fake parameters of the shapes, run steps, print per-step times as JSON."""
    import torch
    import torch.distributed as dist

    from netbench.shapes import resolve_shapes

    torch.set_num_threads(args.threads)
    os.environ["GLOO_SOCKET_IFNAME"] = "eth0"
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}:{PORT}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=300),
    )
    shapes = resolve_shapes(args.shapes)
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s.shape, generator=gen) * 0.02) for s in shapes]
    codec: list[float] = []  # netbench: encode + decode wall seconds per step
    parts: list[dict] = []  # netbench: where each step's time went
    gen.manual_seed(1 + args.rank)
    base = [torch.randn(*s.shape, generator=gen) * 1e-3 for s in shapes]  # per-rank gradients, made once
    if args.worker == "netbench":
        from netbench.declarations.config import ReplicatorConfig
        from netbench.replicators.build import build_replicator

        repl = build_replicator(
            params, ReplicatorConfig(name="dct", topk=args.topk, chunk=args.chunk, bucket_mb=float(args.bucket_mb))
        )

        def prepare() -> None:  # a fresh copy of the gradients (the replicator writes its update into p.grad)
            for p, g in zip(params, base):
                p.grad = g.clone()

        def step() -> int:
            stats = repl.step()
            codec.append(stats.compress_s + stats.decode_s)
            parts.append(
                {
                    "compress_s": stats.compress_s,
                    "wait_s": stats.comm_s,
                    "decode_s": stats.decode_s,
                    "apply_s": stats.apply_s,
                }
            )
            return stats.payload_bytes
    else:
        from detonation.repl.demo_replicator import DeMoReplicator

        optim = torch.optim.SGD(params, lr=1e-3)
        ref = DeMoReplicator(compression_decay=0.999, compression_topk=args.topk, compression_chunk=args.chunk)
        ref.init(optim, replication_parallel_group=dist.group.WORLD)
        group = optim.param_groups[0]
        handed = {"bytes": 0}
        real = dist.all_gather

        def counting(tensor_list, tensor, *a, **kw):
            handed["bytes"] += tensor.numel() * tensor.element_size()
            return real(tensor_list, tensor, *a, **kw)

        dist.all_gather = counting

        def prepare() -> None:  # the reference reads g and returns a new tensor: nothing to copy
            pass

        def step() -> int:
            handed["bytes"] = 0
            ref.pre_step()
            for p, g in zip(params, base):
                p.grad = ref.replicate(g, p, optim.state[p], group)
            optim.step()
            ref.post_step()
            return handed["bytes"]

    times, sent = [], []
    dist.barrier()
    for _ in range(args.warmup + args.steps):
        prepare()  # stands for backward: not timed, for either replicator
        t0 = time.perf_counter()
        sent.append(step())
        times.append(time.perf_counter() - t0)
    dist.barrier()
    print(
        json.dumps(
            {
                "times": times[args.warmup :],
                "payload_bytes": sent[args.warmup :],
                "codec_s": codec[args.warmup :],
                "parts": parts[args.warmup :],
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()


def _bucket_mb(args: argparse.Namespace, spec) -> float:
    """``--bucket-mb``: a number, or auto (from the link and the dct payload, as `netbench run` picks it)."""
    if args.bucket_mb != "auto":
        return float(args.bucket_mb)
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload
    from netbench.model.overlap import auto_bucket_mb
    from netbench.shapes import resolve_shapes

    payload = declared_payload(
        resolve_shapes(args.shapes), ReplicatorConfig(name="dct", topk=args.topk, chunk=args.chunk), args.nodes
    ).bytes_per_step
    return auto_bucket_mb(min(spec.up.rate_bps, spec.down.rate_bps), spec.expected_rtt_s(), payload, nodes=args.nodes)


def _modelled_comm_s(args: argparse.Namespace, spec) -> float:
    """The model's communication time of one unpipelined dct step on this link (default calibration)."""
    from netbench.calibrate.hostcache import load_calibration
    from netbench.declarations.config import ReplicatorConfig
    from netbench.model.network import GraphModel
    from netbench.model.schemes import scheme_from_config
    from netbench.orchestrator.prediction import scenario_for
    from netbench.shapes import resolve_shapes

    calibration = load_calibration()
    scheme = scheme_from_config(ReplicatorConfig(name="dct", topk=args.topk, chunk=args.chunk))
    scenario = scenario_for(spec, 0.0, calibration)
    graph = GraphModel(spec.topology, spec.placement)
    return graph.step(scheme, resolve_shapes(args.shapes), scenario, calibration).comm_time_s


def _race(args: argparse.Namespace) -> dict:
    from netbench.cli.cluster_options import cluster_spec
    from netbench.emulation.cluster import Cluster

    spec = cluster_spec({"nodes": args.nodes, "bw": args.bw, "delay": args.delay})
    args.bucket_mb = _bucket_mb(args, spec)
    results: dict = {
        "bw": args.bw,
        "delay": args.delay,
        "nodes": args.nodes,
        "shapes": args.shapes,
        "topk": args.topk,
        "chunk": args.chunk,
    }
    with Cluster(spec) as cluster:
        results["delay_engine"] = cluster.engine
        for impl in ("netbench",) if args.skip_reference else ("netbench", "reference"):
            procs = [
                node.popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        impl,
                        "--rank",
                        str(node.index),
                        "--world",
                        str(args.nodes),
                        "--master",
                        cluster.nodes[0].address,
                        "--shapes",
                        args.shapes,
                        "--topk",
                        str(args.topk),
                        "--chunk",
                        str(args.chunk),
                        "--steps",
                        str(args.steps),
                        "--warmup",
                        str(args.warmup),
                        "--bucket-mb",
                        str(args.bucket_mb),
                        "--threads",
                        str(args.threads),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={"OMP_NUM_THREADS": str(args.threads)},
                )
                for node in cluster.nodes
            ]
            outs = [p.communicate(timeout=1800) for p in procs]
            for p, (_, err) in zip(procs, outs):
                if p.returncode != 0:
                    raise SystemExit(f"{impl} worker failed: {err.strip()[-800:]}")
            ranks = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
            slowest = [max(per_rank) for per_rank in zip(*(r["times"] for r in ranks))]
            results[impl] = {
                "median_step_s": statistics.median(slowest),
                "step_s": slowest,
                "payload_bytes_per_step": statistics.median(ranks[0]["payload_bytes"]),
            }
            if ranks[0].get("codec_s"):
                results[impl]["codec_s"] = statistics.median(max(c) for c in zip(*(r["codec_s"] for r in ranks)))
                results[impl]["parts_s"] = {
                    k: statistics.median(p[k] for r in ranks for p in r["parts"]) for k in ranks[0]["parts"][0]
                }
    results["bucket_mb"] = args.bucket_mb
    results["modelled_comm_s"] = _modelled_comm_s(args, spec)
    nb = results["netbench"]
    results["overlap_limit_s"] = max(nb.get("codec_s", 0.0), results["modelled_comm_s"])
    if "reference" in results:
        results["step_time_ratio"] = results["netbench"]["median_step_s"] / results["reference"]["median_step_s"]
        results["payload_ratio"] = (
            results["netbench"]["payload_bytes_per_step"] / results["reference"]["payload_bytes_per_step"]
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", default="100mbit")
    parser.add_argument("--delay", default="20ms")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--shapes", default="gpt2-small:blocks=2")
    parser.add_argument("--topk", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--bucket-mb",
        default="auto",
        help="netbench dct: MB per pipelined bucket, 0 = unpipelined, auto = from the link",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank (both replicators)")
    parser.add_argument("--skip-reference", action="store_true", help="run netbench's side only (for tuning)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", choices=["netbench", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    results = _race(args)
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"{args.nodes} nodes, {args.bw}, one-way delay {args.delay} ({results['delay_engine']}), "
        f"{args.shapes}, topk {args.topk}, chunk {args.chunk}"
    )
    for impl in ("netbench", "reference")[: 1 if args.skip_reference else 2]:
        r = results[impl]
        print(
            f"  {impl:9s}: median step {r['median_step_s']:.3f} s, {r['payload_bytes_per_step']:,.0f} B/step "
            "handed to collectives"
        )
    if not args.skip_reference:
        print(
            f"  ratio netbench/reference: step time {results['step_time_ratio']:.3f}, bytes "
            f"{results['payload_ratio']:.3f}"
        )
    nb = results["netbench"]
    print(
        f"  netbench bucket_mb {results['bucket_mb']:g}: encode+decode {nb.get('codec_s', float('nan')):.3f} "
        "s, modelled comm "
        f"{results['modelled_comm_s']:.3f} s; step / max(encode+decode, comm) = "
        f"{nb['median_step_s'] / results['overlap_limit_s']:.3f}"
    )
    if "parts_s" in nb:
        print("  netbench step parts (medians): " + ", ".join(f"{k} {v:.3f} s" for k, v in nb["parts_s"].items()))


if __name__ == "__main__":
    main()
