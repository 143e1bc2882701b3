"""A schedule's leaves and joins on a launcher's processes: the live schedule's ``on_member`` for `exec` and `run`.

A leave kills the node's processes at once (SIGKILL to their process group: a reclaimed machine says nothing first);
a join starts fresh ones on the same node, numbering their steps after the ones the node already recorded, so that
its record file keeps every step once. What "the node's processes" are is the launcher's: `netbench exec`'s command,
`netbench run`'s worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from netbench.rundir.layout import RunDir, StepCounter

__all__ = ["Membership"]


@dataclass
class Membership:
    """Leaves and joins by node index, handed to the launcher's ``leave(rank)`` and ``join(rank, first_step)``."""

    run_dir: RunDir
    rank_of: Callable[[int], int]  # node index -> the rank it runs
    leave: Callable[[int], None]  # kill the rank's processes (SIGKILL to the group), reaped
    join: Callable[[int, int], None]  # start the rank's processes again, their first step given
    away: set[int] = field(default_factory=set)  # ranks whose node has left and not joined again
    leaves: dict[int, int] = field(default_factory=dict)  # rank -> how often its node left
    joined: dict[int, tuple[int, StepCounter]] = field(default_factory=dict)  # rank -> (first step, its counter)

    def __call__(self, node_index: int, joins: bool) -> None:
        rank = self.rank_of(node_index)
        if not joins:
            self.leave(rank)
            self.away.add(rank)
            self.leaves[rank] = self.leaves.get(rank, 0) + 1
            self.joined.pop(rank, None)
            return
        counter = StepCounter(self.run_dir.records_path(rank))
        first = counter()
        self.join(rank, first)
        self.away.discard(rank)
        self.joined[rank] = (first, counter)

    def waiting(self) -> set[int]:
        """Ranks whose node has joined again but has recorded no step since: still starting, or waiting for its first
        quorum (which a run whose other workers have finished never forms)."""
        return {rank for rank, (first, counter) in self.joined.items() if counter() == first}
