"""A comparison's current side in the format github-action-benchmark charts per commit (``customSmallerIsBetter``).

The format is a JSON array of ``{"name", "unit", "value", "range"?, "extra"?}``: a name per
series, a number where smaller is better, and optional free text. Each point gives two series,
its median step time and its wire bytes per step, with the median's noise (standard error, from
the steps' spread) as the range. Points that failed or measured nothing are left out: a missing
value would break the chart, a failure shows in the comparison's own verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["FIELDS", "PointLike", "benchmark_entries"]

FIELDS = {"name": str, "unit": str, "value": (int, float), "range": str, "extra": str}  # what the format allows
REQUIRED = ("name", "unit", "value")


class PointLike(Protocol):
    """One point of one side, as the comparison reads it."""

    label: str
    status: str
    step_time_s: float | None
    step_noise_s: float | None
    wire_bytes: float | None
    wire_noise: float | None


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _entry(name: str, unit: str, value: float, noise: float | None, extra: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "unit": unit, "value": value}
    if _finite(noise):
        out["range"] = f"± {noise:.6g}"
    out["extra"] = extra
    return out


def benchmark_entries(points: Iterable[PointLike]) -> list[dict[str, Any]]:
    """The entries of every point that measured something: ``LABEL step time`` (s) and ``LABEL wire bytes``
    (bytes/step).
    """
    out = []
    for p in points:
        if p.status != "ok":
            continue
        if _finite(p.step_time_s):
            out.append(
                _entry(
                    f"{p.label} step time", "s", float(p.step_time_s), p.step_noise_s, "median over the measured steps"
                )
            )
        if _finite(p.wire_bytes):
            out.append(
                _entry(
                    f"{p.label} wire bytes", "bytes/step", float(p.wire_bytes), p.wire_noise, "sent per node per step"
                )
            )
    return out
