"""A schedule's validation errors as one line, named the way a schedule file names its columns."""

from __future__ import annotations

import pydantic

from netbench.units import format_rate

__all__ = ["first_error"]

_COLUMN = {"rate_bps": "rate", "delay_s": "delay", "jitter_s": "jitter", "target": "link"}


def first_error(exc: pydantic.ValidationError) -> str:
    """The first validation error as ``column: message`` (pydantic's text, a rate shown in tc units)."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()) if not isinstance(p, int))
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    limit = (err.get("ctx") or {}).get("ge", (err.get("ctx") or {}).get("le"))
    if where == "rate_bps" and isinstance(limit, (int, float)):
        message = (
            "must be between 10mbit and 10gbit, got "
            f"{format_rate(err['input']) if err.get('input', 0) > 0 else err.get('input')}"
        )
    where = _COLUMN.get(where, where)
    return f"{where}: {message}" if where and where != "changes" else message
