"""netbench: emulate a cluster on one machine, train across it, measure and model the wire.

``netbench.step``, ``netbench.mark_step``, ``netbench.phase`` and ``netbench.declare_payload`` are
the step API for programs run under ``netbench exec`` (:mod:`netbench.steps`, standard library only).
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["step", "mark_step", "phase", "declare_payload"]


def __getattr__(name: str) -> Any:
    if name == "declare_payload":  # it checks settings against the replicators' declarations
        from netbench.replicators.declare import declare_payload

        return declare_payload
    if name in __all__:
        from netbench import steps

        return getattr(steps, name)
    raise AttributeError(f"module 'netbench' has no attribute {name!r}")
