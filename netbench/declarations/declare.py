"""``netbench.declare_payload``: a user's program says which replicator's wire format its exchange follows.

Lives beside the replicators' declarations because it checks the settings against them; the step API
(:mod:`netbench.steps`) records what it is given.
"""

from __future__ import annotations

from typing import Any

from netbench import steps

__all__ = ["declare_payload"]


def declare_payload(what: Any, replicator: str | None = None, **settings: Any) -> None:
    """Say what one step sends, so the model's prediction appears beside the measurement.

    ``what``: the model (``nn.Module``), its tensors, or ``{name: shape}``; ``replicator`` and
    ``settings``: the netbench replicator whose wire format the program's exchange follows (None: the dense
    baseline, a plain ``all_reduce`` of every gradient each step). Checked at once (a typo raises here);
    recorded only under ``netbench exec``. A netbench replicator used in a step declares itself.
    """
    from netbench.declarations.config import ReplicatorConfig  # late: pydantic, not torch
    from netbench.declarations.registry import (  # late: loaded when a program declares
        baseline,
    )  # late: loaded when a program declares

    config = ReplicatorConfig(name=replicator or baseline(), **settings)
    steps.declare(config.model_dump(), what, "declare_payload")
