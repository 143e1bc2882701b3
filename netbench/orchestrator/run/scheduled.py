"""A run's link schedule, as the run's phases meet it: started with the cluster, ticked by the watch, handed to workers.

The schedule itself and how it is applied live in :mod:`netbench.schedule`; this module is the few calls
:mod:`netbench.orchestrator.run.runner` makes, so that a run without a schedule does exactly what it did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from netbench.schedule.live import LaunchClock, LiveSchedule, OnMember
from netbench.schedule.state import node_phases

if TYPE_CHECKING:
    from netbench.emulation.cluster import Cluster
    from netbench.orchestrator.config import RunConfig
    from netbench.rundir.layout import RunDir

__all__ = ["start", "polling", "compute_phases", "describe"]


def start(
    config: RunConfig,
    cluster: Cluster,
    run_dir: RunDir,
    dilation: float,
    on_member: OnMember | None = None,
    clock: LaunchClock | None = None,
) -> LiveSchedule | None:
    """The schedule on ``cluster`` with its time-0 changes applied (before any worker starts); None without one.
    ``on_member``: what a node's leave or join does to its processes (`netbench exec`'s); ``clock``: its time 0, if not
    rank 0's first measured step."""
    if config.schedule is None:
        return None
    live = LiveSchedule(
        cluster,
        config.schedule,
        config.cluster.topology,
        dilation,
        run_dir.schedule_csv,
        run_dir.records_path(0),
        on_member,
        clock,
    )
    live.begin()
    return live


def polling(check: Callable[[], None], live: LiveSchedule | None) -> Callable[[], None]:
    """The watch loop's poll: the cluster's own check, then the schedule's tick."""
    if live is None:
        return check

    def poll() -> None:
        check()
        live.tick()

    return poll


def compute_phases(config: RunConfig, node: int, dilation: float) -> tuple[tuple[float, float], ...]:
    """Node ``node``'s straggler phases for its worker, times stretched by the dilation; () where it never changes."""
    if config.schedule is None or all(c.compute_scale is None for c in config.schedule.changes):
        return ()
    return tuple((t * dilation, scale) for t, scale in node_phases(config.schedule, config.cluster.topology, node))


def describe(live: LiveSchedule | None) -> dict[str, Any]:
    """run.json's record of the changes as applied (nothing without a schedule)."""
    return {"schedule": live.describe()} if live is not None else {}
