#!/usr/bin/env python3
"""Benchmark netbench's `dct` replicator against DeToNATION's DeMoReplicator, side by side.

Both run in the SAME two gloo processes on 127.0.0.1 (one torch thread each), on random tensors
with the benchmark shapes, alternating step by step so background load hits both alike. Per step
and rank it records the compress + decompress CPU work (encode, top-k, momentum subtraction,
decode of what all ranks sent; the collective's wait excluded), as the calling thread's CPU time
(the headline: unaffected by other processes competing for the cores) and as wall time, and the
bytes handed to the collectives; then prints medians, ratios against the targets, and netbench's
encode and decode throughput in parameters per second of CPU (inputs of the analytic model).

    python3 scripts/bench_replicators.py                 # gpt2-small:blocks=2, topk 32, chunk 64, 2 ranks
    python3 scripts/bench_replicators.py --steps 10 --json

The reference is optional (``pip install --no-deps detonation==0.5.2 && pip install mltiming einops``);
without it only netbench's figures are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from dist_harness import run_ranks  # noqa: E402

TARGET_TIME_RATIO = 0.5
TARGET_BYTES_FP32 = 0.75
TARGET_BYTES_BF16 = 0.5


class _TimedDist:
    """Stands in for ``torch.distributed`` inside the reference module: times and counts its
    all-gathers (run synchronously, so their wait can be taken out of the compute time)."""

    class _Done:
        def wait(self) -> None:
            return None

    def __init__(self, real) -> None:
        self._real = real
        self.seconds = self.cpu_seconds = 0.0
        self.bytes = 0
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._real, name)

    def all_gather(self, outputs, tensor, group=None, async_op=False):
        started, started_cpu = time.perf_counter(), time.thread_time()
        self._real.all_gather(outputs, tensor, group=group)
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += time.thread_time() - started_cpu
        self.bytes += tensor.numel() * tensor.element_size()
        self.calls += 1
        return self._Done()

    def take(self) -> tuple[float, float, int, int]:
        out = (self.seconds, self.cpu_seconds, self.bytes, self.calls)
        self.seconds = self.cpu_seconds = 0.0
        self.bytes = self.calls = 0
        return out


class _ReferenceDriver:
    """Drives DeMoReplicator exactly as DeToNATION's optimizer mixin does, minus sign and SGD."""

    def __init__(self, params, topk: int, chunk: int, beta: float, lr: float) -> None:
        import torch.distributed as dist
        from detonation.repl import demo_replicator

        self.params = params
        self.param_groups = [{"params": params, "lr": lr}]
        self.state = defaultdict(dict)
        self.timed = _TimedDist(dist)
        demo_replicator.dist = self.timed  # the module's only handle on torch.distributed
        self.replicator = demo_replicator.DeMoReplicator(
            compression_decay=beta, compression_topk=topk, compression_chunk=chunk
        )
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its chunk table
            self.replicator.init(self, replication_parallel_group=dist.group.WORLD)

    def step(self, grads) -> dict:
        group = self.param_groups[0]
        started, started_cpu = time.perf_counter(), time.thread_time()
        self.replicator.pre_step()
        for p, g in zip(self.params, grads):
            p.grad = self.replicator.replicate(
                sharded_grad=g, param=p, param_state_dict=self.state[p], param_group=group
            )
        self.replicator.post_step()
        wall, cpu = time.perf_counter() - started, time.thread_time() - started_cpu
        comm_s, comm_cpu_s, nbytes, calls = self.timed.take()
        return {
            "cpu_s": cpu - comm_cpu_s,
            "wall_s": wall - comm_s,
            "comm_s": comm_s,
            "bytes": nbytes,
            "collectives": calls,
            "reported_bytes": self.replicator.data_transmitted[-1],
        }


def _rank_body(rank: int, world: int, opts: dict) -> dict:
    """One rank: both replicators on the same fake parameters and per-rank gradients."""
    import torch

    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload
    from netbench.replicators.base import param_shapes
    from netbench.replicators.build import build_replicator
    from netbench.shapes import resolve_shapes

    shapes = resolve_shapes(opts["shapes"])
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s.shape, generator=gen) * 0.02) for s in shapes]
    gen.manual_seed(1 + rank)
    grads = [torch.randn(s.shape, generator=gen) * 1e-3 for s in shapes]

    def config(value_dtype: str) -> ReplicatorConfig:
        return ReplicatorConfig(name="dct", topk=opts["topk"], chunk=opts["chunk"], value_dtype=value_dtype)

    ours = build_replicator(params, config("fp32"))
    reference = None
    if opts["reference"]:
        ref_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
        reference = _ReferenceDriver(ref_params, opts["topk"], opts["chunk"], ours.config.momentum_decay, lr=1e-3)

    def load_grads() -> None:  # the replicator overwrites p.grad with the update; restore it
        for p, g in zip(params, grads):
            p.grad = g.clone() if p.grad is None else p.grad.copy_(g)

    out = {"ours": [], "reference": [], "bf16": []}
    for step in range(opts["warmup"] + opts["steps"]):
        load_grads()
        stats = ours.step()
        record = {
            "encode_s": stats.compress_cpu_s,
            "decode_s": stats.decode_cpu_s,
            "wall_s": stats.compress_s + stats.decode_s,
            "comm_s": stats.comm_s,
            "bytes": stats.payload_bytes,
            "collectives": stats.collectives,
        }
        ref_record = reference.step(grads) if reference else None
        if step >= opts["warmup"]:
            out["ours"].append(record)
            if ref_record:
                out["reference"].append(ref_record)

    # bf16 values: bytes from real steps (and their timing, for information).
    del ours
    ours_bf16 = build_replicator(params, config("bf16"))
    for _ in range(2):
        load_grads()
        stats = ours_bf16.step()
        out["bf16"].append(
            {"encode_s": stats.compress_cpu_s, "decode_s": stats.decode_cpu_s, "bytes": stats.payload_bytes}
        )
    out["declared"] = {
        v: declared_payload(param_shapes(params), config(v), world).bytes_per_step for v in ("fp32", "bf16")
    }
    out["params"] = sum(p.numel() for p in params)
    return out


def _median(ranks: list[dict], series: str, key) -> float:
    values = [key(r) for rank in ranks for r in rank[series]]
    return statistics.median(values)


def summarise(ranks: list[dict], opts: dict) -> dict:
    """Medians over every (rank, measured step), ratios and targets."""
    params = ranks[0]["params"]
    ours_cpu = _median(ranks, "ours", lambda r: r["encode_s"] + r["decode_s"])
    encode = _median(ranks, "ours", lambda r: r["encode_s"])
    decode = _median(ranks, "ours", lambda r: r["decode_s"])
    result = {
        "shapes": opts["shapes"],
        "params": params,
        "world_size": opts["world"],
        "topk": opts["topk"],
        "chunk": opts["chunk"],
        "steps": opts["steps"],
        "threads_per_rank": 1,
        "ours": {
            "cpu_s_per_step": ours_cpu,
            "encode_s": encode,
            "decode_s": decode,
            "wall_s_per_step": _median(ranks, "ours", lambda r: r["wall_s"]),
            "comm_s": _median(ranks, "ours", lambda r: r["comm_s"]),
            "encode_params_per_s": params / encode,
            "decode_params_per_s": params / decode,
            "bytes_per_step_fp32": ranks[0]["ours"][0]["bytes"],
            "bytes_per_step_bf16": ranks[0]["bf16"][0]["bytes"],
            "collectives_per_step": ranks[0]["ours"][0]["collectives"],
            "declared_equals_measured": all(
                r["bytes"] == rank["declared"]["fp32"] for rank in ranks for r in rank["ours"]
            )
            and all(r["bytes"] == rank["declared"]["bf16"] for rank in ranks for r in rank["bf16"]),
        },
    }
    if ranks[0]["reference"]:
        ref_cpu = _median(ranks, "reference", lambda r: r["cpu_s"])
        ref_bytes = ranks[0]["reference"][0]["bytes"]
        result["reference"] = {
            "name": "detonation 0.5.2 DeMoReplicator",
            "cpu_s_per_step": ref_cpu,
            "wall_s_per_step": _median(ranks, "reference", lambda r: r["wall_s"]),
            "comm_s": _median(ranks, "reference", lambda r: r["comm_s"]),
            "bytes_per_step": ref_bytes,
            "bytes_reported_by_reference": ranks[0]["reference"][0]["reported_bytes"],
            "collectives_per_step": ranks[0]["reference"][0]["collectives"],
        }
        o = result["ours"]
        result["ratios"] = {
            "cpu": ours_cpu / ref_cpu,
            "wall": result["ours"]["wall_s_per_step"] / result["reference"]["wall_s_per_step"],
            "bytes_fp32": o["bytes_per_step_fp32"] / ref_bytes,
            "bytes_bf16": o["bytes_per_step_bf16"] / ref_bytes,
        }
        result["targets"] = {
            "cpu": TARGET_TIME_RATIO,
            "bytes_fp32": TARGET_BYTES_FP32,
            "bytes_bf16": TARGET_BYTES_BF16,
        }
        result["meets_targets"] = all(result["ratios"][k] <= v for k, v in result["targets"].items())
        # The headline time ratio is CPU time; the wall ratio is reported alongside.
    return result


def render(result: dict) -> str:
    o = result["ours"]
    lines = [
        f"replicator benchmark: {result['shapes']} ({result['params']:,} params), {result['world_size']} ranks "
        "on gloo 127.0.0.1, "
        f"1 thread/rank, topk {result['topk']}, chunk {result['chunk']}, median of {result['steps']} steps x "
        f"{result['world_size']} ranks",
        "",
        "compress+decompress per step (encode, top-k, momentum subtraction, decode; collective wait excluded)",
        "                          thread CPU       wall",
        f"  netbench dct          {o['cpu_s_per_step'] * 1e3:8.1f} ms  {o['wall_s_per_step'] * 1e3:8.1f} ms"
        f"   (CPU: encode {o['encode_s'] * 1e3:.1f} ms, decode {o['decode_s'] * 1e3:.1f} ms)",
    ]
    ref = result.get("reference")
    if ref:
        r = result["ratios"]
        lines += [
            f"  reference DeMo        {ref['cpu_s_per_step'] * 1e3:8.1f} ms  {ref['wall_s_per_step'] * 1e3:8.1f} ms",
            f"  ratio netbench/ref    {r['cpu']:8.3f}     {r['wall']:8.3f}       (target <= {TARGET_TIME_RATIO})",
        ]
    lines += [
        "",
        "bytes per step handed to collectives (per rank)",
        f"  netbench dct fp32     {o['bytes_per_step_fp32']:>10,}   in {o['collectives_per_step']} all_gather",
        f"  netbench dct bf16     {o['bytes_per_step_bf16']:>10,}",
    ]
    if ref:
        lines += [
            f"  reference DeMo        {ref['bytes_per_step']:>10,}   in {ref['collectives_per_step']} all_gathers"
            f" (it reports {ref['bytes_reported_by_reference']:,})",
            f"  ratio fp32            {r['bytes_fp32']:9.3f}      (target <= {TARGET_BYTES_FP32})",
            f"  ratio bf16            {r['bytes_bf16']:9.3f}      (target <= {TARGET_BYTES_BF16})",
        ]
    lines += [
        f"  declared payload == measured: {o['declared_equals_measured']}",
        "",
        "netbench dct throughput (one thread)",
        f"  encode {o['encode_params_per_s'] / 1e6:8.1f} M params/s   decode (2 ranks' coefficients) "
        f"{o['decode_params_per_s'] / 1e6:8.1f} M params/s",
    ]
    if ref:
        lines += ["", f"targets met: {result['meets_targets']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="gpt2-small:blocks=2")
    parser.add_argument("--world", type=int, default=2, help="gloo processes on 127.0.0.1")
    parser.add_argument("--topk", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5, help="measured steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-reference", action="store_true", help="skip DeToNATION's DeMoReplicator")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    reference = not args.no_reference
    if reference:
        try:
            import detonation  # noqa: F401
        except ImportError:
            print(
                "bench_replicators: detonation not installed; netbench figures only "
                "(pip install --no-deps detonation==0.5.2 && pip install mltiming einops)",
                file=sys.stderr,
            )
            reference = False
    opts = dict(
        shapes=args.shapes,
        world=args.world,
        topk=args.topk,
        chunk=args.chunk,
        steps=args.steps,
        warmup=args.warmup,
        reference=reference,
    )
    ranks = run_ranks(_rank_body, args.world, opts, timeout=900)
    result = summarise(ranks, opts)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
