"""Gradient replicators: how ranks turn local gradients into one synchronised optimizer step.

Each replicator is declared once, without torch (:class:`~netbench.replicators.spec.ReplicatorSpec`,
in its ``*_spec`` module); :mod:`~netbench.replicators.registry` collects the declarations.
``build_replicator(params, config, group)`` gives a :class:`Replicator` whose ``step()`` reads
``p.grad``, synchronises across the group and applies the base optimizer; ``declared_payload``
is each replicator's wire formula, shared with the analytic model (``netbench.model``).
Importing this package imports nothing else: each name below loads when first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "build_replicator",
    "declared_payload",
    "replicator_class",
    "names",
    "spec",
    "PayloadDecl",
    "ReplicatorSpec",
    "Replicator",
    "StepStats",
    "ReplicatorConfig",
    "REGISTRY",
]

# Each name, and the module it comes from: imported when first asked for, so importing a declaration's
# module (netbench.replicators.spec, .registry) neither builds ReplicatorConfig before every declaration
# is registered nor imports torch (only .base does).
_HOMES = {
    "build_replicator": "registry",
    "declared_payload": "registry",
    "replicator_class": "registry",
    "names": "registry",
    "spec": "registry",
    "REGISTRY": "registry",
    "PayloadDecl": "spec",
    "ReplicatorSpec": "spec",
    "ReplicatorConfig": "config",
    "Replicator": "base",
    "StepStats": "base",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
