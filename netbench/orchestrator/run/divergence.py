"""Whether a run's training diverged: the step from which its loss is not a number on every node.

A diverged run still ends its steps (its collectives carry NaN as well as numbers, and its times stay honest), so the
network figures alone would pass it: a sweep point or a CI gate would hold the model against a run that trained
nothing. The workers record a loss that is not finite as empty (strict JSON), and once the weights hold a NaN every
later loss is one too; so the first step from which every node's loss is missing, after a step that had one, is where
the training diverged. A run whose loss is never recorded (a workload without one) did not diverge.
"""

from __future__ import annotations

import pandas as pd

from netbench.rundir.steps_schema import Col

__all__ = ["diverged_at_step"]


def diverged_at_step(steps: pd.DataFrame) -> int | None:
    """The first step (warm-up included) from which no node recorded a loss to the end of the run, where an earlier
    step recorded one; None where the loss stayed a number (or was never recorded)."""
    if steps.empty or Col.LOSS not in steps:
        return None
    has_loss = steps[Col.LOSS].notna().groupby(steps[Col.STEP]).any().sort_index()
    if not has_loss.any() or has_loss.iloc[-1]:
        return None
    last_with_loss = has_loss[has_loss].index.max()
    return int(has_loss.index[has_loss.index > last_with_loss].min())
