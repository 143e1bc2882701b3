#!/usr/bin/env python3
"""Encode + decode throughput of netbench's codecs on a CUDA GPU, against DeToNATION's DeMoReplicator.

For each shape list (default: gpt2-medium and llama-1b, ~1.2 B parameters; any ``--shapes`` spec or
shapes JSON file) this times full replicator steps of one process on the GPU -- fold the gradient
into the momentum, top-k, pack, the (local, world-size-1) all-gather, decode, SGD -- for netbench's
``dct`` (one bucket) and, if installed, the reference DeMoReplicator on the same GPU and shapes
(world-size-1 NCCL group), synchronising the device around every step. Prints medians, parameters
per second and the ratio, and writes a calibration profile whose ``compression_s_per_param`` holds
the GPU's cost, so `netbench plan --calibration FILE` plans with accelerator codec costs::

    python3 scripts/bench_codec_gpu.py --out reports/gpu/calibration-h100.json
    netbench plan --calibration reports/gpu/calibration-h100.json ...

The reference: ``pip install --no-deps detonation==0.5.2 && pip install mltiming einops``.
Exits with a message (code 1) where no CUDA device is present: tests stay CPU-only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _params(shapes, device):
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s.shape, generator=gen, device=device) * 0.02) for s in shapes]
    grads = [torch.randn(*s.shape, generator=gen, device=device) * 1e-3 for s in shapes]
    return params, grads


def _time_steps(step, iters: int, warmup: int) -> list[float]:
    import torch

    times = []
    for i in range(warmup + iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def bench_netbench(shapes, args) -> float:
    from netbench.replicators import ReplicatorConfig, build_replicator

    params, grads = _params(shapes, "cuda")
    rep = build_replicator(params, ReplicatorConfig(name="dct", topk=args.topk, chunk=args.chunk))

    def step() -> None:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        rep.step()

    return statistics.median(_time_steps(step, args.iters, args.warmup))


def bench_reference(shapes, args) -> float | None:
    import torch
    import torch.distributed as dist

    try:
        from detonation.repl.demo_replicator import DeMoReplicator
    except ImportError:
        print("  reference: detonation not installed, skipped", file=sys.stderr)
        return None
    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=300))
    params, grads = _params(shapes, "cuda")
    optim = torch.optim.SGD(params, lr=1e-3)
    ref = DeMoReplicator(compression_decay=0.999, compression_topk=args.topk, compression_chunk=args.chunk)
    ref.init(optim, replication_parallel_group=dist.group.WORLD)
    group = optim.param_groups[0]

    def step() -> None:
        ref.pre_step()
        for p, g in zip(params, grads):
            p.grad = ref.replicate(g.clone(), p, optim.state[p], group)
        optim.step()
        ref.post_step()

    return statistics.median(_time_steps(step, args.iters, args.warmup))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["gpt2-medium", "llama-1b"])
    parser.add_argument("--topk", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("reports/gpu/calibration-gpu.json"),
                        help="calibration profile to write (compression_s_per_param from the largest shape list)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("bench_codec_gpu: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with an "
              "NVIDIA GPU and a CUDA build of torch", file=sys.stderr)
        return 1
    from netbench.model.calibration import Calibration, save_calibration
    from netbench.shapes import resolve_shapes, total_params

    device_name = torch.cuda.get_device_name()
    rows = []
    for spec in args.shapes:
        shapes = resolve_shapes(spec)
        n = total_params(shapes)
        ours = bench_netbench(shapes, args)
        torch.cuda.empty_cache()
        ref = None if args.no_reference else bench_reference(shapes, args)
        torch.cuda.empty_cache()
        row = {"shapes": spec, "params": n, "netbench_dct_step_s": ours, "reference_demo_step_s": ref,
               "netbench_params_per_s": n / ours, "ratio": (ours / ref) if ref else None}
        rows.append(row)
        if not args.json:
            ref_text = f"reference DeMo {ref:.4f} s, ratio {ours / ref:.3f}" if ref else "reference skipped"
            print(f"{spec} ({n / 1e6:.1f} M params) on {device_name}: netbench dct {ours:.4f} s "
                  f"({n / ours / 1e9:.2f} G params/s), {ref_text}", flush=True)
    largest = max(rows, key=lambda r: r["params"])
    calibration = Calibration(
        source="measured", created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=f"{socket.gethostname()} {device_name}", torch_version=torch.__version__,
        compression_s_per_param={"dct": largest["netbench_dct_step_s"] / largest["params"]},
        notes={"compression_s_per_param.dct": f"scripts/bench_codec_gpu.py on {device_name}: median dct step (encode, "
               f"top-k, decode, SGD) of {largest['shapes']}, topk {args.topk}, chunk {args.chunk}, one process",
               "software_overhead_s": "not measured here: keep this host's `netbench calibrate` values for the network terms"},
    )
    path = save_calibration(calibration, args.out)
    if args.json:
        print(json.dumps({"device": device_name, "rows": rows, "calibration": str(path)}))
    else:
        print(f"calibration profile: {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
