"""Link traces as schedules: a Mahimahi trace, or a CSV of (time, rate[, delay]) rows, on every link (``*``).

A Mahimahi trace (mahimahi's ``mm-link``) has one line per delivery opportunity: the millisecond at which one
MTU-sized packet (1500 bytes) may leave. Counting opportunities per window gives a rate per window; consecutive
windows with the same rate merge into one change. Rates below what tbf shapes faithfully (10mbit) are raised to it,
and the schedule's note says how many windows were.
"""

from __future__ import annotations

import math
from typing import Any

import pydantic

from netbench.schedule.errors import first_error
from netbench.schedule.model import ALL, MAX_CHANGES, Change
from netbench.topology.link import MAX_RATE_BPS, MIN_RATE_BPS
from netbench.units import UnitError, parse_rate, parse_time

__all__ = ["TraceError", "MAHIMAHI_PACKET_BYTES", "WINDOW_S", "from_mahimahi", "from_rate_rows", "rates_per_window"]

MAHIMAHI_PACKET_BYTES = 1500
WINDOW_S = 1.0


class TraceError(ValueError):
    """A trace that cannot be read; one line naming the line."""


def rates_per_window(stamps_ms: list[int], window_s: float = WINDOW_S) -> list[float]:
    """Bits per second in each window of ``window_s`` from the delivery opportunities' timestamps."""
    windows = max(1, math.ceil((stamps_ms[-1] + 1) / (window_s * 1e3)))
    counts = [0] * windows
    for ms in stamps_ms:
        counts[min(int(ms / (window_s * 1e3)), windows - 1)] += 1
    return [n * MAHIMAHI_PACKET_BYTES * 8 / window_s for n in counts]


def from_mahimahi(text: str, window_s: float = WINDOW_S) -> tuple[list[Change], str]:
    """Changes on every link, one per window whose rate differs from the one before; and a note."""
    stamps: list[int] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        raw = raw.strip()
        if not raw:
            continue
        if not raw.isdigit():
            raise TraceError(f"line {line}: expected a whole number of milliseconds, got {raw[:40]!r}")
        ms = int(raw)
        if stamps and ms < stamps[-1]:
            raise TraceError(f"line {line}: times out of order ({ms} ms after {stamps[-1]} ms)")
        stamps.append(ms)
    rates = rates_per_window(stamps, window_s)
    raised = sum(rate < MIN_RATE_BPS for rate in rates)
    lowered = sum(rate > MAX_RATE_BPS for rate in rates)
    changes = _merged([(i * window_s, min(max(rate, MIN_RATE_BPS), MAX_RATE_BPS)) for i, rate in enumerate(rates)])
    notes = [f"{raised} of {len(rates)} windows raised to 10mbit"] if raised else []
    notes += [f"{lowered} of {len(rates)} windows lowered to 10gbit"] if lowered else []
    return changes, "; ".join(notes)


def from_rate_rows(rows: list[dict[str, Any]], header: list[str]) -> tuple[list[Change], str]:
    """Changes on every link from ``time_s,rate[,delay]`` rows (``time`` is read as ``time_s``)."""
    time_key = "time_s" if "time_s" in header else "time"
    allowed = {time_key, "rate", "delay"}
    unknown = [h for h in header if h not in allowed]
    if unknown or "rate" not in header or time_key not in header:
        raise TraceError(f"a rate trace has the columns time_s,rate[,delay]; got {','.join(header)[:80]!r}")
    out: list[tuple[float, float, float | None]] = []
    for line, row in enumerate(rows, start=2):
        if None in row:
            raise TraceError(f"line {line}: more cells than columns")
        try:
            time_s = float((row.get(time_key) or "").strip())
            rate = parse_rate((row.get("rate") or "").strip())
            delay = parse_time(row["delay"].strip()) if (row.get("delay") or "").strip() else None
        except (UnitError, ValueError) as exc:
            raise TraceError(f"line {line}: {exc}") from None
        out.append((time_s, rate, delay))
    if not out:
        raise TraceError("has no rows")
    return [_change(t, rate, delay, line) for line, (t, rate, delay) in enumerate(out, start=2)], ""


def _change(time_s: float, rate: float, delay: float | None, line: int) -> Change:
    try:
        return Change(time_s=time_s, target=ALL, rate_bps=rate, delay_s=delay)
    except ValueError as exc:
        raise TraceError(
            f"line {line}: {first_error(exc) if isinstance(exc, pydantic.ValidationError) else exc}"
        ) from None


def _merged(windows: list[tuple[float, float]]) -> list[Change]:
    """One change per run of equal rates."""
    changes: list[Change] = []
    for time_s, rate in windows:
        if not changes or changes[-1].rate_bps != rate:
            changes.append(Change(time_s=time_s, target=ALL, rate_bps=rate))
    if len(changes) > MAX_CHANGES:
        raise TraceError(f"makes {len(changes)} changes; at most {MAX_CHANGES}")
    return changes
