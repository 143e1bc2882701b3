"""Measure this host's model constants with two local gloo processes on 127.0.0.1.

* software overhead per message: many tiny all_reduce (2 ring hops each at N=2) and all_gather
  (1 hop) calls; loopback has no link delay, so a hop's time is software;
* loopback bandwidth (reference only; loopback is not an emulated link): large all_reduce calls;
* encode and decode cost for each scheme, separately: the replicator's own ``StepStats``
  (``compress_s`` and ``decode_s``; the collectives' wait is excluded by the replicator) on random
  gradients, the median of a few steps (mean over whole sync periods for periodic schemes). Timed on two
  shape sets -- a few large matrices (``shapes``) and many small tensors (``tensor_shapes``) -- and
  solved for a cost per parameter and a cost per tensor; optionally a third, large set (``large_shapes``,
  beyond the last-level cache) gives the cost per parameter of large models (the per-tensor cost
  taken as solved). A replicator whose declaration says it does not encode (dense state sent as
  it is) has no encode/decode to time (its local step is the workload's ``apply`` time, measured by every run).

The two processes are spawned (fresh interpreters, each importing torch), or, given ``fork``, forked by a sweep's
worker fork server (:mod:`netbench.orchestrator.forkserver`), whose torch is imported once for the calibration and
every point after it. The caller's own process imports no torch either way.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import REGISTRY, declared_payload, names, spec
from netbench.model.calibration import Calibration, cost_key
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.shapes import ParamShape, resolve_shapes, total_params

__all__ = ["MeasureOptions", "measure", "quick_options", "time_calls", "QUICK_SHAPES", "TENSOR_SHAPES"]

WORLD = 2
BATCH = 25
# first-use calibration: representative large matrices (2.2 M parameters), 57 small tensors (70 k parameters),
# and a model whose codec buffers stream from memory (7.1 M parameters, ~140 MB of codec buffers per rank)
QUICK_SHAPES = "llama:d_model=384,layers=1,ffn=1024,vocab=512"
TENSOR_SHAPES = "llama:d_model=32,layers=6,ffn=64,vocab=64"
LARGE_SHAPES = "gpt2-small:blocks=1"
# (module:function, JSON arguments, log) -> a started process whose wait() gives its exit code
Forker = Callable[[str, list[Any], Path], Any]


class MeasureOptions(BaseModel):
    """What ``netbench calibrate`` measures and how long it tries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iters: int = Field(400, ge=BATCH, le=100_000, description="tiny collectives timed per kind")
    bandwidth_mib: float = Field(16.0, gt=0, description="buffer of the loopback bandwidth all_reduce")
    shapes: str = Field("gpt2-small:blocks=2", description="shapes preset for the compression timing (per parameter)")
    tensor_shapes: str | None = Field(
        TENSOR_SHAPES, description="many small tensors, for the cost per tensor (None: not measured)"
    )
    large_shapes: str | None = Field(
        None,
        description="a larger model than ``shapes``, for the cost per parameter of models "
        "beyond the cache (None: one cost per parameter at every size)",
    )
    schemes: tuple[str, ...] = Field(default_factory=names, description="schemes whose compression cost to time")
    steps: int = Field(3, ge=1, le=1000, description="timed steps (whole sync periods for periodic schemes)")
    settings: SchemeSettings = SchemeSettings()
    configs: tuple[ReplicatorConfig, ...] = Field(
        (),
        description="replicator settings to time besides ``schemes`` at ``settings`` "
        "(a run's non-default settings); stored under their cost keys",
    )
    acks_per_segment: float = Field(0.5, ge=0.0, le=1.0, description="stored as given: loopback cannot measure it")
    timeout_s: float = Field(
        600.0, gt=0, description="the longest a collective, and the whole measurement, may take (seconds)"
    )


def time_calls(fns: dict[str, Callable[[], object]], iters: int, batch: int = BATCH) -> dict[str, float]:
    """The fastest batch's mean seconds per call, for each of ``fns``.

    Batches of the different calls alternate, so a burst of load from other processes on this
    host lands on all of them alike; the least disturbed batch is the host's own cost (a median
    still moved 3x on a busy host: all_gather 154 us idle, 538 us with other work running).
    """
    per_call: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, iters // batch)):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            per_call[name].append((time.perf_counter() - start) / batch)
    return {name: min(times) for name, times in per_call.items()}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collective_times(opts: MeasureOptions) -> dict[str, float]:
    import torch  # late: keeps torch off this module's import
    import torch.distributed as dist  # late: keeps torch off this module's import

    # what the replicators call (netbench/replicators/comm.py); the deprecated name adds ~0.5 ms of wrapper per call
    gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    tiny = torch.zeros(1)
    gathered = torch.zeros(WORLD)
    for _ in range(BATCH):
        dist.all_reduce(tiny)
        gather_single(gathered, tiny)
    dist.barrier()
    small = time_calls({"ar": lambda: dist.all_reduce(tiny), "ag": lambda: gather_single(gathered, tiny)}, opts.iters)
    big = torch.zeros(int(opts.bandwidth_mib * 2**20) // 4)
    dist.all_reduce(big)
    dist.barrier()
    t_big = time_calls({"big": lambda: dist.all_reduce(big)}, 5, batch=1)["big"]
    return {
        "all_reduce_tiny_s": small["ar"],
        "all_gather_tiny_s": small["ag"],
        "all_reduce_big_s": t_big,
        "big_bytes": float(big.numel() * 4),
    }


def _replicator_seconds(config: ReplicatorConfig, shapes: Sequence[ParamShape], steps: int) -> tuple[float, float]:
    """(encode, decode) seconds per step of the replicator ``config`` names, with its settings, on ``shapes``, from its
    own StepStats.
    """
    import torch  # late: keeps torch off this module's import
    import torch.distributed as dist  # late: keeps torch off this module's import

    from netbench.replicators.build import build_replicator  # late: a measuring process loads only what it measures

    declared = spec(config.name)
    # The codec's own cost, in one collective (model/overlap.py pipelines it), with the settings that key it: the
    # others at their defaults, so a key is measured alike whatever else a run set (Streaming DiLoCo's fragments
    # need a model with as many layers, which the calibration's shapes need not have).
    config = ReplicatorConfig(
        name=config.name,
        **{field: getattr(config, field) for field in declared.cost_settings},
        **declared.calibrated_with,
        bucket_mb=0.0,
    )
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s.shape) * 0.02) for s in shapes]
    grads = [torch.randn(s.shape) * 1e-3 for s in shapes]
    replicator = build_replicator(params, config, group=dist.group.WORLD, names=[s.name for s in shapes])
    period = declared.period(config)

    def one() -> tuple[float, float]:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        stats = replicator.step()
        return stats.compress_s, stats.decode_s

    # warm-up: allocations, transform bases, and the steps of every phase that ends (1-bit Adam's dense steps): the
    # model prices the phase that lasts, so its codec is what the calibration times
    parts = declared_payload(list(shapes), config, replicator.comm.world_size).parts()
    for _ in range(1 + max(p.steps[1] for p in parts)):
        one()
    timed = [one() for _ in range(steps * period)]
    if period > 1:  # only some steps encode: the mean over whole periods is the per-step cost
        return sum(t[0] for t in timed) / len(timed), sum(t[1] for t in timed) / len(timed)
    # the median step, as a run's summary takes its steps: this VM's cores change speed from second to second, and the
    # fastest of 5 steps sat 4-6 % below their median (gpt2-small:blocks=2, a top-k codec), which every run then missed
    return statistics.median(t[0] for t in timed), statistics.median(t[1] for t in timed)


def _fit(big: tuple[float, int, float], small: tuple[float, int, float] | None) -> tuple[float, float]:
    """(seconds per parameter, seconds per tensor) from (params, tensors, seconds) on two shape sets.

    Solves t = a * params + b * tensors; with one set (or a fit that makes either negative) the
    whole time is per parameter.
    """
    p1, t1, s1 = big
    if small is None:
        return s1 / p1, 0.0
    p2, t2, s2 = small
    det = p1 * t2 - p2 * t1
    if det != 0:
        a, b = (s1 * t2 - s2 * t1) / det, (p1 * s2 - p2 * s1) / det
        if a >= 0 and b >= 0:
            return a, b
    return s1 / p1, 0.0


def _sizes(opts: MeasureOptions) -> tuple[int, int]:
    """(params of ``shapes``, params of ``large_shapes``): where the two per-parameter costs were measured ((0, 0): one
    cost).
    """
    if not opts.large_shapes:
        return 0, 0
    mid, large = total_params(resolve_shapes(opts.shapes)), total_params(resolve_shapes(opts.large_shapes))
    return (mid, large) if large > mid else (0, 0)


COST_TABLES = (
    "encode_param",
    "decode_param",
    "encode_tensor",
    "decode_tensor",
    "encode_param_large",
    "decode_param_large",
)


def _compression(opts: MeasureOptions) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    sets = [resolve_shapes(opts.shapes)] + ([resolve_shapes(opts.tensor_shapes)] if opts.tensor_shapes else [])
    large = resolve_shapes(opts.large_shapes) if _sizes(opts)[1] else None
    costs: dict[str, dict[str, float]] = {k: {} for k in COST_TABLES}
    notes: dict[str, str] = {}
    configs = [build_scheme(name, opts.settings).config for name in opts.schemes if name in REGISTRY] + list(
        opts.configs
    )
    for config in configs:
        key = cost_key(config)
        if not spec(config.name).encodes_with(config):
            for table in costs.values():
                table[key] = 0.0
            notes[f"compression.{key}"] = "dense all-reduces: no encode/decode"
            continue
        try:
            timed = [(total_params(s), len(s), _replicator_seconds(config, s, opts.steps)) for s in sets]
            big_timed = (
                (total_params(large), len(large), _replicator_seconds(config, large, opts.steps)) if large else None
            )
        except ImportError as exc:
            notes[f"compression.{key}"] = f"skipped: replicator not available ({exc})"
            continue
        for i, part in enumerate(("encode", "decode")):
            big = (timed[0][0], timed[0][1], timed[0][2][i])
            small = (timed[1][0], timed[1][1], timed[1][2][i]) if len(timed) > 1 else None
            per_param, per_tensor = _fit(big, small)
            costs[f"{part}_param"][key], costs[f"{part}_tensor"][key] = per_param, per_tensor
            if big_timed is not None:
                p3, t3, sec3 = big_timed
                costs[f"{part}_param_large"][key] = max(0.0, sec3[i] - per_tensor * t3) / p3
        notes[f"compression.{key}"] = (
            "; ".join(
                f"encode {sec[0] * 1e3:.3g} ms + decode {sec[1] * 1e3:.3g} ms per step on {p:,} params in {t} tensors"
                for p, t, sec in timed + ([big_timed] if big_timed else [])
            )
            + f" (median of {opts.steps} step(s))"
        )
    return costs, notes


def _measure_rank(rank: int, port: int, opts: MeasureOptions, report: Callable[[Any], None]) -> None:
    """One of the two measuring processes: join the group, time; rank 0 hands (times, costs, notes) to ``report``."""
    import torch  # late: keeps torch off this module's import
    import torch.distributed as dist  # late: keeps torch off this module's import

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecation notices, once per rank
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=opts.timeout_s),
    )
    try:
        times = _collective_times(opts)
        costs, notes = _compression(opts) if opts.schemes or opts.configs else ({k: {} for k in COST_TABLES}, {})
        if rank == 0:
            report((times, costs, notes))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _worker(rank: int, port: int, opts: MeasureOptions, queue: Any) -> None:
    _measure_rank(rank, port, opts, queue.put)


def forked_worker(rank: int, port: int, options: dict[str, Any], result: str) -> None:
    """A measuring process forked by the worker fork server: ``options`` as JSON, rank 0's figures into ``result``."""
    opts = MeasureOptions.model_validate(options)
    _measure_rank(rank, port, opts, lambda found: Path(result).write_text(json.dumps(found)))


def quick_options() -> MeasureOptions:
    """What a first ``run``/``sweep``/``plan`` measures: every replicator at its defaults, in a few seconds."""
    return MeasureOptions(
        iters=200,
        bandwidth_mib=8.0,
        shapes=QUICK_SHAPES,
        tensor_shapes=TENSOR_SHAPES,
        large_shapes=LARGE_SHAPES,
        steps=5,
    )


def _spawned(opts: MeasureOptions) -> tuple[Any, Any, Any]:
    """(times, costs, notes) from two spawned processes."""
    import torch.multiprocessing as mp  # late: keeps torch off this module's import

    from netbench.child import spawning_safely  # late: a measuring process loads only what it measures

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with spawning_safely():  # the spawned children must not import what a user planted where netbench was started
        procs = mp.start_processes(
            _worker, args=(_free_port(), opts, queue), nprocs=WORLD, join=False, start_method="spawn"
        )
    deadline = time.monotonic() + opts.timeout_s
    while not procs.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            for proc in procs.processes:
                proc.kill()
                proc.join()
            raise RuntimeError(_overran(opts))
    return queue.get()


def _overran(opts: MeasureOptions) -> str:
    return f"the measuring processes ran past {opts.timeout_s:g} s and were stopped"


def _forked(opts: MeasureOptions, fork: Forker) -> tuple[Any, Any, Any]:
    """(times, costs, notes) from two processes ``fork`` starts, their files in a folder of this call's own."""
    with tempfile.TemporaryDirectory(prefix="netbench-calibrate-") as tmp:
        result, port = Path(tmp) / "result.json", _free_port()
        logs = [Path(tmp) / f"rank{rank}.log" for rank in range(WORLD)]
        procs = []
        for rank, log in enumerate(logs):
            log.touch(exist_ok=False)
            args = [rank, port, opts.model_dump(mode="json"), str(result)]
            procs.append(fork("netbench.calibrate.measure:forked_worker", args, log))
        deadline = time.monotonic() + opts.timeout_s
        try:
            codes = [proc.wait(timeout=max(0.0, deadline - time.monotonic())) for proc in procs]
        except subprocess.TimeoutExpired:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise RuntimeError(_overran(opts)) from None
        if any(codes) or not result.exists():
            said = [line for log in logs for line in log.read_text(errors="replace").splitlines() if line.strip()]
            raise RuntimeError(f"the measuring processes failed (exit {codes}): {said[-1] if said else 'no output'}")
        return tuple(json.loads(result.read_text()))


def measure(opts: MeasureOptions, fork: Forker | None = None) -> Calibration:
    """Run the measurements in two processes (spawned, or started by ``fork``) and turn them into a
    :class:`Calibration`."""
    from netbench.calibrate.host import host_key  # late: a measuring process loads only what it measures
    from netbench.calibrate.kernel import kernel_hz  # late: with the host's key, what only the parent reads

    times, costs, notes = _forked(opts, fork) if fork is not None else _spawned(opts)
    hops_ar, hops_ag = 2 * (WORLD - 1), WORLD - 1
    hz, hz_note = kernel_hz()
    over_ar = times["all_reduce_tiny_s"] / hops_ar
    over_ag = times["all_gather_tiny_s"] / hops_ag
    transfer = max(times["all_reduce_big_s"] - hops_ar * over_ar, 1e-9)
    sent = 2 * (WORLD - 1) / WORLD * times["big_bytes"]
    notes = {
        "software_overhead_s": f"tiny all_reduce {times['all_reduce_tiny_s'] * 1e6:.1f}us / {hops_ar} hops, "
        f"{WORLD} gloo processes on 127.0.0.1",
        "software_overhead_by_collective.all_gather": f"tiny all_gather {times['all_gather_tiny_s'] * 1e6:.1f}us / "
        f"{hops_ag} hop",
        "loopback_bandwidth_bps": f"all_reduce of {times['big_bytes'] / 2**20:g} MiB in "
        f"{times['all_reduce_big_s'] * 1e3:.2f}ms",
        "acks_per_segment": "not measurable on loopback; as configured",
        "kernel_hz": hz_note,
        **notes,
    }
    return Calibration(
        source="measured",
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        host=platform.node(),
        torch_version=version("torch"),
        host_key=host_key(),
        software_overhead_s=over_ar,
        software_overhead_by_collective={"all_reduce": over_ar, "all_gather": over_ag},
        loopback_bandwidth_bps=8.0 * sent / transfer,
        compression_s_per_param={k: costs["encode_param"][k] + costs["decode_param"][k] for k in costs["encode_param"]},
        encode_s_per_param=costs["encode_param"],
        decode_s_per_param=costs["decode_param"],
        encode_s_per_tensor=costs["encode_tensor"],
        decode_s_per_tensor=costs["decode_tensor"],
        encode_s_per_param_large=costs["encode_param_large"],
        decode_s_per_param_large=costs["decode_param_large"],
        params_at=_sizes(opts)[0],
        large_params=_sizes(opts)[1],
        acks_per_segment=opts.acks_per_segment,
        kernel_hz=hz,
        notes=notes,
    )
