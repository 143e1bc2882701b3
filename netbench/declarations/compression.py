"""One compression rate for every sparse replicator, as DeToNATION compares them.

``fraction`` is the share of a tensor's elements whose values are sent per step (``1/16``: one
value in sixteen). Each declaration's ``compression`` maps it onto the replicator's own knob: one that sends a
chunk-wise top-k keeps ``fraction * s * s`` coefficients of every s x s chunk, one that sends a rate of every tensor
sends ``fraction`` of it. The payload then follows from each replicator's own formula (indices, where sent, come
on top of the values). Replicators that send every element declare no such map.
"""

from __future__ import annotations

from fractions import Fraction

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import REGISTRY, spec

__all__ = ["compressible", "parse_compression", "compression_settings", "compression_help"]


def compressible() -> tuple[str, ...]:
    """The replicators whose declarations map a compression rate onto a setting of their own."""
    return tuple(name for name, declared in REGISTRY.items() if declared.compression is not None)


def compression_help() -> str:
    """Which knob ``--compression`` sets for each replicator: ``NAME (top-k per chunk), OTHER (rate), ...``."""
    return ", ".join(f"{name} ({REGISTRY[name].compression_knob})" for name in compressible())


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
    """The settings of ``name`` that send ``fraction`` of each tensor's values (per s x s chunk where it tiles)."""

    declared = spec(name)
    if declared.compression is None:
        raise ValueError(f"{name} sends every element; a compression rate applies to {', '.join(compressible())}")
    return declared.compression(fraction, ReplicatorConfig.model_construct(name=name, chunk=chunk))
