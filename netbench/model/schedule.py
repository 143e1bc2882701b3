"""A step as the accelerator runs it: forward and backward layer by layer, collectives on one network queue.

A replicator's step is a :class:`StepSchedule`: the compute stream's layers (forward in order, backward in
reverse), the codec work on that stream, and :class:`Transfer` records, each a collective released when a layer's
backward (or the whole backward) of some step of the period ends and needed before a layer's forward some steps
later. :func:`simulate` runs the schedule as events: the compute stream never waits for the network unless a
forward needs a result that has not arrived; collectives go through one queue in release order (NCCL's stream runs
one collective at a time), each taking its own time. This is how DDP's bucketed all-reduce hides behind backward
(a bucket leaves as soon as its layers' gradients exist and the next step's first layers need only the buckets
released last), how a periodic outer sync stalls only the step it ends, and where later schedules (fragments
synchronised on their own steps, results needed several steps later) plug in without touching the engine.

The simulation runs a period (or as many steps as the longest delay) to settle the queue, then measures the
next period: the result is the period's mean step time and the share of it spent on useful compute (forward and
backward; codec work is overhead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Transfer", "StepSchedule", "ScheduleResult", "simulate", "layer_split", "AFTER_BACKWARD"]

AFTER_BACKWARD = -1  # a transfer released when the whole backward (and its encode) has ended


@dataclass(frozen=True)
class Transfer:
    """One collective of the period.

    ``step``: the step of the period (0-based) whose backward releases it; ``layer``: the layer whose backward
    releases it (:data:`AFTER_BACKWARD`: after the whole backward and the step's encode); ``seconds``: its time
    alone on the network; ``needed_layer``: the layer whose forward waits for it, ``delay`` steps later (1: the
    next step); ``post_s``: compute-stream work once it has arrived (its decode), before that forward.
    """

    step: int
    layer: int
    seconds: float
    needed_layer: int
    delay: int = 1
    post_s: float = 0.0
    label: str = ""


@dataclass(frozen=True)
class StepSchedule:
    """A period of steps: per-layer forward and backward times, per-step encode work, and the collectives."""

    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    transfers: tuple[Transfer, ...] = ()
    period: int = 1
    encode_s: tuple[float, ...] = field(default=())  # per step of the period, after backward (empty: none)

    @property
    def layers(self) -> int:
        return len(self.forward_s)

    @property
    def compute_s(self) -> float:
        """Useful compute of one step."""
        return sum(self.forward_s) + sum(self.backward_s)


@dataclass(frozen=True)
class ScheduleResult:
    """The period's mean step, its useful compute and the share of time spent on it."""

    step_s: float
    compute_s: float
    stall_s: float
    overhead_s: float

    @property
    def utilization(self) -> float:
        return self.compute_s / self.step_s if self.step_s > 0 else 1.0


def layer_split(total: float, weights: Sequence[float]) -> list[float]:
    """``total`` split over layers in proportion to ``weights`` (their parameter counts)."""
    whole = float(sum(weights))
    if whole <= 0:
        return [total / len(weights)] * len(weights)
    return [total * w / whole for w in weights]


def simulate(schedule: StepSchedule, periods: int = 1) -> ScheduleResult:
    """Run enough periods to settle (a period, or as many as the longest delay spans), then ``periods`` more, and
    return the measured periods' mean step."""
    layers, period = schedule.layers, schedule.period
    warm = period * max(1, -(-max((t.delay for t in schedule.transfers), default=1) // period))
    by_release: dict[tuple[int, int], list[Transfer]] = {}
    for t in schedule.transfers:
        by_release.setdefault((t.step % period, t.layer), []).append(t)
    encode = schedule.encode_s or (0.0,) * period
    arrivals: dict[tuple[int, int], float] = {}  # (step, layer) -> when its inputs are all in
    post: dict[tuple[int, int], float] = {}  # (step, layer) -> decode work before that forward
    clock = net_free = 0.0
    start_measure = compute = stall = overhead = 0.0
    total_steps = warm + period * periods

    def release(key: tuple[int, int], step: int) -> None:
        nonlocal net_free
        for t in by_release.get(key, ()):
            begin = max(clock, net_free)
            net_free = begin + t.seconds
            need = (step + t.delay, t.needed_layer)
            arrivals[need] = max(arrivals.get(need, 0.0), net_free)
            post[need] = post.get(need, 0.0) + t.post_s

    releasing = {step for step, _ in by_release}
    step_compute = schedule.compute_s
    for step in range(total_steps):
        measuring = step >= warm
        if step == warm:
            start_measure = clock
        in_period = step % period
        if in_period not in releasing and not any(s == step for s, _ in arrivals):
            clock += step_compute + encode[in_period]  # nothing to wait for or to send: the layers in one go
            if measuring:
                compute += step_compute
                overhead += encode[in_period]
            continue
        for layer in range(layers):
            ready = arrivals.pop((step, layer), 0.0)
            if ready > clock:
                if measuring:
                    stall += ready - clock
                clock = ready
            extra = post.pop((step, layer), 0.0)
            clock += extra + schedule.forward_s[layer]
            if measuring:
                overhead += extra
                compute += schedule.forward_s[layer]
        for layer in reversed(range(layers)):
            clock += schedule.backward_s[layer]
            if measuring:
                compute += schedule.backward_s[layer]
            release((in_period, layer), step)
        clock += encode[in_period]
        if measuring:
            overhead += encode[in_period]
        release((in_period, AFTER_BACKWARD), step)
    # a measured step's stall is the one at its own start (what the step before released): in a steady period the
    # stall the last measured step causes equals the one the warm-up period caused the first measured step
    steps = period * periods
    return ScheduleResult((clock - start_measure) / steps, compute / steps, stall / steps, overhead / steps)
