"""A run's length priced phase by phase: the steps that open it (1-bit Adam's dense warm-up) at their own step time,
the rest at the lasting phase's.

A replicator whose declaration ends a phase (:meth:`netbench.declarations.spec.PayloadDecl.dense_steps`) makes a
different step there than in the phase a long run keeps; the per-step model prices the lasting one, so a run's wall
time adds the opening steps at theirs.
"""

from __future__ import annotations

__all__ = ["run_time_s"]


def run_time_s(steps: float, dense_steps: int, dense_step_s: float, step_s: float) -> float:
    """Wall time of the first ``steps`` steps: up to ``dense_steps`` of them at ``dense_step_s``, the rest at
    ``step_s``."""
    opening = min(steps, dense_steps)
    return opening * dense_step_s + (steps - opening) * step_s
