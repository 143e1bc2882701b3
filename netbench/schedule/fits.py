"""Whether a schedule fits the cluster it is to run on: checked when the run's configuration is made."""

from __future__ import annotations

from netbench.emulation.spec import ClusterSpec
from netbench.schedule.model import Schedule

__all__ = ["check_fits", "check_whole_membership"]


def check_fits(schedule: Schedule, cluster: ClusterSpec) -> None:
    """ValueError (one line) for a target the network lacks, or a change this cluster cannot make while running.

    Delay, jitter and loss change in the delay line, which must then be running from the start on every uplink: the
    one-switch network with a delay (``--delay``), on the delay line engine.
    """
    graph = cluster.topology
    schedule.check_targets(graph)
    if not schedule.changes_delay:
        return
    if len(graph.switches) > 1:
        raise ValueError("changes delay, jitter or loss: supported on a network of one switch (the star) only")
    if not all(graph.access_link(i).forward.impaired for i in range(graph.node_count)):
        raise ValueError(
            "changes delay, jitter or loss: start the run with a delay on the uplinks (e.g. --delay 1ms) so "
            "the delay line runs"
        )
    if cluster.engine == "netem":
        raise ValueError(
            "changes delay, jitter or loss: needs the delay line engine (--engine delayline or auto), not netem"
        )


def check_whole_membership(schedule: Schedule | None) -> None:
    """ValueError (one line) for a schedule where nodes leave and join, given to a sweep: its points train with every
    node throughout; ``netbench run`` (full, diloco) and ``netbench exec`` apply leaves and joins."""
    if schedule is not None and schedule.changes_members:
        raise ValueError(
            "nodes leave and join (member rows or --churn): a sweep's points train with every node throughout; "
            "netbench run (-r full or diloco) and netbench exec apply them"
        )
