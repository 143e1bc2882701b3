"""Random churn: nodes that leave and join at random times, drawn from a seed into a schedule's membership changes.

``--churn MTBF[,away=TIME][,seed=N][,for=TIME]``: each node takes part for an exponentially distributed time of mean
MTBF (its mean time between failures), leaves, stays away for ``away`` and joins again, over ``for`` seconds from
the first measured step. Each node draws from its own stream of the seed, so one node's draws do not change when the
cluster grows. A leave that would leave fewer than :data:`~netbench.schedule.model.MIN_MEMBERS` nodes in the run is
skipped with its join (:func:`netbench.membership.draw_changes`, which plan's goodput draws from too). The draws
become ordinary ``member`` changes (:mod:`netbench.schedule.model`), merged with a schedule file's rows, so a run
records, applies and reports them as it does a file's.
"""

from __future__ import annotations

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from netbench.membership import DEFAULT_AWAY_S, TooManyChanges, draw_changes
from netbench.schedule.errors import first_error
from netbench.schedule.model import MAX_CHANGES, MAX_SCHEDULE_S, Change, Schedule
from netbench.settings import Setting
from netbench.units import UnitError, parse_time

__all__ = ["CHURN", "Churn", "ChurnError", "parse_churn", "draw", "with_churn"]

CHURN = Setting(
    "--churn",
    "churn",
    "text",
    "Nodes leave and join at random: MTBF, the mean time a node takes part before it leaves (exponential, per node), "
    "then ',away=TIME' (how long it stays away, default 6s), ',seed=N' (default 0) and ',for=TIME' (how long the "
    "draws cover, default 1h) as needed; e.g. 20s,away=6s,seed=3.",
)


class ChurnError(ValueError):
    """A ``--churn`` value that cannot be used; the message is one line and never echoes the value."""


class Churn(BaseModel):
    """What the random churn draws from: the mean time between failures per node, the time away, a seed, a horizon."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    mtbf_s: float = Field(ge=1.0, le=MAX_SCHEDULE_S, description="mean time a node takes part before it leaves")
    away_s: float = Field(
        DEFAULT_AWAY_S, ge=0.1, le=MAX_SCHEDULE_S, description="how long a node stays away before it joins"
    )
    seed: int = Field(0, ge=0, le=2**32 - 1)
    for_s: float = Field(3600.0, gt=0, le=MAX_SCHEDULE_S, description="how long from the first measured step")

    @property
    def label(self) -> str:
        """How run.json names the churn (``churn mtbf=20s away=6s seed=0 for=3600s``)."""
        return f"churn mtbf={self.mtbf_s:g}s away={self.away_s:g}s seed={self.seed} for={self.for_s:g}s"


_KEYS = {"away": "away_s", "seed": "seed", "for": "for_s"}


def parse_churn(text: str) -> Churn:
    """``MTBF[,away=TIME][,seed=N][,for=TIME]`` as a :class:`Churn`; :class:`ChurnError` (one line) otherwise."""
    first, *rest = [part.strip() for part in text.split(",")]
    values: dict[str, float | int] = {}
    key = "mtbf_s"
    try:
        values["mtbf_s"] = parse_time(first)
        for part in rest:
            name, sep, value = part.partition("=")
            key = _KEYS.get(name.strip(), "")
            if not sep or not key:
                raise ChurnError(f"expected MTBF then {', '.join(f'{k}=' for k in _KEYS)} (e.g. 20s,away=6s,seed=3)")
            if key in values:
                raise ChurnError(f"{name.strip()}= given twice")
            values[key] = int(value) if key == "seed" and value.strip().isdigit() else parse_time(value.strip())
        if "seed" in values and not float(values["seed"]).is_integer():
            raise ChurnError("seed: expected a whole number")
        return Churn(**values)
    except UnitError as exc:
        raise ChurnError(f"{key.removesuffix('_s')}: {exc.unquoted}") from None
    except pydantic.ValidationError as exc:
        raise ChurnError(first_error(exc).replace("_s:", ":", 1)) from None


def draw(churn: Churn, nodes: tuple[str, ...]) -> list[Change]:
    """The leaves and joins ``churn`` draws for ``nodes``, in time order; :class:`ChurnError` past MAX_CHANGES."""
    try:
        drawn = draw_changes(nodes, churn.mtbf_s, churn.away_s, churn.for_s, churn.seed, MAX_CHANGES)
    except TooManyChanges:
        raise ChurnError(
            f"draws more than {MAX_CHANGES} changes over {churn.for_s:g} s; raise MTBF or lower for="
        ) from None
    return [Change(time_s=d.time_s, target=d.target, member=d.member) for d in drawn]


def with_churn(schedule: Schedule | None, churn: Churn, nodes: tuple[str, ...]) -> Schedule:
    """``schedule`` (or none) with ``churn``'s draws merged in time order; :class:`ChurnError` when they clash."""
    drawn = draw(churn, nodes)
    ours = list(schedule.changes) if schedule is not None else []
    merged = sorted(ours + drawn, key=lambda c: c.time_s)  # stable: a file's row comes first at one time
    source = f"{schedule.source} + {churn.label}" if schedule is not None else churn.label
    if not merged:
        raise ChurnError(f"draws no leave within {churn.for_s:g} s; lower MTBF or raise for=")
    try:
        return Schedule(changes=tuple(merged), source=source[:300], note=schedule.note if schedule else "")
    except pydantic.ValidationError as exc:
        raise ChurnError(f"the draws clash with the schedule file: {first_error(exc)}") from None
