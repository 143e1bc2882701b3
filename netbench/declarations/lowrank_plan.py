"""Which tensors the lowrank (Dion) replicator factorises, and the bytes that costs.

Pure shape arithmetic, shared by the replicator's buffers and its payload declaration (hence
by ``netbench plan``), so the two cannot disagree:

* a tensor with two or more dimensions is a matrix, viewed as m x n (m = first dimension, n =
  the rest, as :mod:`netbench.declarations.tiling` tiles them); its rank is ``rank`` itself when that is
  at least 1, else ``ceil(rank * min(m, n))``, never above min(m, n);
* a matrix is *factored* (P: m x r and R: n x r on the wire) when (m + n) r < m n, otherwise
  the whole momentum-plus-gradient matrix is all-reduced densely; both give the same update;
* 1-D tensors, scalars and embeddings are *element-wise*: their gradient is all-reduced densely
  and applied by an element-wise optimizer, as Dion prescribes.

The embedding rule is by name, because a shape cannot say which matrix is indexed by tokens: a
parameter is an embedding when a part of its dotted/underscored name starts with ``emb`` or
``unemb`` or is ``wte``, ``wpe`` or ``head`` (GPT-2's ``wte``/``wpe``, Llama's ``embed`` and
``lm_head``, netbench's TinyGPT ``tok_emb``/``pos_emb``/``head``). Unnamed parameters
(``p0, p1, ...``) are never embeddings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from netbench.shapes import ParamShape

__all__ = ["is_embedding", "effective_rank", "MatrixSlot", "LowRankPlan"]

_EMBEDDING_PARTS = frozenset({"wte", "wpe", "head"})


def is_embedding(name: str) -> bool:
    """Whether parameter ``name`` is an (un)embedding table, by the naming rule above."""
    parts = [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]
    return any(p.startswith(("emb", "unemb")) or p in _EMBEDDING_PARTS for p in parts)


def effective_rank(m: int, n: int, rank: float) -> int:
    """Rank for an m x n matrix: absolute (>= 1) or a fraction of min(m, n); within [1, min(m, n)]."""
    side = min(m, n)
    r = int(rank) if rank >= 1 else math.ceil(rank * side)
    return max(1, min(r, side))


@dataclass(frozen=True)
class MatrixSlot:
    """One orthonormalised tensor: its index among the parameters, its m x n view and rank."""

    index: int
    m: int
    n: int
    r: int

    @property
    def factored(self) -> bool:
        """Sent as P and R factors (cheaper than the dense matrix)."""
        return (self.m + self.n) * self.r < self.m * self.n

    @property
    def first_round(self) -> int:
        """Values this matrix puts in the first all-reduce: P (m x r), or the whole matrix."""
        return self.m * self.r if self.factored else self.m * self.n


@dataclass(frozen=True)
class LowRankPlan:
    """Every parameter classified: orthonormalised matrices, and element-wise tensors."""

    matrices: tuple[MatrixSlot, ...]
    elementwise: tuple[int, ...]
    numels: tuple[int, ...]

    @classmethod
    def from_shapes(cls, shapes: Sequence[ParamShape], rank: float) -> LowRankPlan:
        matrices, elementwise = [], []
        for i, s in enumerate(shapes):
            if len(s.shape) < 2 or is_embedding(s.name) or s.numel == 0:
                elementwise.append(i)
                continue
            m, n = s.shape[0], s.numel // s.shape[0]
            matrices.append(MatrixSlot(i, m, n, effective_rank(m, n, rank)))
        return cls(tuple(matrices), tuple(elementwise), tuple(s.numel for s in shapes))

    @property
    def first_round_values(self) -> int:
        """All-reduced in round one: every P, every densely sent matrix and every element-wise tensor."""
        return sum(s.first_round for s in self.matrices) + sum(self.numels[i] for i in self.elementwise)

    @property
    def second_round_values(self) -> int:
        """All-reduced in round two: R (n x r) of every factored matrix."""
        return sum(s.n * s.r for s in self.matrices if s.factored)
