"""The replicator contract: what a step reports, what it declares, and the shared step skeleton.

A replicator turns every rank's local gradients into one synchronised optimizer step. The
interface is deliberately tiny (``step()``, with the payload formula of its declaration) because the
workers, the orchestrator and the analytic model all code against it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from netbench import pacing, steps
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.spec import PayloadDecl
from netbench.dtypes import torch_dtypes
from netbench.replicators.comm import GroupComm
from netbench.replicators.optim import Stepper, build_optimizer
from netbench.shapes import ParamShape
from netbench.trace import spans

__all__ = [
    "PayloadDecl",
    "StepStats",
    "Hooked",
    "Replicator",
    "StepTimer",
    "WIRE_DTYPES",
    "param_shapes",
    "device_sync",
]

WIRE_DTYPES: dict[str, torch.dtype] = torch_dtypes("fp32", "bf16")


@dataclass
class StepStats:
    """Where one step's wall time went, and what it put on the wire.

    The ``*_cpu_s`` fields are the calling thread's CPU time in the same phases: on a shared
    machine wall time includes waiting for a core, CPU time does not.
    """

    compress_s: float
    comm_s: float
    decode_s: float
    apply_s: float
    payload_bytes: int
    collectives: int
    compress_cpu_s: float = 0.0
    decode_cpu_s: float = 0.0
    # a replicator whose replicas differ after a sync (gossip): a fixed random projection of its parameters after
    # the sync, on their device (the worker reads it back with the step's record); empty on other steps
    sketch: torch.Tensor | tuple[()] = ()


@dataclass
class Hooked:
    """Codec work a step did inside backward's hooks (:mod:`netbench.replicators.backward`): wall and thread-CPU seconds
    of encode and decode.

    Under time dilation the worker paces backward as a whole (a real model's compute), hooks included, so the codec's
    share of that paced time is k x its CPU time (:meth:`paced`).
    """

    encode_s: float = 0.0
    decode_s: float = 0.0
    encode_cpu_s: float = 0.0
    decode_cpu_s: float = 0.0

    def paced(self) -> tuple[float, float]:
        """(encode, decode) seconds as the paced step spent them: each at least k x its CPU time."""
        k = pacing.factor()
        return max(self.encode_s, k * self.encode_cpu_s), max(self.decode_s, k * self.decode_cpu_s)


class StepTimer:
    """Splits a step into phases so every replicator reports alike.

    Call one phase method at the end of each phase; each books the wall and thread-CPU time
    since the previous call. ``skip()`` ends a phase that is timed elsewhere (the collective,
    timed by :class:`GroupComm`). ``sync`` (tensors on an accelerator) waits for the work queued
    so far before each reading: kernels run asynchronously, and without it a phase's time would
    land in whichever later phase first waits for the device.
    """

    def __init__(self, sync: Callable[[], object] | None = None) -> None:
        self.compress_s = self.decode_s = self.apply_s = 0.0
        self.compress_cpu_s = self.decode_cpu_s = 0.0
        self._sync = sync
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()

    def _lap(self, cpu_phase: bool = False, span: str = "") -> tuple[float, float]:
        """Wall and CPU time since the last lap; a CPU phase is first paced to time dilation's k (netbench.pacing).
        ``span`` names the lap on the run's timeline (:mod:`netbench.trace.spans`)."""
        if self._sync is not None:
            self._sync()
        wall, cpu = time.perf_counter(), time.thread_time()
        if cpu_phase and pacing.pace(wall - self._wall, cpu - self._cpu):
            wall = time.perf_counter()
        elapsed = (wall - self._wall, cpu - self._cpu)
        if span:
            spans.add(span, self._wall, wall)
        self._wall, self._cpu = wall, cpu
        return elapsed

    def skip(self) -> None:
        self._lap()

    def compress(self) -> None:
        wall, cpu = self._lap(cpu_phase=True, span="encode")
        self.compress_s += wall
        self.compress_cpu_s += cpu

    def decode(self) -> None:
        wall, cpu = self._lap(cpu_phase=True, span="decode")
        self.decode_s += wall
        self.decode_cpu_s += cpu

    def apply(self) -> None:
        self.apply_s += self._lap(cpu_phase=True, span="apply")[0]

    def book_hooked(self, hooked: Hooked) -> None:
        """Add codec work that ran inside backward's hooks: its paced seconds and its CPU time, so the
        codec-speed check sees all of it (before, it saw 0.43x the calibrated CPU time of such steps)."""
        encode_s, decode_s = hooked.paced()
        self.compress_s += encode_s
        self.decode_s += decode_s
        self.compress_cpu_s += hooked.encode_cpu_s
        self.decode_cpu_s += hooked.decode_cpu_s

    def stats(self, comm: GroupComm) -> StepStats:
        comm_s, payload, collectives = comm.take()
        return StepStats(
            self.compress_s,
            comm_s,
            self.decode_s,
            self.apply_s,
            payload,
            collectives,
            self.compress_cpu_s,
            self.decode_cpu_s,
        )


def device_sync(device: torch.device) -> Callable[[], object] | None:
    """What makes phase times true on ``device``: wait for its current stream (CUDA), else nothing.

    Only the compute stream: a collective in flight on NCCL's own stream keeps overlapping.
    """
    if device.type == "cuda":
        return lambda: torch.cuda.current_stream(device).synchronize()
    return None


def param_shapes(params: Sequence[torch.Tensor], names: Sequence[str] | None = None) -> list[ParamShape]:
    """Shapes of live parameters, in order, as the payload formulas consume them.

    ``names`` are the parameters' module names (a workload's ``param_shapes()``); without them
    parameters are called ``p0, p1, ...``, and name-based rules (embeddings kept element-wise) see none.
    """
    if names is not None and len(names) != len(params):
        raise ValueError(f"{len(names)} names for {len(params)} parameters")
    return [ParamShape(names[i] if names is not None else f"p{i}", tuple(p.shape)) for i, p in enumerate(params)]


class Replicator(ABC):
    """One full optimizer step per call: read ``p.grad``, synchronise, apply the base optimizer.

    Subclasses implement :meth:`_sync` (everything up to and including writing the synchronised
    update into ``p.grad``); their wire formula is their declaration's (:mod:`netbench.declarations.spec`).
    The base owns the group, the byte accounting and the optimizer so timings mean the same for every replicator.
    """

    name: ClassVar[str]
    default_optimizer: ClassVar[Literal["sgd", "adamw"]] = "sgd"
    default_lr: ClassVar[float] = 1e-3

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        config: ReplicatorConfig,
        group=None,
        names: Sequence[str] | None = None,
    ) -> None:
        if config.name != self.name:
            raise ValueError(f"{type(self).__name__} needs config.name={self.name!r}, got {config.name!r}")
        self.params: list[torch.nn.Parameter] = list(params)
        if not self.params:
            raise ValueError("a replicator needs at least one parameter")
        if any(p.dtype != torch.float32 for p in self.params):
            # Momenta, transforms and wire casts are fp32 throughout; the wire dtype is a setting.
            raise ValueError("replicators expect fp32 parameters (set grad_dtype/value_dtype for bf16 on the wire)")
        self.config = config
        self.shapes = param_shapes(self.params, names)  # what payload() sees for these parameters
        self.comm = GroupComm(group)
        self.steps_done = 0
        self.optimizer = self._build_optimizer()
        self._setup(config)

    def _setup(self, config: ReplicatorConfig) -> None:  # noqa: B027 - a codec without state of its own has none
        """The codec's own state for these parameters and settings (layouts, buffers, its collectives' lanes).

        Every codec shares the constructor above; it calls this last, once the group, the shapes and the base
        optimizer are set, so a codec declares what it adds and nothing it repeats.
        """

    def _build_optimizer(self) -> Stepper:
        """The base optimizer (the config's, or the replicator's default); a codec with an optimizer of its own
        overrides this."""
        return build_optimizer(self.params, self.config, self.default_optimizer, self.default_lr)

    @classmethod
    def payload(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
        """Bytes this node hands to collectives per communicating step: its declaration's formula (pure)."""
        from netbench.declarations.registry import spec  # late: the registry is read when a replicator is built

        return spec(cls.name).payload(shapes, config, world_size)

    @abstractmethod
    def _sync(self, timer: StepTimer) -> None:
        """Synchronise the gradients and leave the update to apply in every ``p.grad``.

        Implementations call ``timer.compress()`` after encoding, ``timer.skip()`` after the
        collective (timed by :class:`GroupComm`) and ``timer.decode()`` after decoding.
        """

    def step(self) -> StepStats:
        """Synchronise and apply one optimizer step; returns where the time and bytes went."""
        self.steps_done += 1
        timer = StepTimer(device_sync(self.params[0].device))
        with torch.no_grad():
            precondition = getattr(
                self.optimizer, "precondition", None
            )  # DecoupledAdamW: local moments, before the sync
            if precondition is not None:
                precondition(self.grads())
            self._sync(timer)
            timer.skip()
            self.optimizer.step()
            timer.apply()
            self._after_apply(timer)
        stats = timer.stats(self.comm)
        steps.observe(self, stats)  # inside `netbench exec`, the user's `with netbench.step()` records it
        return stats

    def _after_apply(self, timer: StepTimer) -> None:  # noqa: B027 - an optional hook, empty by default
        """Hook for work that must follow the base optimizer (DiLoCo's outer step)."""

    def grads(self) -> list[torch.Tensor]:
        """Each parameter's gradient, contiguous (replicators write updates into it in place);
        a missing one counts as zeros so every rank sends alike."""
        return [self.grad(i) for i in range(len(self.params))]

    def grad(self, index: int) -> torch.Tensor:
        """Parameter ``index``'s gradient as :meth:`grads` gives it (touching no other parameter)."""
        p = self.params[index]
        if p.grad is None:
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        return p.grad
