"""The membership track: which nodes took part over time, for a run through leaves and joins.

A node that leaves (its workers killed) and joins again (fresh workers) is a fact of the cluster, not of any one
rank's steps: its rank simply records nothing while it is away. So the trace gets one process of its own, with an
instant event at every leave and join the run applied (run.json's ``cluster.schedule.applied``, stamped with the wall
time it took effect) and a counter of the nodes present after each. Each rank's steps carry their quorum's figures
in their arguments (:mod:`netbench.trace.ranks`).
"""

from __future__ import annotations

from typing import Any

from netbench.trace import events as ev

__all__ = ["membership_events"]

CHANGES = {"left": -1, "joined": +1}  # the last word of an applied membership change, and what it does to the count


def membership_events(run_json: dict[str, Any], origin: float, nodes: int) -> list[ev.Event]:
    """The membership process (empty for a run with no leave or join): each change an instant event at the wall time
    it took effect, and the nodes present as a counter from the first measured step on."""
    applied = ((run_json.get("cluster") or {}).get("schedule") or {}).get("applied") or []
    changes = [
        (float(c["wall_time"]) - origin, str(c["what"]), CHANGES[str(c["what"]).rsplit(" ", 1)[-1]])
        for c in applied
        if isinstance(c, dict)
        and isinstance(c.get("wall_time"), (int, float))
        and str(c.get("what", "")).rsplit(" ", 1)[-1] in CHANGES
    ]
    if not changes:
        return []
    out = ev.process(ev.MEMBERSHIP_PID, "membership", 950) + ev.thread(ev.MEMBERSHIP_PID, 1, "leaves and joins")
    present = nodes
    out.append(ev.counter(ev.MEMBERSHIP_PID, "nodes present", 0.0, nodes=present))
    for t_s, what, step in sorted(changes):
        present += step
        out.append(ev.instant(ev.MEMBERSHIP_PID, 1, what, t_s, "membership"))
        out.append(ev.counter(ev.MEMBERSHIP_PID, "nodes present", t_s, nodes=present))
    return out
