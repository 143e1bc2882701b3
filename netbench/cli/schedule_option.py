"""``--schedule FILE`` and ``--churn``: a link schedule read before anything is built (:mod:`netbench.schedule`),
with the random churn's leaves and joins (:mod:`netbench.schedule.churn`) merged in."""

from __future__ import annotations

from pathlib import Path

from netbench.cli.errors import UserError
from netbench.emulation.spec import ClusterSpec
from netbench.schedule import Schedule, ScheduleError, load
from netbench.schedule.churn import CHURN, ChurnError, parse_churn, with_churn

__all__ = ["read_schedule"]


def read_schedule(
    path: Path | None, option: str = "--schedule", churn: str | None = None, cluster: ClusterSpec | None = None
) -> Schedule | None:
    """The schedule in ``path`` (None: no schedule) with ``churn``'s draws for ``cluster``'s nodes; a file or a churn
    that cannot be used is one UserError line."""
    try:
        schedule = load(path) if path is not None else None
    except ScheduleError as exc:
        raise UserError(f"{option}: {exc}") from None
    if churn is None or cluster is None:
        return schedule
    try:
        return with_churn(schedule, parse_churn(churn), tuple(n.name for n in cluster.topology.nodes))
    except ChurnError as exc:
        raise UserError(f"{CHURN.name}: {exc}") from None
