"""Facts about nodes that leave and join, declared once for the schedule that draws the churn and the model that
prices it: how few nodes a leave may leave in the run, how long a drawn leave keeps a node away by default, and how
the leaves and joins are drawn (:func:`draw_changes`), so that a run's ``--churn`` and ``plan --mtbf`` draw alike."""

from __future__ import annotations

import random
from typing import NamedTuple

__all__ = ["MIN_MEMBERS", "DEFAULT_AWAY_S", "Drawn", "TooManyChanges", "draw_changes"]

MIN_MEMBERS = 1  # nodes that stay in the run through every leave: with none, nothing is left to heal from
DEFAULT_AWAY_S = 6.0  # how long a node drawn to leave stays away before it joins again (--churn's away=)


class Drawn(NamedTuple):
    """One drawn change: at ``time_s`` node ``target`` leaves or joins (``member``)."""

    time_s: float
    target: str
    member: str


class TooManyChanges(ValueError):
    """The draws would pass the caller's bound on changes."""


def draw_changes(
    names: tuple[str, ...], mtbf_s: float, away_s: float, for_s: float, seed: int, max_changes: int
) -> list[Drawn]:
    """The leaves and joins of ``names`` over ``for_s``, in time order: each node takes part for an exponential time
    of mean ``mtbf_s`` (from its own stream of ``seed``, so one node's draws do not change when the cluster grows),
    leaves, and joins ``away_s`` later; a leave that would leave fewer than :data:`MIN_MEMBERS` nodes is skipped with
    its join. :class:`TooManyChanges` as soon as the draws pass ``max_changes``."""
    events: list[tuple[float, int, str, int]] = []  # (time, 0 leave / 1 join, node, absence): a leave first at one time
    for name in names:
        stream, t = random.Random(f"{seed}:{name}"), 0.0
        while True:
            t += stream.expovariate(1.0 / mtbf_s)
            if t >= for_s:
                break
            events += [(round(t, 3), 0, name, len(events)), (round(t + away_s, 3), 1, name, len(events))]
            t += away_s
            if len(events) > max_changes:
                raise TooManyChanges(f"draws more than {max_changes} changes")
    changes, away, skipped = [], set(), set()
    for t, kind, name, absence in sorted(events):
        if kind == 0 and len(names) - len(away) - 1 < MIN_MEMBERS:
            skipped.add(absence)  # its join goes too
            continue
        if absence in skipped:
            continue
        (away.add if kind == 0 else away.discard)(name)
        changes.append(Drawn(t, name, "join" if kind else "leave"))
    return changes
