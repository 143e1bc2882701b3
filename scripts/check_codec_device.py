#!/usr/bin/env python3
"""Check on a CUDA GPU that every replicator steps there with no host sync, and agrees with the CPU.

CI has no GPU (``tests/test_replicators_device.py`` covers what a data-less ``meta`` device can);
this is the check to run where one exists::

    python3 scripts/check_codec_device.py

1. the on-device random draw gives the CPU's bits (``hashed_offsets``);
2. every replicator, one bucket and pipelined, steps under ``torch.cuda.set_sync_debug_mode("error")``
   (the phase timer's own wait switched off): any ``.item()``, read-back or blocking copy raises;
3. the same parameters and gradients on CPU and GPU end close (random draws other positions on a GPU);
4. on a gloo group CUDA tensors are staged through host buffers at the collective, on NCCL they are not.

Prints one line per check and exits 1 if any failed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.declarations.registry import names  # noqa: E402
from netbench.replicators.build import build_replicator  # noqa: E402
from netbench.replicators.random_subset import hashed_offsets  # noqa: E402

SHAPES = [(130, 70), (64,), (3, 5, 7), (), (200, 64), (256, 512)]
EVERY_STEP = dict(sync_every=1, params_every=1, m1_every=1, m2_every=1)
# Settings beyond the defaults that take another codec path: quantized outer exchanges, fragments that overlap.
VARIANTS: list[tuple[str, dict]] = [
    ("diloco", dict(quant_bits=8)),
    ("mtdao", dict(quant_bits=4, quant_block=64)),
    ("streaming", dict(sync_every=4, fragments=2, fragment_sync_delay=1, quant_bits=4, fragment_update_alpha=0.5)),
    ("sparseloco", dict(quant_bits=2, quant_block=64)),
]
failures: list[str] = []


def report(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def build(name: str, device: str, group=None, **cfg):
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.02).to(device)) for s in SHAPES]
    grads = [[(torch.randn(s, generator=gen) * 1e-3).to(device) for s in SHAPES] for _ in range(3)]
    rep = build_replicator(
        params,
        ReplicatorConfig(name=name, **{**EVERY_STEP, **cfg}),
        group=group,
        names=[f"layer{i}.weight" for i in range(len(SHAPES))],
    )
    return params, grads, rep


def steps(params, grads, rep) -> None:
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        rep.step()


def main() -> int:
    if not torch.cuda.is_available():
        print("check_codec_device: no CUDA device here", file=sys.stderr)
        return 1
    print(f"check_codec_device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)

    widths = torch.randint(1, 2**40, (100_000,), generator=torch.Generator().manual_seed(1))
    for seed, step in ((0, 0), (7, 123), (2**40, 2**33)):
        same = torch.equal(hashed_offsets(widths, seed, step), hashed_offsets(widths.cuda(), seed, step).cpu())
        report(same, f"hashed_offsets seed {seed} step {step}: CUDA bits == CPU bits")

    runs = [(name, {"bucket_mb": b}) for name in names() for b in (0.0, 0.01)] + VARIANTS
    for name, cfg in runs:
        what = f"{name} {cfg}: 3 steps on CUDA with sync debug mode 'error'"
        try:
            params, grads, rep = build(name, "cuda", **cfg)
            steps(params, grads[:1], rep)  # first step: lazy allocations (AdamW state) are not the codec
            with mock.patch("netbench.replicators.base.device_sync", lambda device: None):
                torch.cuda.set_sync_debug_mode("error")
                try:
                    steps(params, grads, rep)
                finally:
                    torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            ok = all(p.device.type == "cuda" and p.grad.device.type == "cuda" for p in params)
            report(ok and all(torch.isfinite(p).all() for p in params), what)
        except Exception as exc:  # noqa: BLE001 -- report every replicator
            torch.cuda.set_sync_debug_mode("default")
            report(False, f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")

    for name, cfg in [(name, {}) for name in names()] + VARIANTS:
        cpu = build(name, "cpu", **cfg)
        gpu = build(name, "cuda", **cfg)
        steps(*cpu)
        steps(*gpu)
        diff = max((a.detach() - b.detach().cpu()).abs().max().item() for a, b in zip(cpu[0], gpu[0]))
        scale = max(a.detach().abs().max().item() for a in cpu[0])
        differ = sum((a.detach() != b.detach().cpu()).sum().item() for a, b in zip(cpu[0], gpu[0]))
        total = sum(a.numel() for a in cpu[0])
        note = " (random: other positions on a GPU, by design)" if name == "random" else ""
        ok = name == "random" or diff <= 1e-3 * scale
        report(
            ok,
            f"{name} {cfg}: CPU vs CUDA after 3 steps: max |diff| {diff:.3g} (params up to {scale:.3g}), "
            f"{differ}/{total} elements differ{note}",
        )

    with tempfile.TemporaryDirectory() as tmp:
        for backend, staged in (("gloo", True), ("nccl", False)):
            dist.init_process_group(
                backend,
                store=dist.FileStore(f"{tmp}/{backend}", 1),
                rank=0,
                world_size=1,
                device_id=torch.device("cuda", 0) if backend == "nccl" else None,
            )
            try:
                for name, bucket_mb in (("dct", 0.0), ("dct", 0.01), ("random", 0.01), ("full", 0.0)):
                    ref = build(name, "cuda", bucket_mb=bucket_mb)
                    steps(*ref)
                    params, grads, rep = build(name, "cuda", group=dist.group.WORLD, bucket_mb=bucket_mb)
                    steps(params, grads, rep)
                    same = all(torch.equal(a, b) for a, b in zip(ref[0], params))
                    report(
                        same and bool(rep.comm._host) == staged,
                        f"{backend} world 1, {name} bucket_mb {bucket_mb}: same result as without a group, "
                        f"host staging buffers: {len(rep.comm._host)} (expected {'some' if staged else 'none'})",
                    )
            finally:
                dist.destroy_process_group()

    print(f"check_codec_device: {len(failures)} failed" if failures else "check_codec_device: all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
