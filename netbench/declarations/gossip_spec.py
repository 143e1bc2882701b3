"""The gossip replicator's declaration (NoLoCo, arXiv 2506.10911): local steps, then every ``sync_every`` steps each
node exchanges its outer anchor and its pseudo-gradient with one partner and takes an outer step toward the pair's
mean; no collective spans every node.

Every node draws the same pairing from the shared seed and the step (:func:`pairs`), so nobody coordinates it, and
the model can price the very pairs a run makes. Each node sends ``[anchor | delta]`` (two values a parameter in
``grad_dtype``) to its partner and receives the partner's: one symmetric exchange, ``2 P`` values each way whatever
the node count. The reference requires an even node count; here, of an odd number of nodes one sits each sync out
(the permutation's last: it takes its outer step on its own anchor and delta, as a single node does), so a node
sends ``(N - 1) / N`` of the declared bytes on average over the syncs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.shared_settings import GradSettings, OuterMomentumSettings, SeedSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

__all__ = ["GossipSettings", "SPEC", "pairs", "partner"]

VALUES_PER_PARAM = 2  # the anchor and the delta


def pairs(world_size: int, step: int, seed: int) -> list[tuple[int, int]]:
    """The pairs of the sync that ends 1-based ``step``: a permutation of the ranks drawn from ``seed`` and ``step``
    alike on every rank, its first half paired with its second (``perm[i]`` with ``perm[i + N // 2]``, the reference's
    ``batched(perm, 2)``). Of an odd number of ranks the permutation's last sits the sync out."""
    order = list(range(world_size))
    random.Random(f"gossip:{seed}:{step}").shuffle(order)
    half = world_size // 2
    return [(order[i], order[i + half]) for i in range(half)]


def partner(rank: int, world_size: int, step: int, seed: int) -> int:
    """The rank ``rank`` exchanges with at the sync that ends ``step``; itself where it sits the sync out."""
    for a, b in pairs(world_size, step, seed):
        if rank in (a, b):
            return b if rank == a else a
    return rank


def seeded_pairs(config: Settings, world_size: int, step: int) -> list[tuple[int, int]]:
    """:func:`pairs` with the settings' seed (the declaration's ``pairing``)."""
    return pairs(world_size, step, config.seed)


def period(config: Settings) -> int:
    return config.sync_every


def state_bytes(config: Settings) -> float:
    """AdamW's moments (8), the anchor, the flat parameters and the outer momentum (12), fp32; the send and receive
    buffers, each the anchor and the delta in grad_dtype."""
    return 20 + 2 * VALUES_PER_PARAM * DTYPE_BYTES[config.grad_dtype]


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    """What a paired node sends at a sync (of an odd number of nodes, the one that sits out sends nothing)."""
    numel = sum(s.numel for s in shapes)
    return PayloadDecl("pairwise", VALUES_PER_PARAM * numel * DTYPE_BYTES[config.grad_dtype], period=config.sync_every)


class GossipSettings(GradSettings, OuterMomentumSettings, SeedSettings):
    """Gossip's settings: its period and outer step (DiLoCo's), the exchange's dtype and the pairing's seed."""


SPEC = ReplicatorSpec(
    # counted from the operations: the flat gather and scatter, the delta, the send buffer's casts and the outer step,
    # about ten fp32 reads and writes a parameter a sync (an estimate, no measured profile)
    codec_bytes_per_param=40,
    state_bytes_per_param=state_bytes,
    name="gossip",
    summary="local steps; every sync_every steps each node averages anchor and pseudo-gradient with one seeded "
    "partner (NoLoCo)",
    collective="periodic pairwise exchange",
    payload=payload,
    codec="netbench.replicators.gossip:GossipReplicator",
    order=9,
    settings=GossipSettings,
    test_preset=TestPreset(
        check=dict(sync_every=2, lr=0.01),
        train=dict(sync_every=10, lr=0.005, outer_momentum=0.5),
        variants={"bf16": dict(sync_every=3, grad_dtype="bf16")},
    ),
    cost_settings=("sync_every", "grad_dtype"),  # the period: its average divides by it
    period=period,
    pairing=seeded_pairs,
)
