"""The unit of a scheme's traffic: one kind of collective exchange and how often it happens.

Each part of a replicator's declared payload (``netbench.declarations.spec.PayloadDecl.parts()``) is one
exchange; replicators that synchronise several states on different periods or several
buffers of different sizes (two dependent rounds) are a tuple of them. The fields mirror
``PayloadDecl`` so the two convert one-to-one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = [
    "Exchange",
    "from_decl",
    "lasting",
    "average_bytes_per_step",
    "rests",
    "communicating_share",
    "with_free_runs",
]


@dataclass(frozen=True)
class Exchange:
    """Bytes this node hands to ``collective`` on a communicating step (all_gather: own contribution).

    ``calls`` collective calls share ``bytes_per_step`` evenly; the exchange happens every
    ``period`` steps, on the step ``offset`` of the period (exchanges on different steps each follow a rest
    of their own), and its collectives may travel behind the next ``overlap_steps`` steps of local work
    before the rank waits for them (Streaming DiLoCo's fragments). ``layers`` (out of ``layer_count``) are the
    model's layers it carries, where it carries some only (a fragment). ``follows_free_steps``: a periodic call with
    no waited-for collective on the step before it (:func:`with_free_runs`). ``hop_codec``: a ring whose hops decode,
    add and encode what they pass on (the quantized ring), so codec work sits on its path.
    """

    collective: Literal["all_reduce", "all_gather", "all_to_all", "pairwise", "none"]
    bytes_per_step: int
    period: int = 1
    calls: int = 1
    label: str = ""
    offset: int = 0
    overlap_steps: int = 0
    layers: tuple[int, ...] = ()
    layer_count: int = 0
    follows_free_steps: bool = False
    hop_codec: bool = False

    def __post_init__(self) -> None:
        if self.period < 1 or self.calls < 0 or self.bytes_per_step < 0 or not 0 <= self.overlap_steps < self.period:
            raise ValueError(
                f"exchange {self.label or self.collective}: period >= 1, calls >= 0, bytes >= 0 and "
                "0 <= overlap_steps < period required"
            )

    @property
    def moves_bytes(self) -> bool:
        """Whether it puts anything on the wire: a collective with calls and bytes."""
        return self.collective != "none" and self.calls > 0 and self.bytes_per_step > 0

    @property
    def ring_kind(self) -> str:
        """What gloo's pricing (:func:`~netbench.model.gloo_tcp.gloo_time`) runs it as: a ``hop_codec`` all-reduce is
        a ring of point-to-point hops whose receives are posted a hop ahead (``p2p_ring``), not gloo's segmented
        all-reduce; anything else is its collective."""
        return "p2p_ring" if self.hop_codec and self.collective == "all_reduce" else self.collective

    @property
    def runs_free(self) -> bool:
        """Whether the ranks reach its call after local steps no collective aligned, so they enter it as far apart
        as their local work drifted: an overlapped call (each rank launches it as its own step ends) or one that
        follows free steps."""
        return self.overlap_steps > 0 or self.follows_free_steps

    @property
    def step_of_period(self) -> int:
        """Which step of its period it communicates on (0: the last)."""
        return self.offset % self.period

    @property
    def first_sync(self) -> int:
        """The 1-based step of a run on which it first communicates."""
        return self.step_of_period or self.period

    def exposed_s(self, time_s: float, local_s: float) -> float:
        """What ``time_s`` of its collectives leaves on the step when it overlaps ``overlap_steps`` steps of
        ``local_s`` seconds of local work each."""
        return max(0.0, time_s - self.overlap_steps * local_s)


def from_decl(decl: Any, label: str = "") -> Exchange:
    """Convert a replicator's ``PayloadDecl`` (duck-typed, so the model does not pin its class)."""
    return Exchange(
        collective=decl.collective,
        bytes_per_step=int(decl.bytes_per_step),
        period=int(getattr(decl, "period", 1)),
        calls=int(getattr(decl, "collectives_per_step", 1)),
        label=label,
        offset=int(getattr(decl, "offset", 0)),
        overlap_steps=int(getattr(decl, "overlap_steps", 0)),
        layers=tuple(getattr(decl, "layers", ())),
        layer_count=int(getattr(decl, "layer_count", 0)),
        hop_codec=bool(getattr(decl, "hop_codec", False)),
    )


def lasting(parts: Any) -> tuple[Any, ...]:
    """The declared parts (``PayloadDecl``, duck-typed) a long run keeps making: those whose phase has no last step.

    A phase that ends (1-bit Adam's dense warm-up of ``freeze_step`` steps) is a run's first segment; the model prices
    the steps after it, which are every step of a long run and of a run whose warm-up steps cover it.
    """
    return tuple(p for p in parts if getattr(p, "steps", (1, 0))[1] == 0)


def average_bytes_per_step(exchanges: tuple[Exchange, ...] | list[Exchange]) -> float:
    """Payload handed to collectives per step, averaged over every exchange's period."""
    return sum(e.bytes_per_step / e.period for e in exchanges if e.collective != "none")


def _step_key(ex: Exchange) -> tuple[int, int]:
    """Which exchanges share a step: those on the last step of their periods all do (their periods' multiples
    meet there), the others by period and step of the period."""
    return (ex.period, ex.step_of_period) if ex.offset else (0, 0)


def rests(exchanges: tuple[Exchange, ...] | list[Exchange], rest_s: float | None) -> list[float | None]:
    """The rest each exchange's first call follows: ``rest_s`` for the first exchange on its step of the period,
    none for the others that share that step (they follow it directly)."""
    seen: set[tuple[int, int]] = set()
    out: list[float | None] = []
    for ex in exchanges:
        key = _step_key(ex)
        out.append(0.0 if key in seen else rest_s)
        seen.add(key)
    return out


def communicating_share(exchanges: tuple[Exchange, ...] | list[Exchange]) -> float:
    """The share of steps that start an exchange (1 for every-step replicators, 1/H for DiLoCo, F/H for Streaming
    DiLoCo's F fragments): per-step averages of a once-per-burst effect scale by it."""
    periods: dict[tuple[int, int], int] = {}
    for ex in exchanges:
        if ex.moves_bytes:
            key = _step_key(ex)
            periods[key] = min(periods.get(key, ex.period), ex.period)
    return min(1.0, sum(1 / p for p in periods.values()))


def _follows(other: Exchange, ex: Exchange) -> bool:
    """Whether ``other`` starts its calls on a step right before one that starts ``ex``'s: some step t with
    t = ex's step of period (mod its period) and t - 1 = other's (mod its period), which the Chinese remainder
    theorem says exists exactly when the two residues agree modulo the periods' common divisor."""
    return (ex.step_of_period - 1 - other.step_of_period) % math.gcd(ex.period, other.period) == 0


def _blocks(ex: Exchange) -> bool:
    """Whether the ranks wait for ``ex``'s calls within the step that starts them (which lines them up)."""
    return ex.moves_bytes and ex.overlap_steps == 0


def with_free_runs(exchanges: tuple[Exchange, ...]) -> tuple[Exchange, ...]:
    """``exchanges`` with ``follows_free_steps`` set on the periodic ones that no waited-for collective precedes on
    the step before (DiLoCo's and SparseLoCo's outer syncs: H - 1 steps of local work that each rank runs at its own
    pace)."""
    return tuple(
        replace(ex, follows_free_steps=ex.period > 1 and not any(_blocks(o) and _follows(o, ex) for o in exchanges))
        for ex in exchanges
    )
