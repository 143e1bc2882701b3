"""The MT-DAO replicator's declaration: parameters and both Adam momenta all-reduced densely, each on its own period
(all-gathered quantized, with ``quant_bits``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.diloco_spec import outer_exchange
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    """The shortest of its three periods."""
    return min(config.params_every, config.m1_every, config.m2_every)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    collective, nbytes = outer_exchange(sum(s.numel for s in shapes), config)
    return PayloadDecl(
        collective,
        nbytes,
        period=config.params_every,
        label="params",
        also=(
            PayloadDecl(collective, nbytes, period=config.m1_every, label="m1"),
            PayloadDecl(collective, nbytes, period=config.m2_every, label="m2"),
        ),
    )


def state_bytes(config: Settings) -> float:
    """The local QH-Adam's momenta, gradient and update (16), the anchor weights and averaged mean (8), fp32; the
    dequantized row of a quantized exchange (4)."""
    return 24 + (4 if config.quant_bits else 0)


SPEC = ReplicatorSpec(
    codec_bytes_per_param=0,
    state_bytes_per_param=state_bytes,
    name="mtdao",
    summary="local QH-Adam; parameters and both momenta all-reduced densely, each every K steps",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.mtdao:MTDAOReplicator",
    order=6,
    options=("grad_dtype", "params_every", "m1_every", "m2_every", "beta", "beta2", "nu", "quant_bits", "quant_block"),
    cost_settings=("quant_bits", "quant_block"),  # quantized: its codec's encode and decode
    color="#17becf",
    period=period,
    encodes=lambda config: config.quant_bits > 0,  # dense: its local step is the apply time; quant_bits adds a codec
)
