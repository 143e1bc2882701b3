"""A link schedule: timed changes to the emulated network while a run goes on (pure data, validated when made).

Each :class:`Change` says, at ``time_s`` seconds after the first measured step began, what one target becomes: ``*``
(every link and every node), a link as the topology names it (a trunk ``site0--site1``, or a node's access link
``n0``), or a node's name (its access link both ways, and its compute speed). A field left ``None`` keeps the value
in force. A change to a node may also make it leave the run (``member`` ``leave``: its processes are stopped) or
join it again (``join``: fresh processes on the same emulated node). :func:`netbench.schedule.state.segments` turns
the changes into the network in force between two change times: a :class:`~netbench.topology.graph.Topology` with
the segment's rates, delays and compute scales, the links that are down and the nodes that are away. The emulator
applies the changes (:mod:`netbench.schedule.live`), the summary and the model read the segments
(:mod:`netbench.schedule.segments`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netbench.membership import MIN_MEMBERS
from netbench.topology.graph import MAX_COMPUTE_SCALE, Topology
from netbench.topology.link import MAX_EMULATED_DELAY_S, MAX_RATE_BPS, MIN_RATE_BPS
from netbench.units import format_rate
from netbench.untrusted import shown_name

__all__ = ["ALL", "MAX_CHANGES", "MAX_SCHEDULE_S", "MIN_MEMBERS", "Change", "Schedule", "Segment", "away_after"]

ALL = "*"
MAX_CHANGES = 10_000  # a replayed trace of 1 s windows covers almost three hours
MAX_SCHEDULE_S = 7 * 24 * 3600.0
SETS = ("rate_bps", "delay_s", "jitter_s", "loss", "state", "compute_scale", "member")  # what a change may set


class Change(BaseModel):
    """One timed change of one target; ``None`` keeps what is in force."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    time_s: float = Field(ge=0, le=MAX_SCHEDULE_S, description="seconds after the first measured step began")
    target: str = Field(
        pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9._-]{0,63})$", description="'*', a link's name, or a node's name"
    )
    rate_bps: float | None = Field(None, ge=MIN_RATE_BPS, le=MAX_RATE_BPS)
    delay_s: float | None = Field(None, ge=0, le=MAX_EMULATED_DELAY_S)
    jitter_s: float | None = Field(None, ge=0, le=MAX_EMULATED_DELAY_S)
    loss: float | None = Field(None, ge=0, le=0.5)
    state: Literal["up", "down"] | None = None
    compute_scale: float | None = Field(None, ge=1.0, le=MAX_COMPUTE_SCALE)
    member: Literal["leave", "join"] | None = Field(
        None, description="leave: the node's processes are stopped; join: fresh ones start on the node"
    )

    @model_validator(mode="after")
    def _changes_something(self) -> Change:
        if all(getattr(self, key) is None for key in SETS):
            raise ValueError("sets nothing (rate, delay, jitter, loss, state, compute_scale or member)")
        if self.member is not None and self.target == ALL:
            raise ValueError("member names every node: a leave or a join names one node")
        if self.member is not None and self.time_s == 0:
            raise ValueError("member at time 0: a node leaves or joins once the first measured step has begun")
        return self

    @property
    def link_fields(self) -> dict[str, float]:
        """What this change sets on a link direction (rate, delay, jitter, loss)."""
        return {k: v for k in ("rate_bps", "delay_s", "jitter_s", "loss") if (v := getattr(self, k)) is not None}


def away_after(away: frozenset[str], change: Change) -> frozenset[str]:
    """The names of the nodes away once ``change`` is made, ``away`` before it."""
    if change.member == "leave":
        return away | {change.target}
    if change.member == "join":
        return away - {change.target}
    return away


@dataclass(frozen=True)
class Segment:
    """The network in force from ``start_s`` to ``end_s`` (None: to the end of the run)."""

    index: int
    start_s: float
    end_s: float | None
    graph: Topology  # rates, delays and compute scales in force
    down: frozenset[str]  # names of the links that are down
    away: frozenset[str] = frozenset()  # names of the nodes that have left and not joined again

    @property
    def members(self) -> int:
        """How many nodes take part in the run during this segment."""
        return len(self.graph.nodes) - len(self.away)

    @property
    def label(self) -> str:
        """``0-30s 100mbit`` style: when, and the slowest rate in force (or that a link is down)."""
        end = f"{self.end_s:g}" if self.end_s is not None else ""
        rate = min(min(link.forward.rate_bps, link.reverse.rate_bps) for link in self.graph.links)
        what = f"{','.join(sorted(self.down))} down" if self.down else format_rate(rate)
        slow = max(node.compute_scale for node in self.graph.nodes)
        away = f" {','.join(sorted(self.away))} away" if self.away else ""
        return f"{self.start_s:g}-{end}s {what}" + (f" compute x{slow:g}" if slow > 1 else "") + away


class Schedule(BaseModel):
    """Timed changes in time order; ``source`` names where they came from (run.json records both)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    changes: tuple[Change, ...] = Field(min_length=1, max_length=MAX_CHANGES)
    source: str = Field("", max_length=300)
    note: str = Field(
        "", max_length=300, description="what reading the file changed (a trace's rates raised to the minimum)"
    )

    @model_validator(mode="after")
    def _in_time_order(self) -> Schedule:
        for i, (before, after) in enumerate(zip(self.changes, self.changes[1:]), start=2):
            if after.time_s < before.time_s:
                raise ValueError(f"times out of order: change {i} comes before change {i - 1}")
        away: frozenset[str] = frozenset()
        for i, c in enumerate(self.changes, start=1):  # a node leaves only while it takes part, joins only while away
            if c.member == "leave" and c.target in away:
                raise ValueError(f"change {i}: the node leaves but has already left")
            if c.member == "join" and c.target not in away:
                raise ValueError(f"change {i}: the node joins but has not left")
            away = away_after(away, c)
        return self

    def __repr__(self) -> str:
        """The file it came from: what a one-line error shows of it."""
        return self.source or f"a schedule of {len(self.changes)} changes"

    @property
    def times(self) -> tuple[float, ...]:
        """Every distinct change time, in order."""
        return tuple(sorted({c.time_s for c in self.changes}))

    @property
    def changes_members(self) -> bool:
        """True when some node leaves or joins during the run."""
        return any(c.member is not None for c in self.changes)

    @property
    def changes_delay(self) -> bool:
        """True when some change sets delay, jitter or loss (the delay line must be running)."""
        return any(c.delay_s is not None or c.jitter_s is not None or c.loss is not None for c in self.changes)

    def check_targets(self, graph: Topology) -> None:
        """ValueError (one line) for a target the network does not have, or a change it cannot take."""
        nodes = {n.name for n in graph.nodes}
        links = {link.name for link in graph.links}
        for i, c in enumerate(self.changes, start=1):
            if c.target != ALL and c.target not in nodes | links:
                known = ", ".join(shown_name(n, quoted=False) for n in sorted(nodes | links)[:8])
                raise ValueError(f"change {i}: unknown link (this network has {known}, or '*')")
            if c.compute_scale is not None and c.target != ALL and c.target not in nodes:
                raise ValueError(f"change {i}: compute_scale names {shown_name(c.target)}, which is a link, not a node")
            if c.state is not None and c.target != ALL and c.target not in nodes:
                raise ValueError(
                    f"change {i}: state names {shown_name(c.target)}: only a node's access link can go down"
                )
            if c.member is not None and c.target not in nodes:
                raise ValueError(f"change {i}: member names {shown_name(c.target)}, which is a link, not a node")
        self._check_members(len(nodes))

    def _check_members(self, nodes: int) -> None:
        """ValueError when a leave would leave fewer than MIN_MEMBERS of ``nodes`` nodes in the run."""
        away: frozenset[str] = frozenset()
        for i, c in enumerate(self.changes, start=1):
            away = away_after(away, c)
            if nodes - len(away) < MIN_MEMBERS:
                raise ValueError(
                    f"change {i}: every node has left: at least {MIN_MEMBERS} must stay to train and heal from"
                )

    def describe(self) -> dict:
        """What run.json records: where it came from, how many changes, and every change."""
        return {
            "source": self.source,
            "note": self.note,
            "changes": [c.model_dump(exclude_none=True) for c in self.changes],
        }
