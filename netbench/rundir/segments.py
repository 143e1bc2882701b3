"""The local work a step waits for, where the ranks wait for each other less often than once a step:

* a sharded-weights step (:func:`slowest_pieces_s`): per piece of compute between two of FSDP's collectives, the
  slowest rank of the sharding group (steps.csv's ``intra_segments_s``);
* a replicator that exchanges every few steps (:func:`slowest_between_syncs_s`): the ranks run their local steps
  without waiting for one another and meet at the exchange, so a stretch of steps up to it takes the slowest rank's
  local work over the whole stretch.

Every gather and reduce-scatter FSDP runs inside forward and backward is a collective of the sharding group: it
starts only when every rank of the group has reached it, so each layer waits for the slowest rank's compute of that
layer. When which rank is slowest changes from layer to layer (ranks sharing a host's cores take turns on them), the
sum over layers of the slowest rank's piece exceeds the slowest rank's whole compute, which is what a step without
collectives inside its compute waits for.
"""

from __future__ import annotations

import pandas as pd

from netbench.rundir.steps_schema import Col, numbers_of

__all__ = ["slowest_pieces_s", "slowest_between_syncs_s"]


def slowest_pieces_s(measured: pd.DataFrame) -> pd.Series | None:
    """Per step: the largest over sharding groups of the sum over pieces of the group's slowest rank's piece; None
    where the steps hold no pieces. A group whose ranks recorded different numbers of pieces counts its slowest
    rank's whole compute."""
    if Col.INTRA_SEGMENTS_S not in measured or not measured[Col.INTRA_SEGMENTS_S].notna().any():
        return None
    group = measured[Col.SHARD_GROUP] if Col.SHARD_GROUP in measured else pd.Series(0, index=measured.index)
    pieces = measured[Col.INTRA_SEGMENTS_S].map(numbers_of)
    out: dict[int, float] = {}
    for (step, _), rows in pieces.groupby([measured[Col.STEP], group.fillna(0)]):
        ranks = [p for p in rows if p]
        if not ranks:
            continue
        if len({len(p) for p in ranks}) == 1:
            total = sum(max(piece) for piece in zip(*ranks))
        else:
            total = max(sum(p) for p in ranks)
        out[int(step)] = max(out.get(int(step), 0.0), total)
    return pd.Series(out, dtype=float) if out else None


def slowest_between_syncs_s(steps: pd.DataFrame, local: pd.Series) -> float | None:
    """Local work per step of a run whose ranks meet only on the steps that call a collective: over every whole
    stretch of measured steps from the one after such a step through the next, the slowest rank's ``local`` summed
    over the stretch, added up and divided by the steps those stretches hold (a mean, as a periodic run's step is).

    ``local`` holds each measured row's local work (compute and apply), indexed as ``steps``' rows. Taking the slowest
    rank of each step instead counts a rank's slow step even where another rank is slow on a different step of the
    stretch, and the median of those steps leaves out the stretch's slow steps the mean step holds. None where every
    step calls a collective (a step is its own stretch), no whole stretch of two steps or more was measured, or the
    steps do not record their collectives."""
    if Col.COLLECTIVES not in steps or not steps[Col.COLLECTIVES].notna().any():
        return None
    calls = steps.groupby(Col.STEP)[Col.COLLECTIVES].max().fillna(0) > 0
    measured = sorted(int(s) for s in steps.loc[local.index, Col.STEP].unique())
    if not measured or all(calls.get(s, False) for s in measured):
        return None
    by_step_rank = local.groupby([steps.loc[local.index, Col.STEP], steps.loc[local.index, Col.RANK]]).sum()
    total, count, stretch = 0.0, 0, []
    whole = measured[0] == 0 or bool(calls.get(measured[0] - 1, False))  # the first stretch begins after a call
    for step in measured:
        if stretch and step != stretch[-1] + 1:  # a gap in the steps: the stretch is not whole
            stretch, whole = [], False
        stretch.append(step)
        if calls.get(step, False):
            if whole and len(stretch) > 1:
                total += float(by_step_rank.loc[stretch].groupby(level=1).sum().max())
                count += len(stretch)
            stretch, whole = [], True
    return total / count if count else None
