#!/usr/bin/env python3
"""Encode + decode throughput of netbench's replicators on a GPU, against DeToNATION's DeMoReplicator.

For each shape list (default: gpt2-medium and llama-1b, ~1.6 B parameters together; any ``--shapes``
preset or shapes JSON file) this times full replicator steps of one process on the device -- fold
the gradient into the momentum, top-k, pack, the all-gather, decode, sign, SGD -- with the
replicator's own phase split (``StepStats.compress_s`` / ``decode_s``; the timer waits for the
device at each phase end, so the split is true on a GPU). The collective is a loopback of
``--world`` ranks inside the process: it hands every rank's slot the local message, so decode
averages ``world`` messages as on a real cluster while no network is timed. The reference
DeMoReplicator (detonation 0.5.2) runs on the same device and shapes through the same loopback
(it skips compression entirely at world size 1, hence world 2 by default).

Prints medians, parameters per second and netbench dct's ratio to the reference, and writes a
calibration profile: encode/decode seconds per parameter (from the largest shape list) and per
tensor (from ``--tensor-shapes``, many small tensors: a GPU pays a launch cost per tensor), solved
as ``netbench calibrate`` solves them, for every scheme timed; with ``--host-network`` (default)
the network constants are this host's, measured as ``netbench calibrate`` does::

    python3 scripts/bench_codec_gpu.py --out reports/gpu/calibration-h100.json
    netbench plan --calibration reports/gpu/calibration-h100.json ...
    python3 scripts/bench_codec_gpu.py --device cpu --shapes gpt2-small:blocks=2 --iters 2   # a dry run anywhere

The reference: ``pip install --no-deps detonation==0.5.2 && pip install mltiming einops``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from netbench.replicators.comm import GroupComm  # noqa: E402

PERIODIC = {"diloco": "sync_every"}  # encodes only every k-th step: timed over whole periods
DENSE = {"mtdao"}  # dense all-reduces of its states: no encode/decode (as `netbench calibrate` books it)


class LoopbackComm(GroupComm):
    """``world`` ranks that all sent the local message: gathers copy it into every slot, all-reduces keep it."""

    def __init__(self, world: int) -> None:
        super().__init__(None)
        self.world_size = world

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:  # the mean of identical messages
        self._account(tensor, time.perf_counter(), "all_reduce")
        return tensor

    def all_gather(self, tensor: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        if out is None:
            out = torch.empty((self.world_size, tensor.numel()), dtype=tensor.dtype, device=tensor.device)
        started = time.perf_counter()
        out.copy_(tensor.view(1, -1).expand(self.world_size, -1))
        self._account(tensor, started, "all_gather")
        return out

    def all_reduce_mean_async(self, tensor):
        self.all_reduce_mean(tensor)
        from netbench.replicators.comm import Pending

        return Pending(self, None, None)

    def all_gather_async(self, tensor, out):
        self.all_gather(tensor, out)
        from netbench.replicators.comm import Pending

        return Pending(self, None, None)


class _LoopbackDist:
    """Stands in for ``torch.distributed`` inside the reference module: the same loopback gather."""

    class _Done:
        def wait(self) -> None:
            return None

    def __init__(self, real) -> None:
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def all_gather(self, outputs, tensor, group=None, async_op=False):
        for out in outputs:
            out.copy_(tensor)
        return self._Done()


class _LoopbackGroup:
    def __init__(self, world: int) -> None:
        self.world = world

    def size(self) -> int:
        return self.world


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _tensors(shapes, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s.shape, generator=gen, device=device) * 0.02) for s in shapes]
    grads = [torch.randn(s.shape, generator=gen, device=device) * 1e-3 for s in shapes]
    return params, grads


def bench_scheme(name: str, shapes, args, device: torch.device) -> dict:
    """Median step, encode and decode seconds of replicator ``name`` (means over whole periods for periodic ones)."""
    from netbench.model.schemes import SchemeSettings, build_scheme
    from netbench.replicators.build import build_replicator

    if name in DENSE:
        return {"step_s": 0.0, "encode_s": 0.0, "decode_s": 0.0, "steps": 0, "period": 1, "note": "dense: not timed"}
    config = build_scheme(name, SchemeSettings(topk=args.topk, chunk=args.chunk)).config
    params, grads = _tensors(shapes, device)
    with mock.patch("netbench.replicators.base.GroupComm", lambda group=None: LoopbackComm(args.world)):
        rep = build_replicator(params, config, names=[s.name for s in shapes])
    phases = (
        contextlib.nullcontext()
        if args.phase_sync
        else mock.patch("netbench.replicators.base.device_sync", lambda d: None)
    )
    period = getattr(config, PERIODIC[name]) if name in PERIODIC else 1
    records = []
    for i in range(args.warmup + -(-args.iters // period) * period):
        for p, g in zip(params, grads):
            p.grad = g.clone() if p.grad is None else p.grad.copy_(g)  # the update overwrote it
        _sync(device)
        started = time.perf_counter()
        with phases:
            stats = rep.step()
        _sync(device)
        if i >= args.warmup:
            records.append((time.perf_counter() - started, stats.compress_s, stats.decode_s))
    del rep, params, grads
    pick = statistics.mean if period > 1 else statistics.median
    step, enc, dec = (pick(r[j] for r in records) for j in range(3))
    return {"step_s": step, "encode_s": enc, "decode_s": dec, "steps": len(records), "period": period}


def bench_reference(shapes, args, device: torch.device) -> dict | None:
    """Median seconds of the reference's replicate() over every parameter (compress, gather, decompress)."""
    try:
        from detonation.repl import demo_replicator
    except ImportError as exc:
        print(f"  reference: detonation not importable ({exc}), skipped", file=sys.stderr)
        return None
    demo_replicator.dist = _LoopbackDist(demo_replicator.dist)  # the module's only handle on torch.distributed
    params, grads = _tensors(shapes, device)

    class Optim:  # what init() reads: param_groups and per-parameter state
        param_groups = [{"params": params, "lr": 1e-3}]
        state = defaultdict(dict)

    ref = demo_replicator.DeMoReplicator(
        compression_decay=0.999, compression_topk=args.topk, compression_chunk=args.chunk
    )
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its chunk table
        ref.init(Optim, replication_parallel_group=_LoopbackGroup(args.world))
    group = Optim.param_groups[0]
    times = []
    for i in range(args.warmup + args.iters):
        _sync(device)
        started = time.perf_counter()
        ref.pre_step()
        for p, g in zip(params, grads):
            p.grad = ref.replicate(g, p, Optim.state[p], group)
        ref.post_step()
        _sync(device)
        if i >= args.warmup:
            times.append(time.perf_counter() - started)
    del ref, params, grads, Optim
    return {"step_s": statistics.median(times), "steps": len(times)}


def _free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def build_profile(rows: list[dict], small: dict | None, args, device_name: str):
    """The calibration profile: per-parameter and per-tensor encode/decode costs for every scheme timed."""
    from netbench.calibrate.measure import _fit
    from netbench.model.calibration import Calibration

    big = max(rows, key=lambda r: r["params"])
    costs = {k: {} for k in ("encode_s_per_param", "decode_s_per_param", "encode_s_per_tensor", "decode_s_per_tensor")}
    notes = {}
    for name, timed in big["schemes"].items():
        for part in ("encode", "decode"):
            b = (big["params"], big["tensors"], timed[f"{part}_s"])
            s = (small["params"], small["tensors"], small["schemes"][name][f"{part}_s"]) if small else None
            costs[f"{part}_s_per_param"][name], costs[f"{part}_s_per_tensor"][name] = _fit(b, s)
        if name in DENSE:
            notes[f"compression.{name}"] = "dense all-reduces: no encode/decode"
            continue
        sets = [big] + ([small] if small else [])
        period = timed.get("period", 1)
        how = (
            f"mean of {timed.get('steps')} steps (whole periods of {period})"
            if period > 1
            else f"median of {timed.get('steps')} steps"
        )
        notes[f"compression.{name}"] = (
            "; ".join(
                f"encode {r['schemes'][name]['encode_s'] * 1e3:.3g} ms + decode "
                f"{r['schemes'][name]['decode_s'] * 1e3:.3g} ms "
                f"per step on {r['params']:,} params in {r['tensors']} tensors ({r['spec']})"
                for r in sets
            )
            + f" on {device_name}, {how}, loopback world {args.world} (scripts/bench_codec_gpu.py)"
        )
    profile = Calibration(
        source="measured",
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        host=f"{platform.node()} {device_name}",
        torch_version=torch.__version__,
        compression_s_per_param={
            k: costs["encode_s_per_param"][k] + costs["decode_s_per_param"][k] for k in costs["encode_s_per_param"]
        },
        notes=notes,
        **costs,
    )
    if not args.host_network:
        return profile.model_copy(
            update={
                "notes": {
                    **notes,
                    "software_overhead_s": "not measured (--no-host-network): "
                    "defaults; merge a `netbench calibrate` file's network terms",
                }
            }
        )
    from netbench.calibrate.measure import MeasureOptions, measure

    try:  # this host's network constants, exactly as `netbench calibrate` measures them (no codecs)
        network = measure(MeasureOptions(iters=200, bandwidth_mib=8.0, schemes=()))
    except Exception as exc:  # noqa: BLE001 -- the codec figures stand on their own
        return profile.model_copy(update={"notes": {**notes, "software_overhead_s": f"not measured: {exc}"}})
    kept = {k: v for k, v in network.notes.items() if not k.startswith("compression.")}
    return network.model_copy(
        update={
            "host": profile.host,
            **{k: getattr(profile, k) for k in ("compression_s_per_param", *costs)},
            "notes": {**kept, **notes},
        }
    )


def _fmt_rate(params: int, seconds: float) -> str:
    return f"{params / seconds / 1e9:7.2f} G/s" if seconds > 0 else "      - "


def main() -> int:
    from netbench.calibrate.measure import TENSOR_SHAPES
    from netbench.declarations.registry import names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["gpt2-medium", "llama-1b"])
    parser.add_argument(
        "--tensor-shapes", default=TENSOR_SHAPES, help="many small tensors, for the cost per tensor ('' to skip)"
    )
    parser.add_argument("--schemes", default=",".join(names()), help="comma-separated replicators to time")
    parser.add_argument(
        "--world", type=int, default=2, help="ranks the loopback collective stands for (>= 2 for the reference)"
    )
    parser.add_argument("--topk", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument(
        "--phase-sync",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for the device at each phase end (true encode/decode split); off: whole steps only, "
        "to see what those waits cost",
    )
    parser.add_argument(
        "--host-network",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure this host's network constants into the profile too (two gloo processes, seconds)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("reports/gpu/calibration-gpu.json"), help="calibration profile to write"
    )
    parser.add_argument("--results", type=Path, default=None, help="also write every figure as JSON here")
    args = parser.parse_args()
    schemes = [s for s in args.schemes.split(",") if s]
    bad = [s for s in schemes if s not in names()]
    if bad or not schemes or args.world < 1 or args.iters < 1 or args.warmup < 0:
        print(
            f"bench_codec_gpu: bad arguments (schemes {bad or schemes}, world {args.world}, iters {args.iters})",
            file=sys.stderr,
        )
        return 2
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "bench_codec_gpu: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with an "
            "NVIDIA GPU and a CUDA build of torch, or pass --device cpu for a dry run",
            file=sys.stderr,
        )
        return 1
    from netbench.shapes import resolve_shapes, total_params

    device_name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({platform.processor() or platform.machine()})"
    )
    print(
        f"bench_codec_gpu: {device_name}, torch {torch.__version__}, topk {args.topk}, chunk {args.chunk}, "
        f"loopback world {args.world}, median of {args.iters} steps after {args.warmup} warm-up",
        flush=True,
    )
    specs = [(spec, True) for spec in args.shapes] + ([(args.tensor_shapes, False)] if args.tensor_shapes else [])
    rows, small = [], None
    w = max(len(spec) for spec, _ in specs)
    for spec, main_set in specs:
        shapes = resolve_shapes(spec)
        row = {"spec": spec, "params": total_params(shapes), "tensors": len(shapes), "schemes": {}, "reference": None}
        for name in schemes:
            row["schemes"][name] = bench_scheme(name, shapes, args, device)
            _free(device)
            t = row["schemes"][name]
            print(
                f"  {spec:<{w}} {name:<9} step {t['step_s'] * 1e3:9.2f} ms  encode {t['encode_s'] * 1e3:8.2f} ms  "
                f"decode {t['decode_s'] * 1e3:8.2f} ms",
                flush=True,
            )
        if main_set and "dct" in schemes and not args.no_reference and args.world >= 2:
            row["reference"] = bench_reference(shapes, args, device)
            _free(device)
            if row["reference"]:
                print(f"  {spec:<{w}} reference DeMo replicate {row['reference']['step_s'] * 1e3:9.2f} ms", flush=True)
        if main_set:
            rows.append(row)
        else:
            small = row
    if not rows:
        print("bench_codec_gpu: no shape list to time", file=sys.stderr)
        return 2

    print(f"\nencode + decode per step on {device_name} (medians; params/s = parameters / (encode + decode)):")
    print(
        f"  {'shapes':<{w}} {'params':>8} {'scheme':<9} {'enc+dec':>10} {'params/s':>11} {'full step':>10} "
        f"{'vs reference':>13}"
    )
    for row in rows + ([small] if small else []):
        ref = row["reference"]
        for name, t in row["schemes"].items():
            codec = t["encode_s"] + t["decode_s"]
            ratio = f"{codec / ref['step_s']:10.3f}x" if ref and name == "dct" else ""
            print(
                f"  {row['spec']:<{w}} {row['params'] / 1e6:7.1f}M {name:<9} {codec * 1e3:8.2f}ms "
                f"{_fmt_rate(row['params'], codec)} "
                f"{t['step_s'] * 1e3:8.2f}ms {ratio:>13}"
            )
        if ref:
            print(
                f"  {row['spec']:<{w}} {row['params'] / 1e6:7.1f}M {'ref DeMo':<9} {ref['step_s'] * 1e3:8.2f}ms "
                f"{_fmt_rate(row['params'], ref['step_s'])} {'':>10} {'1.000x':>13}"
            )
    print(
        "  (ratio: netbench dct encode+decode over the reference's replicate() of every parameter, both with the "
        f"loopback gather of {args.world} ranks)"
    )

    profile = build_profile(rows, small, args, device_name)
    from netbench.model.calibration import save_calibration

    path = save_calibration(profile, args.out)
    print(
        f"calibration profile: {path} (per parameter from {max(rows, key=lambda r: r['params'])['spec']}"
        + (f", per tensor from {small['spec']})" if small else ")")
    )
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(
            json.dumps(
                {
                    "device": device_name,
                    "torch": torch.__version__,
                    "world": args.world,
                    "topk": args.topk,
                    "chunk": args.chunk,
                    "iters": args.iters,
                    "rows": rows,
                    "tensor_row": small,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
