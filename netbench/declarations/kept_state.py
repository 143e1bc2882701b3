"""What the base optimizer keeps from one step to the next, for the declarations of the replicators that heal.

A node that joins a training under way must receive the kept state (:class:`~netbench.declarations.spec.KeptState`)
from a live peer (a heal) before it can take a step, and the planner's memory check adds it up; both read it from
the replicator's declaration, which builds it from the base optimizer's here and its own.
"""

from __future__ import annotations

from netbench.declarations.spec import STATE_ITEM_BYTES, KeptState, Settings

__all__ = ["KeptState", "STATE_ITEM_BYTES", "inner_optimizer_state"]


def inner_optimizer_state(config: Settings, default: str = "adamw") -> KeptState:
    """What the base optimizer keeps (:func:`netbench.replicators.optim.build_optimizer`): AdamW its two moments and
    a step count per tensor (torch keeps it as an fp32 scalar tensor), plain SGD nothing, the decoupled AdamW its two
    moments (its step count is one Python int)."""
    kind = default if config.optimizer == "auto" else config.optimizer
    if kind == "sgd":
        return KeptState()
    if kind == "decoupled_adamw":
        return KeptState(copies=2)
    return KeptState(copies=2, scalars=1)
