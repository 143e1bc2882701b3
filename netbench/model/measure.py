"""Measure this host's model constants with two local gloo processes on 127.0.0.1.

* software overhead per message: many tiny all_reduce (2 ring hops each at N=2) and all_gather
  (1 hop) calls; loopback has no link delay, so a hop's time is software;
* loopback bandwidth (reference only; loopback is not an emulated link): large all_reduce calls;
* compression cost per parameter for each scheme: the replicator's own ``StepStats`` encode +
  decode time (``compress_s + decode_s``; the collectives' wait is excluded by the replicator) on
  random gradients of a shapes preset, averaged over whole sync periods. ``mtdao`` sends dense
  tensors: no encode/decode (its local QH-Adam step is the workload's ``apply`` time, measured
  by every run).
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import time
import warnings
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from pydantic import BaseModel, ConfigDict, Field

from netbench.model.calibration import Calibration
from netbench.model.schemes import SCHEME_NAMES, SchemeSettings, build_scheme
from netbench.replicators.config import REPLICATOR_NAMES
from netbench.shapes import ParamShape, resolve_shapes, total_params

__all__ = ["MeasureOptions", "measure", "time_calls"]

WORLD = 2
BATCH = 25
# what the replicators call (netbench/replicators/comm.py); the deprecated name adds ~0.5 ms of wrapper per call
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class MeasureOptions(BaseModel):
    """What ``netbench calibrate`` measures and how long it tries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iters: int = Field(400, ge=BATCH, le=100_000, description="tiny collectives timed per kind")
    bandwidth_mib: float = Field(16.0, gt=0, description="buffer of the loopback bandwidth all_reduce")
    shapes: str = Field("gpt2-small:blocks=2", description="shapes preset for the compression timing")
    schemes: tuple[str, ...] = Field(SCHEME_NAMES, description="schemes whose compression cost to time")
    steps: int = Field(3, ge=1, le=1000, description="timed steps (whole sync periods for periodic schemes)")
    settings: SchemeSettings = SchemeSettings()
    acks_per_segment: float = Field(0.5, ge=0.0, le=1.0, description="stored as given: loopback cannot measure it")
    timeout_s: float = Field(600.0, gt=0)


def time_calls(fns: dict[str, Callable[[], object]], iters: int, batch: int = BATCH) -> dict[str, float]:
    """Median over batches of the mean seconds per call, for each of ``fns``.

    Batches of the different calls alternate, so a burst of load from other processes on this
    host lands on all of them alike rather than on whichever ran at that moment.
    """
    per_call: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, iters // batch)):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            per_call[name].append((time.perf_counter() - start) / batch)
    return {name: statistics.median(times) for name, times in per_call.items()}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collective_times(opts: MeasureOptions) -> dict[str, float]:
    tiny = torch.zeros(1)
    gathered = torch.zeros(WORLD)
    for _ in range(BATCH):
        dist.all_reduce(tiny)
        _all_gather_single(gathered, tiny)
    dist.barrier()
    small = time_calls({"ar": lambda: dist.all_reduce(tiny), "ag": lambda: _all_gather_single(gathered, tiny)}, opts.iters)
    big = torch.zeros(int(opts.bandwidth_mib * 2**20) // 4)
    dist.all_reduce(big)
    dist.barrier()
    t_big = time_calls({"big": lambda: dist.all_reduce(big)}, 5, batch=1)["big"]
    return {"all_reduce_tiny_s": small["ar"], "all_gather_tiny_s": small["ag"], "all_reduce_big_s": t_big, "big_bytes": float(big.numel() * 4)}


def _replicator_seconds(name: str, shapes: Sequence[ParamShape], settings: SchemeSettings, steps: int) -> float:
    """Encode + decode seconds per step of replicator ``name``, from its own StepStats."""
    from netbench.replicators import build_replicator  # the replicators' factory

    config = build_scheme(name, settings).config
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s.shape) * 0.02) for s in shapes]
    grads = [torch.randn(s.shape) * 1e-3 for s in shapes]
    replicator = build_replicator(params, config, group=dist.group.WORLD, names=[s.name for s in shapes])
    period = config.sync_every if name == "diloco" else 1

    def one() -> float:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        stats = replicator.step()
        return stats.compress_s + stats.decode_s

    one()  # warm-up: allocations, DCT bases
    timed = [one() for _ in range(steps * period)]
    return sum(timed) / len(timed)


def _compression(opts: MeasureOptions) -> tuple[dict[str, float], dict[str, str]]:
    shapes = resolve_shapes(opts.shapes)
    n = total_params(shapes)
    costs: dict[str, float] = {}
    notes: dict[str, str] = {}
    for name in opts.schemes:
        if name == "mtdao":
            costs[name] = 0.0
            notes[f"compression.{name}"] = "dense all-reduces: no encode/decode"
            continue
        if name not in REPLICATOR_NAMES:
            continue
        try:
            seconds = _replicator_seconds(name, shapes, opts.settings, opts.steps)
        except ImportError as exc:
            notes[f"compression.{name}"] = f"skipped: replicator not available ({exc})"
            continue
        costs[name] = seconds / n
        notes[f"compression.{name}"] = f"{seconds:.4g}s per step on {opts.shapes} ({n} params), mean of {opts.steps} step(s)"
    return costs, notes


def _worker(rank: int, port: int, opts: MeasureOptions, queue: Any) -> None:
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecation notices, once per rank
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=opts.timeout_s))
    try:
        times = _collective_times(opts)
        costs, notes = _compression(opts) if opts.schemes else ({}, {})
        if rank == 0:
            queue.put((times, costs, notes))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def measure(opts: MeasureOptions) -> Calibration:
    """Run the measurements in two spawned processes and turn them into a :class:`Calibration`."""
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_worker, args=(_free_port(), opts, queue), nprocs=WORLD, join=True, start_method="spawn")
    times, costs, notes = queue.get()
    hops_ar, hops_ag = 2 * (WORLD - 1), WORLD - 1
    over_ar = times["all_reduce_tiny_s"] / hops_ar
    over_ag = times["all_gather_tiny_s"] / hops_ag
    transfer = max(times["all_reduce_big_s"] - hops_ar * over_ar, 1e-9)
    sent = 2 * (WORLD - 1) / WORLD * times["big_bytes"]
    notes = {
        "software_overhead_s": f"tiny all_reduce {times['all_reduce_tiny_s'] * 1e6:.1f}us / {hops_ar} hops, {WORLD} gloo processes on 127.0.0.1",
        "software_overhead_by_collective.all_gather": f"tiny all_gather {times['all_gather_tiny_s'] * 1e6:.1f}us / {hops_ag} hop",
        "loopback_bandwidth_bps": f"all_reduce of {times['big_bytes'] / 2**20:g} MiB in {times['all_reduce_big_s'] * 1e3:.2f}ms",
        "acks_per_segment": "not measurable on loopback; as configured",
        **notes,
    }
    return Calibration(
        source="measured",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host=platform.node(),
        torch_version=torch.__version__,
        software_overhead_s=over_ar,
        software_overhead_by_collective={"all_reduce": over_ar, "all_gather": over_ag},
        loopback_bandwidth_bps=8.0 * sent / transfer,
        compression_s_per_param=costs,
        acks_per_segment=opts.acks_per_segment,
        notes=notes,
    )
