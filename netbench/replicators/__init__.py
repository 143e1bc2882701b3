"""Gradient replicators: how ranks turn local gradients into one synchronised optimizer step.

``build_replicator(params, config, group)`` gives a :class:`Replicator` whose ``step()`` reads
``p.grad``, synchronises across the group and applies the base optimizer; ``declared_payload``
is each replicator's wire formula, shared with the analytic model (``netbench.model``).
"""

from netbench.replicators.base import PayloadDecl, Replicator, StepStats
from netbench.replicators.config import REPLICATOR_NAMES, ReplicatorConfig
from netbench.replicators.dct import DCTReplicator
from netbench.replicators.diloco import DiLoCoReplicator
from netbench.replicators.full import FullReplicator
from netbench.replicators.lowrank import LowRankReplicator
from netbench.replicators.mtdao import MTDAOReplicator
from netbench.replicators.random_subset import RandomReplicator
from netbench.replicators.registry import REGISTRY, build_replicator, declared_payload, replicator_class
from netbench.replicators.striding import StridingReplicator

__all__ = [
    "build_replicator",
    "declared_payload",
    "replicator_class",
    "PayloadDecl",
    "Replicator",
    "StepStats",
    "ReplicatorConfig",
    "REPLICATOR_NAMES",
    "REGISTRY",
    "FullReplicator",
    "DCTReplicator",
    "RandomReplicator",
    "StridingReplicator",
    "DiLoCoReplicator",
    "LowRankReplicator",
    "MTDAOReplicator",
]
