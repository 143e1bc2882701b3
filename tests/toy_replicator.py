"""A replicator added from one module, as a user would: its declaration (torch-free) and a trivial codec.

The declaration registers itself on import; the codec (a dense all-reduce in bf16 halves, by reusing the
dense baseline's implementation) is built only when ``netbench.declarations.registry`` first asks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbench.declarations.registry import register
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings
from netbench.dtypes import DTYPE_BYTES
from netbench.shapes import ParamShape


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return PayloadDecl("all_reduce", sum(s.numel for s in shapes) * DTYPE_BYTES[config.grad_dtype])


SPEC = register(
    ReplicatorSpec(
        name="toy",
        summary="every gradient, all-reduced (a test's own replicator)",
        collective="toy all-reduce",
        payload=payload,
        codec=f"{__name__}:ToyReplicator",
        options=("grad_dtype",),
        cost_settings=("grad_dtype",),
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
