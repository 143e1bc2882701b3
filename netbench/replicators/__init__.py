"""Gradient replicators: how ranks turn local gradients into one synchronised optimizer step (torch).

Each replicator is declared once, without torch, in :mod:`netbench.declarations`; the declaration names its codec
here. ``build_replicator(params, config, group)`` gives a :class:`Replicator` whose ``step()`` reads ``p.grad``,
synchronises across the group and applies the base optimizer.
Importing this package imports nothing else: each name below loads when first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_replicator", "replicator_class", "Replicator", "StepStats"]

# Each name, and the module it comes from: imported when first asked for, so importing one codec module does not
# import every other.
_HOMES = {
    "build_replicator": "build",
    "replicator_class": "build",
    "Replicator": "base",
    "StepStats": "base",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
