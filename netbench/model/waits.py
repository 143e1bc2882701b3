"""How long a wait on peers may last: the model's time for what is awaited, with room for a loaded host.

A run's collective timeout and torchft's waits under churn are both set from the model, SAFETY x its time for the
slowest thing a node waits for, so that a wait ends soon after a peer is gone but never while a peer is only slow.
Under churn such a wait is also what a leave at the wrong moment costs the nodes that stay
(:mod:`netbench.model.goodput`): `run` sets it and `plan` prices it by the same rule.
"""

from __future__ import annotations

__all__ = ["SAFETY", "EXCHANGE_FLOOR_S", "exchange_timeout_s"]

SAFETY = 4.0  # measured collectives come within ~20% of the model; 4x leaves room for host load
EXCHANGE_FLOOR_S = 5.0  # a wait on peers under churn: a peer finishing its step (the default workload takes 0.1 s)


def exchange_timeout_s(slowest_s: float, floor_s: float = EXCHANGE_FLOOR_S) -> float:
    """A torchft wait on peers under churn: SAFETY x ``slowest_s`` (the longer of the slowest collective call and a
    heal's largest message), never below ``floor_s``."""
    return max(floor_s, SAFETY * slowest_s)
