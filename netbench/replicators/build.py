"""The torch implementation a declaration names, loaded and built for a set of parameters.

The declarations (:mod:`netbench.declarations.registry`) know every replicator without torch; these two entry
points are the only ones that import a codec (``ReplicatorSpec.codec``) and so torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from netbench.declarations.registry import spec
from netbench.declarations.spec import Settings

if TYPE_CHECKING:
    import torch

__all__ = ["replicator_class", "build_replicator"]


def replicator_class(name: str) -> type:
    """The torch implementation of ``name`` (a ``ReplicatorConfig.name``), a ``Replicator`` subclass; imports torch."""
    return spec(name).load()


def build_replicator(
    params: Sequence[torch.nn.Parameter], config: Settings, group=None, names: Sequence[str] | None = None
) -> Any:
    """A ready :class:`~netbench.replicators.base.Replicator` for ``params`` on ``group`` (default: the world
    group, or none at all).

    ``names`` (the workload's parameter names, in order) let name-based rules see what the payload
    formula sees in a named shape list (a rule that keeps embeddings element-wise).
    """
    return replicator_class(config.name)(params, config, group, names)
