"""The unit of a scheme's traffic: one kind of collective exchange and how often it happens.

Each part of a replicator's declared payload (``netbench.replicators.PayloadDecl.parts()``) is one
exchange; replicators that synchronise several states on different periods or several
buffers of different sizes (two dependent rounds) are a tuple of them. The fields mirror
``PayloadDecl`` so the two convert one-to-one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Exchange", "from_decl", "average_bytes_per_step"]


@dataclass(frozen=True)
class Exchange:
    """Bytes this node hands to ``collective`` on a communicating step (all_gather: own contribution).

    ``calls`` collective calls share ``bytes_per_step`` evenly; the exchange happens every
    ``period`` steps.
    """

    collective: Literal["all_reduce", "all_gather", "none"]
    bytes_per_step: int
    period: int = 1
    calls: int = 1
    label: str = ""

    def __post_init__(self) -> None:
        if self.period < 1 or self.calls < 0 or self.bytes_per_step < 0:
            raise ValueError(f"exchange {self.label or self.collective}: period >= 1, calls >= 0, bytes >= 0 required")


def from_decl(decl: Any, label: str = "") -> Exchange:
    """Convert a replicator's ``PayloadDecl`` (duck-typed, so the model does not pin its class)."""
    return Exchange(
        collective=decl.collective,
        bytes_per_step=int(decl.bytes_per_step),
        period=int(getattr(decl, "period", 1)),
        calls=int(getattr(decl, "collectives_per_step", 1)),
        label=label,
    )


def average_bytes_per_step(exchanges: tuple[Exchange, ...] | list[Exchange]) -> float:
    """Payload handed to collectives per step, averaged over every exchange's period."""
    return sum(e.bytes_per_step / e.period for e in exchanges if e.collective != "none")
