"""Parse and format the units tc speaks (rates, times, sizes, percentages).

Users type what they would type for `tc`: ``100mbit``, ``2.5gbit``, ``10ms``, ``500us``, ``64kb``,
``0.1%``. Everything inside netbench is plain SI numbers: bits per second, seconds, bytes,
fractions. Parsing failures raise ``UnitError`` with a message fit to show the user verbatim.
"""

from __future__ import annotations

import re

__all__ = [
    "UnitError",
    "parse_rate",
    "parse_time",
    "parse_size",
    "parse_fraction",
    "format_rate",
    "format_rate_digits",
    "format_time",
    "format_bytes",
]


class UnitError(ValueError):
    """A value the user typed does not parse in the expected unit.

    ``str()`` quotes the value (the user typed it); :attr:`unquoted` says the same without it, for a value read from
    a file someone else wrote (whose content a message never echoes).
    """

    def __init__(self, message: str, unquoted: str) -> None:
        super().__init__(message)
        self.unquoted = unquoted


_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_VALUE = re.compile(rf"^\s*(?P<sign>-)?{_NUMBER}\s*(?P<unit>[a-zA-Z%]*)\s*$")

# tc(8): "bit" units are bits per second; "bps" units are BYTES per second.
_RATE_UNITS: dict[str, float] = {
    "bit": 1,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "kibit": 2**10,
    "mibit": 2**20,
    "gibit": 2**30,
    "tibit": 2**40,
    "bps": 8,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
    "tbps": 8e12,
    "kibps": 8 * 2**10,
    "mibps": 8 * 2**20,
    "gibps": 8 * 2**30,
    "tibps": 8 * 2**40,
}
_TIME_UNITS: dict[str, float] = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "ms": 1e-3,
    "msec": 1e-3,
    "msecs": 1e-3,
    "us": 1e-6,
    "usec": 1e-6,
    "usecs": 1e-6,
    "ns": 1e-9,
    "nsec": 1e-9,
}
# tc(8): sizes are bytes; "kb"/"k" are kibibytes, "kbit" is kilobits.
_SIZE_UNITS: dict[str, float] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "kbit": 1024 / 8,
    "mbit": 2**20 / 8,
    "gbit": 2**30 / 8,
}


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, (int, float)):
        return float(text), ""
    match = _VALUE.match(str(text))
    if not match:
        raise UnitError(f"cannot read {what} {text!r}", f"cannot read {what}")
    value = float(match["num"])
    if match["sign"]:
        value = -value
    return value, match["unit"].lower()


def parse_rate(text: str | float | int) -> float:
    """Rate in bits per second from ``100mbit``, ``2.5gbit``, ``10MBps`` (bytes/s, as tc)."""
    value, unit = _split(text, "rate")
    if unit == "":
        raise UnitError(
            f"rate {text!r} needs a unit, e.g. 100mbit or 1gbit", "a rate needs a unit, e.g. 100mbit or 1gbit"
        )
    if unit not in _RATE_UNITS:
        raise UnitError(
            f"unknown rate unit {unit!r} in {text!r} (use bit, kbit, mbit, gbit, or bps for bytes/s)",
            "unknown rate unit (use bit, kbit, mbit, gbit, or bps for bytes/s)",
        )
    return value * _RATE_UNITS[unit]


def parse_time(text: str | float | int) -> float:
    """Time in seconds from ``10ms``, ``500us``, ``1s``; a bare number means milliseconds, as tc."""
    value, unit = _split(text, "time")
    if unit == "":
        return value * 1e-3
    if unit not in _TIME_UNITS:
        raise UnitError(
            f"unknown time unit {unit!r} in {text!r} (use s, ms or us)", "unknown time unit (use s, ms or us)"
        )
    return value * _TIME_UNITS[unit]


def parse_size(text: str | float | int) -> float:
    """Size in bytes from ``64kb``, ``2mb``, ``1500``, ``16kbit`` (tc: kb = KiB)."""
    value, unit = _split(text, "size")
    if unit not in _SIZE_UNITS:
        raise UnitError(
            f"unknown size unit {unit!r} in {text!r} (use b, kb, mb, gb)", "unknown size unit (use b, kb, mb, gb)"
        )
    return value * _SIZE_UNITS[unit]


def parse_fraction(text: str | float | int) -> float:
    """Fraction in [0, 1] from ``0.5%`` or a plain fraction ``0.005``."""
    value, unit = _split(text, "percentage")
    if unit == "%":
        return value / 100.0
    if unit == "":
        return value
    raise UnitError(f"cannot read percentage {text!r} (use e.g. 0.5%)", "cannot read percentage (use e.g. 0.5%)")


def format_rate(bps: float) -> str:
    """``1e8`` -> ``100mbit``; the inverse of :func:`parse_rate` for round numbers."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"


def format_rate_digits(bps: float, digits: int = 4) -> str:
    """A rate to ``digits`` significant digits in tc units (``5.269gbit``): derived answers are not round numbers."""
    for unit, scale in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.{digits}g}{unit}"
    return f"{bps:.{digits}g}bit"


def format_time(seconds: float) -> str:
    """Seconds to a short human string (``20ms``, ``500us``, ``1.2s``)."""
    if seconds == 0:
        return "0ms"
    if seconds >= 1:
        return f"{seconds:.3g}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g}ms"
    return f"{seconds * 1e6:.3g}us"


def format_bytes(n: float) -> str:
    """Bytes to a short human string with binary prefixes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
