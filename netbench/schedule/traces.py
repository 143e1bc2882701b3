"""Link traces as schedules: a Mahimahi trace, or a CSV of (time, rate[, delay]) rows, on every link (``*``).

A Mahimahi trace (mahimahi's ``mm-link``) has one line per delivery opportunity: the millisecond at which one
MTU-sized packet (1500 bytes) may leave. Counting opportunities per window gives a rate per window; consecutive
windows with the same rate merge into one change. Rates below what tbf shapes faithfully (10mbit) are raised to it,
and the schedule's note says how many windows were. A trace is checked whole before its windows are counted: ASCII
digits only, in order, none past the longest schedule (so a 16-byte trace cannot ask for a year of windows).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import pydantic

from netbench.schedule.errors import first_error
from netbench.schedule.model import ALL, MAX_CHANGES, MAX_SCHEDULE_S, Change
from netbench.topology.link import MAX_RATE_BPS, MIN_RATE_BPS
from netbench.units import UnitError, parse_rate, parse_time

if TYPE_CHECKING:  # numpy is imported where a trace is read: a plan or run without one does not load it
    import numpy as np

__all__ = [
    "TraceError",
    "MAHIMAHI_PACKET_BYTES",
    "WINDOW_S",
    "is_mahimahi",
    "parse_number",
    "from_mahimahi",
    "from_rate_rows",
    "rates_per_window",
]

MAHIMAHI_PACKET_BYTES = 1500
WINDOW_S = 1.0
MAX_TRACE_MS = int(MAX_SCHEDULE_S * 1e3)
_STAMP = re.compile(r"[ \t]*[0-9]{1,12}[ \t]*")  # ASCII digits: str.isdigit() also takes "²" and "٣"
_FIRST_FILLED = re.compile(r"^[ \t]*\S.*$", re.MULTILINE)
_NOT_A_DIGIT = re.compile(r"[^0-9 \t\r\n]")
_TWO_ON_A_LINE = re.compile(r"[0-9][ \t]+[0-9]")
_TOO_LONG = re.compile(r"[0-9]{13}")


class TraceError(ValueError):
    """A trace that cannot be read; one line naming the line."""


def parse_number(text: str) -> float:
    """A plain number from a trace or schedule cell (UnitError, which a message shows without the value)."""
    try:
        return float(text)
    except ValueError:
        raise UnitError(f"cannot read number {text!r}", "cannot read number") from None


def is_mahimahi(text: str) -> bool:
    """True when the first line that is not blank holds only a whole number (a Mahimahi trace)."""
    first = _FIRST_FILLED.search(text)
    return first is not None and _STAMP.fullmatch(first[0].rstrip("\r")) is not None


def rates_per_window(stamps_ms: list[int] | np.ndarray, window_s: float = WINDOW_S) -> list[float]:
    """Bits per second in each window of ``window_s`` from the delivery opportunities' timestamps."""
    import numpy as np  # late: a plan or run without a trace never loads numpy

    stamps = np.asarray(stamps_ms, dtype=np.int64)
    windows = max(1, math.ceil((int(stamps[-1]) + 1) / (window_s * 1e3)))
    counts = np.bincount(np.minimum((stamps / (window_s * 1e3)).astype(np.int64), windows - 1), minlength=windows)
    return [float(n) * MAHIMAHI_PACKET_BYTES * 8 / window_s for n in counts]


def _stamps(text: str) -> np.ndarray:
    """The trace's timestamps: every line blank or one whole number, in order, none past MAX_TRACE_MS.

    Checked with regular expressions and numpy over the whole text (a 16 MiB trace is millions of lines).
    """
    import numpy as np  # late: a plan or run without a trace never loads numpy

    for pattern, why in (
        (_NOT_A_DIGIT, "expected a whole number of milliseconds"),
        (_TWO_ON_A_LINE, "expected one number a line"),
        (_TOO_LONG, "a number of more than 12 digits"),
    ):
        found = pattern.search(text)
        if found:
            raise TraceError(f"line {text.count(chr(10), 0, found.start()) + 1}: {why}")
    stamps = np.array(text.split(), dtype=np.int64)
    late = np.flatnonzero(stamps > MAX_TRACE_MS)
    if late.size:
        raise TraceError(f"timestamp {late[0] + 1} is past the longest schedule ({MAX_SCHEDULE_S:g} s)")
    back = np.flatnonzero(np.diff(stamps) < 0)
    if back.size:
        k = int(back[0]) + 1
        raise TraceError(f"timestamp {k + 1}: times out of order (earlier than timestamp {k})")
    return stamps


def from_mahimahi(text: str, window_s: float = WINDOW_S) -> tuple[list[Change], str]:
    """Changes on every link, one per window whose rate differs from the one before; and a note."""
    stamps = _stamps(text)
    if not stamps.size:
        raise TraceError("has no timestamps")
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
        raise TraceError("a rate trace has the columns time_s,rate[,delay] (a schedule, also link and more)")
    out: list[tuple[float, float, float | None]] = []
    for line, row in enumerate(rows, start=2):
        if None in row:
            raise TraceError(f"line {line}: more cells than columns")
        try:
            time_s = parse_number((row.get(time_key) or "").strip())
            rate = parse_rate((row.get("rate") or "").strip())
            delay = parse_time(row["delay"].strip()) if (row.get("delay") or "").strip() else None
        except UnitError as exc:  # the file's value is not echoed
            raise TraceError(f"line {line}: {exc.unquoted}") from None
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
    """One change per run of equal rates (counted before any is built)."""
    starts = [(t, rate) for i, (t, rate) in enumerate(windows) if i == 0 or windows[i - 1][1] != rate]
    if len(starts) > MAX_CHANGES:
        raise TraceError(f"makes {len(starts)} changes; at most {MAX_CHANGES}")
    return [Change(time_s=t, target=ALL, rate_bps=rate) for t, rate in starts]
