"""Name -> replicator class, and the two entry points everyone else calls."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netbench.replicators.base import PayloadDecl, Replicator
from netbench.replicators.config import ReplicatorConfig
from netbench.replicators.dct import DCTReplicator
from netbench.replicators.diloco import DiLoCoReplicator
from netbench.replicators.full import FullReplicator
from netbench.replicators.lowrank import LowRankReplicator
from netbench.replicators.mtdao import MTDAOReplicator
from netbench.replicators.random_subset import RandomReplicator
from netbench.replicators.striding import StridingReplicator
from netbench.shapes import ParamShape

__all__ = ["REGISTRY", "replicator_class", "build_replicator", "declared_payload"]

REGISTRY: dict[str, type[Replicator]] = {
    cls.name: cls
    for cls in (
        FullReplicator,
        DCTReplicator,
        RandomReplicator,
        StridingReplicator,
        DiLoCoReplicator,
        LowRankReplicator,
        MTDAOReplicator,
    )
}


def replicator_class(name: str) -> type[Replicator]:
    """The class registered under ``name`` (a ``ReplicatorConfig.name``)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown replicator {name!r} (choose from {', '.join(REGISTRY)})") from None


def build_replicator(
    params: Sequence[torch.nn.Parameter], config: ReplicatorConfig, group=None, names: Sequence[str] | None = None
) -> Replicator:
    """A ready replicator for ``params`` on ``group`` (default: the world group, or none at all).

    ``names`` (the workload's parameter names, in order) let name-based rules see what the payload
    formula sees in a named shape list (lowrank treats embeddings element-wise).
    """
    return replicator_class(config.name)(params, config, group, names)


def declared_payload(shapes: Sequence[ParamShape], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
    """Bytes one node hands to collectives per communicating step (every exchange in ``parts()``); pure."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    return replicator_class(config.name).payload(list(shapes), config, world_size)
