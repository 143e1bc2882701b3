"""The DiLoCo replicator's declaration: local steps, then an all-reduce of the pseudo-gradient every ``sync_every``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.dtypes import DTYPE_BYTES
from netbench.replicators.spec import PayloadDecl, ReplicatorSpec, Settings

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    return config.sync_every


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    itemsize = DTYPE_BYTES[config.grad_dtype]
    return PayloadDecl("all_reduce", sum(s.numel for s in shapes) * itemsize, period=config.sync_every)


SPEC = ReplicatorSpec(
    codec_bytes_per_param=8,
    name="diloco",
    summary="local steps; every sync_every steps the pseudo-gradient is all-reduced and an outer step taken",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.diloco:DiLoCoReplicator",
    order=4,
    options=("grad_dtype", "sync_every", "outer_lr", "outer_momentum"),
    cost_settings=("sync_every", "grad_dtype"),  # the period: its per-step average divides by it
    color="#ff7f0e",
    period=period,
)
