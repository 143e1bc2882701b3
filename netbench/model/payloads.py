"""Payload formulas of schemes that are planned but not (yet) implemented as replicators.

These are the declarations a future ``lowrank`` or ``mtdao`` replicator should import, so that
its measured bytes and ``netbench plan``'s predictions come from one formula -- the same contract
the implemented replicators keep through ``netbench.replicators.declared_payload``.

* ``lowrank`` (PowerSGD-style): each matrix, viewed as m x n (m = first dim, n = the rest), is sent
  as rank-r factors P (m x r) and Q (n x r), all-reduced in two rounds; 1-D tensors, and matrices
  where (m + n) r >= m n, are all-reduced densely. r is absolute (>= 1) or a fraction of min(m, n).
* ``mtdao`` (multi-timescale): parameters are all-reduced every K_x steps, the first momentum every
  K_1 and the second momentum every K_v steps; everything dense.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.model.traffic import DTYPE_BYTES, Exchange
from netbench.shapes import ParamShape

__all__ = ["LowRankConfig", "MTDAOConfig", "lowrank_rank", "lowrank_payload", "mtdao_payload", "PLANNED_SCHEMES"]

PLANNED_SCHEMES: tuple[str, ...] = ("lowrank", "mtdao")


class LowRankConfig(BaseModel):
    """Settings of the low-rank scheme."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: float = Field(4, gt=0, description="factor rank r: an integer >= 1, or a fraction (0, 1) of min(m, n)")
    dtype: Literal["fp32", "bf16"] = Field("fp32", description="wire dtype of factors and dense tensors")

    @field_validator("rank")
    @classmethod
    def _integral_when_absolute(cls, v: float) -> float:
        if v >= 1 and v != int(v):
            raise ValueError(f"must be an integer >= 1 or a fraction below 1, got {v:g}")
        return v


class MTDAOConfig(BaseModel):
    """Settings of the multi-timescale scheme: one period per synchronised state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params_every: int = Field(10, ge=1, description="K_x: steps between parameter all-reduces")
    m1_every: int = Field(10, ge=1, description="K_1: steps between first-momentum all-reduces")
    m2_every: int = Field(10, ge=1, description="K_v: steps between second-momentum all-reduces")
    dtype: Literal["fp32", "bf16"] = Field("fp32", description="wire dtype of all three states")


def lowrank_rank(m: int, n: int, rank: float) -> int:
    """Effective rank for an m x n matrix: absolute or a fraction of min(m, n), at least 1, at most min(m, n)."""
    side = min(m, n)
    r = int(rank) if rank >= 1 else math.ceil(rank * side)
    return max(1, min(r, side))


def lowrank_payload(shapes: Sequence[ParamShape], config: LowRankConfig) -> tuple[Exchange, ...]:
    """All-reduced bytes per step: P factors, Q factors (one bucket each) and the dense remainder."""
    size = DTYPE_BYTES[config.dtype]
    p_values = q_values = dense_values = 0
    for s in shapes:
        if len(s.shape) < 2:
            dense_values += s.numel
            continue
        m, n = s.shape[0], s.numel // s.shape[0]
        r = lowrank_rank(m, n, config.rank)
        if (m + n) * r >= m * n:
            dense_values += m * n
        else:
            p_values += m * r
            q_values += n * r
    parts = [("lowrank:P", p_values), ("lowrank:Q", q_values), ("lowrank:dense", dense_values)]
    return tuple(Exchange("all_reduce", v * size, 1, 1, label) for label, v in parts if v)


def mtdao_payload(shapes: Sequence[ParamShape], config: MTDAOConfig) -> tuple[Exchange, ...]:
    """Three dense all-reduces of the whole model on their own periods (x, m1, v)."""
    dense = sum(s.numel for s in shapes) * DTYPE_BYTES[config.dtype]
    return (
        Exchange("all_reduce", dense, config.params_every, 1, "mtdao:params"),
        Exchange("all_reduce", dense, config.m1_every, 1, "mtdao:m1"),
        Exchange("all_reduce", dense, config.m2_every, 1, "mtdao:m2"),
    )
