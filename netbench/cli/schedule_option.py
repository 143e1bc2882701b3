"""``--schedule FILE``: a link schedule read before anything is built (:mod:`netbench.schedule`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from netbench.cli.errors import UserError
from netbench.schedule import Schedule, ScheduleError, load

__all__ = ["ScheduleOpt", "read_schedule"]

ScheduleOpt = typer.Option(None, "--schedule", help="Change links and nodes while the run goes on: a schedule CSV "
                           "(time_s,link,rate,delay,loss,state[,jitter,compute_scale]) or TOML, a Mahimahi trace or a "
                           "time_s,rate[,delay] trace; times count from the first measured step.")


def read_schedule(path: Optional[Path], option: str = "--schedule") -> Schedule | None:
    """The schedule in ``path`` (None: no schedule); a file that cannot be used is one UserError line."""
    if path is None:
        return None
    try:
        return load(path)
    except ScheduleError as exc:
        raise UserError(f"{option}: {exc}") from None
