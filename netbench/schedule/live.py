"""Applying a schedule to a running cluster: qdiscs changed in place, the delay line told, links set down and up.

The schedule's clock starts when the first measured step begins; the orchestrator learns that time from rank 0's
records (the first post-warm-up step's ``t_start``, :class:`FirstMeasuredStep`), so nothing extra runs in the
workers. Changes at time 0 are applied before the workers start, so warm-up runs on the first segment's network.
:meth:`LiveSchedule.tick` runs in the orchestrator's watch loop (every 0.1 s): each segment whose time has come is
applied -- the rate of every egress whose direction changed (``tc qdisc change`` of its tbf, sized as at build time),
the delay line's ports (:mod:`netbench.emulation.delaycontrol`), link state (the switch side of a node's link, as a
fault test does) -- and logged with the wall time it took effect (schedule.csv). Under time dilation k, times run k
times longer, rates k times slower and delays k times longer, as the run's own links.

A node's compute speed is not changed from here: each worker paces its own phases from the schedule's node phases
(:func:`netbench.pacing.scale_at`), on its own clock from its first measured step. Nor are a node's processes: a
node that leaves or joins is handed to the launcher's ``on_member`` (stop its processes, start fresh ones), after
the segment's link changes are made, so a joining node starts on the network then in force.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from netbench import safe_files
from netbench.emulation import acksfirst, delaycontrol
from netbench.emulation.shaping import TbfParams, root_qdisc
from netbench.rundir.steps_schema import Col
from netbench.schedule.model import Schedule, Segment
from netbench.schedule.state import segments
from netbench.topology.graph import Topology
from netbench.topology.link import DirectionSpec
from netbench.units import format_rate

__all__ = ["Egress", "egresses", "LiveSchedule", "FirstMeasuredStep", "LaunchClock", "LOG_COLUMNS", "OnMember"]

LOG_COLUMNS = ("segment", "time_s", "wall_time", "late_s", "what")
OnMember = Callable[[int, bool], None]  # (node index, True: it joins / False: it leaves)


@dataclass(frozen=True)
class Egress:
    """One shaped direction of one link: the namespace it leaves from and the interface it leaves by."""

    link: str
    forward: bool
    holder: Any  # a Node or Switch: its .call runs a function in its namespace
    iface: str


def egresses(cluster: Any) -> list[Egress]:
    """Every shaped egress of ``cluster``: a node's uplink on the node, everything else on a switch port."""
    graph = cluster.spec.topology
    out = [Egress(graph.access_link(n.index).name, True, n, n.iface) for n in cluster.nodes]
    for k, switch in enumerate(cluster.switches):
        out += [Egress(p.link, p.egress_forward, switch, p.name) for p in cluster.fabric.ports_of(k)]
    return out


class FirstMeasuredStep:
    """Reads rank 0's records as they grow until the first post-warm-up step appears; its ``t_start`` is time 0."""

    def __init__(self, records: Path) -> None:
        self.records, self.offset, self.t0 = records, 0, None

    def poll(self) -> float | None:
        if self.t0 is not None:
            return self.t0
        try:
            with open(self.records, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return None
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            record = json.loads(line)
            if record.get("event") == "step" and not record.get(Col.WARMUP):
                self.t0 = float(record[Col.T_START])
                break
        return self.t0


class LaunchClock:
    """Time 0 at the programs' start (:meth:`start`), for a program that records no steps (`exec --schedule-clock
    start`): its schedule runs on the wall clock from its launch."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def start(self) -> None:
        self.t0 = time.time()

    def poll(self) -> float | None:
        return self.t0


class LiveSchedule:
    """One run's schedule on its cluster: :meth:`begin` before the workers start, :meth:`tick` while they run."""

    def __init__(
        self,
        cluster: Any,
        schedule: Schedule,
        graph: Topology,
        dilation: float,
        log_path: Path | None,
        records: Path | None,
        on_member: OnMember | None = None,
        clock: LaunchClock | None = None,
    ) -> None:
        """``graph``: the network as asked (undilated); ``dilation``: the run's k; without ``records`` only
        :meth:`apply` runs it; ``on_member``: what a node's leave or join does to its processes; ``clock``: where its
        time 0 is, if not at ``records``' first measured step.
        """
        self.cluster, self.k, self.log_path, self.on_member = cluster, dilation, log_path, on_member
        self.segments = segments(schedule, graph)
        self.egresses = egresses(cluster)
        self.clock = clock or (FirstMeasuredStep(records) if records is not None else None)
        self.applied = -1  # the last segment applied
        self.in_force = graph
        self.down: frozenset[str] = frozenset()
        self.away: frozenset[str] = frozenset()
        self.log: list[dict[str, Any]] = []

    def begin(self) -> None:
        """Apply the segment at time 0, if any, before warm-up; write the (so far) log."""
        if self.segments and self.segments[0].start_s == 0:
            self._apply(self.segments[0], due=None)
        self._write()

    def tick(self) -> None:
        """Apply every segment whose time has come (a no-op until the first measured step has begun)."""
        t0 = self.clock.poll() if self.clock is not None else None
        if t0 is None:
            return
        while self.applied + 1 < len(self.segments):
            segment = self.segments[self.applied + 1]
            due = t0 + segment.start_s * self.k
            if time.time() < due:
                return
            self._apply(segment, due)
            self._write()

    def apply(self, segment: Segment) -> None:
        """Apply ``segment`` now, whatever its time (``probe --schedule`` measures each segment in turn)."""
        self._apply(segment, due=None)
        self._write()

    def _apply(self, segment: Segment, due: float | None) -> None:
        what = (
            self._rates(segment)
            + self._delays(segment)
            + self._states(segment)
            + self._compute(segment)
            + self._members(segment)
        )
        now = time.time()
        self.log.append(
            {
                "segment": segment.index,
                "time_s": segment.start_s,
                "wall_time": round(now, 4),
                "late_s": round((now - due) / self.k, 4) if due is not None else "",
                "what": "; ".join(what) or "nothing changed on the links",
            }
        )
        self.applied, self.in_force, self.down, self.away = segment.index, segment.graph, segment.down, segment.away

    def _direction(self, graph: Any, egress: Egress) -> DirectionSpec:
        return graph.link(egress.link).direction(egress.forward)

    def _rates(self, segment: Segment) -> list[str]:
        """``tc qdisc change`` of every egress whose rate changed, one forked call per namespace."""
        by_holder: dict[str, tuple[Any, list[tuple[str, float]]]] = {}
        for e in self.egresses:
            rate = self._direction(segment.graph, e).rate_bps
            if rate != self._direction(self.in_force, e).rate_bps:
                by_holder.setdefault(e.holder.netns, (e.holder, []))[1].append((e.iface, rate / self.k))
        offload = self.cluster.spec.offload_enabled
        for holder, changes in by_holder.values():
            holder.call(_change_rates, changes, offload)
        rates = sorted({rate * self.k for _, changes in by_holder.values() for _, rate in changes})
        return (
            [f"rate {','.join(format_rate(r) for r in rates)} on {sum(len(c) for _, c in by_holder.values())} egresses"]
            if rates
            else []
        )

    def _delays(self, segment: Segment) -> list[str]:
        """The delay line's ports from the segment's node uplinks (a one-switch network: checked beforehand)."""
        line_of = getattr(self.cluster.impairment, "line_of", None)
        line = line_of(0) if line_of is not None else None
        uplinks = [(n, self.cluster.spec.topology.access_link(n.index).name) for n in self.cluster.nodes]
        new = {n.port: _impairment(segment.graph.link(name).forward, self.k) for n, name in uplinks}
        old = {n.port: _impairment(self.in_force.link(name).forward, self.k) for n, name in uplinks}
        if line is None or line.control_path is None or line.pid is None or new == old:
            return []
        delaycontrol.write(line.control_path, {self.cluster.switch.ifindex[port]: imp for port, imp in new.items()}, {})
        delaycontrol.reload(line.pid)
        delays = sorted({f"{v['delay_s'] / self.k * 1e3:g}ms" for v in new.values()})
        return [f"uplink delay {','.join(delays)}"]

    def _states(self, segment: Segment) -> list[str]:
        """Links that went down or came back up: the switch side of the node's link."""
        out = []
        for i, _node in enumerate(self.cluster.spec.topology.nodes):
            link = self.cluster.spec.topology.access_link(i).name
            now_down, was_down = link in segment.down, link in self.down
            if now_down != was_down:
                self.cluster.set_link(i, up=not now_down)
                out.append(f"{link} {'down' if now_down else 'up'}")
        return out

    def _compute(self, segment: Segment) -> list[str]:
        """Nodes whose compute scale changed: their workers pace themselves (netbench.pacing); logged here."""
        return [
            f"{new.name} compute x{new.compute_scale:g}"
            for old, new in zip(self.in_force.nodes, segment.graph.nodes)
            if old.compute_scale != new.compute_scale
        ]

    def _members(self, segment: Segment) -> list[str]:
        """Nodes that left or joined: the leaves first, then the joins, each handed to ``on_member``."""
        names = [n.name for n in segment.graph.nodes]
        left = [i for i, name in enumerate(names) if name in segment.away and name not in self.away]
        joined = [i for i, name in enumerate(names) if name in self.away and name not in segment.away]
        for i in left + joined:
            if self.on_member is not None:
                self.on_member(i, i in joined)
        return [f"{names[i]} left" for i in left] + [f"{names[i]} joined" for i in joined]

    def _write(self) -> None:
        if self.log_path is None:
            return
        rows = [",".join(LOG_COLUMNS)] + [
            ",".join(str(row[c]).replace(",", " ") for c in LOG_COLUMNS) for row in self.log
        ]
        safe_files.write_text(self.log_path, "\n".join(rows) + "\n")

    def describe(self) -> dict[str, Any]:
        """What run.json records of the changes as applied."""
        return {"applied": self.log, "segments_applied": self.applied + 1, "segments": len(self.segments)}


def _impairment(direction: DirectionSpec, k: float) -> dict[str, float]:
    return {"delay_s": direction.delay_s * k, "jitter_s": direction.jitter_s * k, "loss": direction.loss}


def _change_rates(changes: list[tuple[str, float]], offload: bool) -> None:
    """In this namespace: each interface's tbf to the new rate, burst and limit sized as at build time (in place)."""
    with IPRoute() as ipr:
        for iface, rate_bps in changes:
            index = ipr.link_lookup(ifname=iface)[0]
            tbf = TbfParams.for_rate(rate_bps, offload)
            args = dict(rate=f"{int(rate_bps)}bit", burst=tbf.burst_bytes, limit=tbf.limit_bytes)
            root = root_qdisc(ipr, index)
            if root is not None and root[0] == "netem":  # netem above tbf (Netem engine): the tbf is its child 10:
                ipr.tc("change", "tbf", index=index, handle="10:", parent="1:1", **args)
            else:
                ipr.tc("change", "tbf", index=index, handle="1:", **args)
            acksfirst.resize(ipr, index, tbf.limit_frames)
