"""A replicator added from one module through CONTRIBUTING's recipe: its settings class, its declaration (torch-free,
with the test preset the registry-parametrized tests run it with) and its codec.

The declaration registers itself on import, before the config is composed (so import this module before
``netbench.declarations.config``); the codec (the dense baseline's implementation under another name) is built only
when ``netbench.declarations.registry`` first asks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbench.declarations.registry import register
from netbench.declarations.shared_settings import GradSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES
from netbench.shapes import ParamShape


class ToySettings(GradSettings):
    """The toy's settings: the dense baseline's wire dtype, shared, and nothing of its own."""


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return PayloadDecl("all_reduce", sum(s.numel for s in shapes) * DTYPE_BYTES[config.grad_dtype])


SPEC = register(
    ReplicatorSpec(
        name="toy",
        summary="every gradient, all-reduced (a test's own replicator)",
        collective="toy all-reduce",
        payload=payload,
        codec=f"{__name__}:ToyReplicator",
        settings=ToySettings,
        cost_settings=("grad_dtype",),
        test_preset=TestPreset(check=dict(optimizer="sgd", lr=0.1), train=dict(lr=0.01)),
    )
)


def __getattr__(name: str) -> Any:
    """``ToyReplicator``, built on first use (it needs torch; the declaration above does not)."""
    if name != "ToyReplicator":
        raise AttributeError(name)
    from netbench.replicators.full import FullReplicator

    class ToyReplicator(FullReplicator):
        """The dense baseline under another name."""

        name = "toy"

    globals()[name] = ToyReplicator
    return ToyReplicator
