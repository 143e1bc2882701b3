"""``--schedule FILE``: a link schedule read before anything is built (:mod:`netbench.schedule`)."""

from __future__ import annotations

from pathlib import Path

from netbench.cli.errors import UserError
from netbench.schedule import Schedule, ScheduleError, load

__all__ = ["read_schedule"]


def read_schedule(path: Path | None, option: str = "--schedule") -> Schedule | None:
    """The schedule in ``path`` (None: no schedule); a file that cannot be used is one UserError line."""
    if path is None:
        return None
    try:
        return load(path)
    except ScheduleError as exc:
        raise UserError(f"{option}: {exc}") from None
