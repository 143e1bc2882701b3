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
backward; codec work is overhead). A search that asks for one schedule at many bandwidths compiles it once
(:func:`compile_schedule`) and runs it at each bandwidth's transfer seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Transfer",
    "StepSchedule",
    "ScheduleResult",
    "CompiledSchedule",
    "simulate",
    "compile_schedule",
    "layer_split",
    "AFTER_BACKWARD",
]

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
    return compile_schedule(schedule).run([t.seconds for t in schedule.transfers], periods)


@dataclass(frozen=True)
class CompiledSchedule:
    """A schedule's structure with its collectives' seconds left open: a search prices one schedule at many
    bandwidths, and only the seconds change between them (:meth:`run`).

    ``backward``: per step of the period, its layers' backward last to first, each with the transfers (indices
    into the schedule's) that its end releases; ``after``: per step, those released after the whole backward and
    the encode; ``releasing``: the steps of the period that release any."""

    forward_s: tuple[float, ...]
    backward: tuple[tuple[tuple[float, tuple[int, ...]], ...], ...]
    after: tuple[tuple[int, ...], ...]
    releasing: frozenset[int]
    delays: tuple[int, ...]
    needed: tuple[int, ...]
    post_s: tuple[float, ...]
    encode_s: tuple[float, ...]
    period: int
    warm: int
    compute_s: float

    def run(self, seconds: Sequence[float], periods: int = 1) -> ScheduleResult:
        """The schedule with transfer ``i`` taking ``seconds[i]`` on the network: the settling periods, then
        ``periods`` more; the measured periods' mean step."""
        forward, backward, after, encode = self.forward_s, self.backward, self.after, self.encode_s
        delays, needed, post_s, releasing = self.delays, self.needed, self.post_s, self.releasing
        layers, period, warm = len(forward), self.period, self.warm
        arrivals: dict[int, list[float]] = {}  # step -> when each layer's inputs are all in
        posts: dict[int, list[float]] = {}  # step -> decode work before each layer's forward
        clock = net_free = 0.0
        start_measure = compute = stall = overhead = 0.0
        step_compute = self.compute_s

        def release(released: tuple[int, ...], step: int) -> None:
            nonlocal net_free
            for i in released:  # one queue in release order, each collective once the one before it is done
                net_free = (clock if clock > net_free else net_free) + seconds[i]
                target, layer = step + delays[i], needed[i]
                ready = arrivals.get(target)
                if ready is None:
                    ready = arrivals[target] = [0.0] * layers
                if net_free > ready[layer]:
                    ready[layer] = net_free
                if post_s[i]:
                    work = posts.get(target)
                    if work is None:
                        work = posts[target] = [0.0] * layers
                    work[layer] += post_s[i]

        for step in range(warm + period * periods):
            measuring = step >= warm
            if step == warm:
                start_measure = clock
            in_period = step % period
            if measuring:
                compute += step_compute
                overhead += encode[in_period]
            if in_period not in releasing and step not in arrivals:
                clock += step_compute + encode[in_period]  # nothing to wait for or to send: the layers in one go
                continue
            ready = arrivals.pop(step, None)
            work = posts.pop(step, None)
            for layer, f in enumerate(forward):
                if ready is not None and ready[layer] > clock:
                    if measuring:
                        stall += ready[layer] - clock
                    clock = ready[layer]
                if work is not None:
                    clock += work[layer] + f
                    if measuring:
                        overhead += work[layer]
                else:
                    clock += f
            for b, released in backward[in_period]:
                clock += b
                if released:
                    release(released, step)
            clock += encode[in_period]
            release(after[in_period], step)
        # a measured step's stall is the one at its own start (what the step before released): in a steady period the
        # stall the last measured step causes equals the one the warm-up period caused the first measured step
        steps = period * periods
        return ScheduleResult((clock - start_measure) / steps, compute / steps, stall / steps, overhead / steps)


def compile_schedule(schedule: StepSchedule) -> CompiledSchedule:
    """``schedule``'s structure, to :meth:`~CompiledSchedule.run` at any transfer seconds."""
    layers, period = schedule.layers, schedule.period
    transfers = schedule.transfers
    by_release: dict[tuple[int, int], list[int]] = {}
    for i, t in enumerate(transfers):
        by_release.setdefault((t.step % period, t.layer), []).append(i)
    backward = tuple(
        tuple((schedule.backward_s[layer], tuple(by_release.get((p, layer), ()))) for layer in reversed(range(layers)))
        for p in range(period)
    )
    return CompiledSchedule(
        forward_s=schedule.forward_s,
        backward=backward,
        after=tuple(tuple(by_release.get((p, AFTER_BACKWARD), ())) for p in range(period)),
        releasing=frozenset(p for p, _ in by_release),
        delays=tuple(t.delay for t in transfers),
        needed=tuple(t.needed_layer for t in transfers),
        post_s=tuple(t.post_s for t in transfers),
        encode_s=schedule.encode_s or (0.0,) * period,
        period=period,
        warm=period * max(1, -(-max((t.delay for t in transfers), default=1) // period)),
        compute_s=schedule.compute_s,
    )
