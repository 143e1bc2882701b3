"""The local work a sharded-weights step waits for: per piece of compute between two of FSDP's collectives, the
slowest rank of the sharding group (steps.csv's ``intra_segments_s``).

Every gather and reduce-scatter FSDP runs inside forward and backward is a collective of the sharding group: it
starts only when every rank of the group has reached it, so each layer waits for the slowest rank's compute of that
layer. When which rank is slowest changes from layer to layer (ranks sharing a host's cores take turns on them), the
sum over layers of the slowest rank's piece exceeds the slowest rank's whole compute, which is what a step without
collectives inside its compute waits for.
"""

from __future__ import annotations

import pandas as pd

from netbench.rundir.steps_schema import Col, numbers_of

__all__ = ["slowest_pieces_s"]


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
