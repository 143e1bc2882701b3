"""One compression rate for every sparse replicator, as DeToNATION compares them.

``fraction`` is the share of a tensor's elements whose values are sent per step (``1/16``: one
value in sixteen). It maps onto each replicator's own knob: dct keeps ``fraction * s * s``
coefficients of every s x s chunk (top-k), random and striding send ``fraction`` of each tensor
(their rate). The payload then follows from each replicator's own formula (indices, where sent,
come on top of the values). Replicators that send every element (full, diloco, lowrank, mtdao)
have no such knob.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["COMPRESSIBLE", "parse_compression", "compression_settings"]

COMPRESSIBLE = ("dct", "random", "striding")


def parse_compression(text: str) -> float:
    """``1/16``, ``0.0625`` or ``6.25%`` -> 0.0625; ValueError unless in (0, 1]."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(Fraction(raw))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"expected a fraction such as 1/16, 0.0625 or 6.25%, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"must be in (0, 1], got {text!r}")
    return value


def compression_settings(name: str, fraction: float, chunk: int) -> dict[str, float | int]:
    """The replicator settings that send ``fraction`` of each tensor's values (dct: of each s x s chunk)."""
    if name == "dct":
        return {"topk": max(1, min(chunk * chunk, round(fraction * chunk * chunk)))}
    if name in ("random", "striding"):
        return {"rate": fraction}
    raise ValueError(f"{name} sends every element; a compression rate applies to {', '.join(COMPRESSIBLE)}")
