"""The MT-DAO replicator's declaration: parameters and both Adam momenta all-reduced densely, each on its own period."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.dtypes import DTYPE_BYTES
from netbench.replicators.spec import PayloadDecl, ReplicatorSpec, Settings

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    """The shortest of its three periods."""
    return min(config.params_every, config.m1_every, config.m2_every)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    dense = sum(s.numel for s in shapes) * DTYPE_BYTES[config.grad_dtype]
    return PayloadDecl(
        "all_reduce",
        dense,
        period=config.params_every,
        label="params",
        also=(
            PayloadDecl("all_reduce", dense, period=config.m1_every, label="m1"),
            PayloadDecl("all_reduce", dense, period=config.m2_every, label="m2"),
        ),
    )


SPEC = ReplicatorSpec(
    codec_bytes_per_param=0,
    name="mtdao",
    summary="local QH-Adam; parameters and both momenta all-reduced densely, each every K steps",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.mtdao:MTDAOReplicator",
    order=6,
    options=("grad_dtype", "params_every", "m1_every", "m2_every", "beta", "beta2", "nu"),
    color="#17becf",
    period=period,
    encodes=False,  # dense tensors: its local step is the workload's apply time
)
