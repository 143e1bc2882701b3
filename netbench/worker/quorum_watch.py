"""What torchft's lighthouse answered: the quorums a worker's manager formed, and which started the training afresh.

torchft's ``Manager`` reads the lighthouse's quorum (its id, its members, ``max_step``: the furthest step any member
had committed) and keeps none of it. :class:`QuorumWatch` stands in front of the manager's client, hands every call
through and keeps each quorum it returns, so the worker can tell, per step, whether that step's quorum held the
training: a quorum whose ``max_step`` is 0 holds no member past the first weights. After the run's first quorum that
means every node that held the training had left, and the quorum trains afresh (torchft heals nobody: there is no
one ahead to heal from).
"""

from __future__ import annotations

from typing import Any

__all__ = ["QuorumWatch", "started_afresh"]


def started_afresh(max_step: int, run_began: bool) -> bool:
    """Whether a quorum started the training afresh: no member past step 0 (``max_step``, the lighthouse's furthest
    member) in a quorum formed after the run's first (``run_began``; that one starts from the first weights by
    design)."""
    return run_began and max_step == 0


class QuorumWatch:
    """The manager's lighthouse client, every call handed through; keeps the quorums it answered since the last
    :meth:`take_restart`."""

    def __init__(self, client: Any, joining: bool) -> None:
        self._client = client
        self._run_began = joining  # a joining worker's every quorum comes after the run's first
        self._restart: int | None = None

    def _quorum(self, *args: Any, **kwargs: Any) -> Any:
        quorum = self._client._quorum(*args, **kwargs)
        if started_afresh(int(quorum.max_step), self._run_began) and self._restart is None:
            self._restart = int(quorum.quorum_id)
        self._run_began = True
        return quorum

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def take_restart(self) -> int | None:
        """The id of the first quorum since the last call that started the training afresh, or None."""
        found, self._restart = self._restart, None
        return found
