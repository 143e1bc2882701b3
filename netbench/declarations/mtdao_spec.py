"""The MT-DAO replicator's declaration: parameters and both Adam momenta all-reduced densely, each on its own period
(ring all-reduced quantized, with ``quant_bits``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from netbench.declarations.diloco_spec import outer_exchange
from netbench.declarations.shared_settings import (
    FILE_ONLY,
    PAYLOAD,
    GradSettings,
    QuantSettings,
    StatePeriodSettings,
    decay,
)
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    """The shortest of its three periods."""
    return min(config.params_every, config.m1_every, config.m2_every)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    collective, nbytes = outer_exchange(sum(s.numel for s in shapes), config, world_size)
    ring = config.quant_bits > 0
    return PayloadDecl(
        collective,
        nbytes,
        period=config.params_every,
        label="params",
        hop_codec=ring,
        also=(
            PayloadDecl(collective, nbytes, period=config.m1_every, label="m1", hop_codec=ring),
            PayloadDecl(collective, nbytes, period=config.m2_every, label="m2", hop_codec=ring),
        ),
    )


def state_bytes(config: Settings) -> float:
    """The local QH-Adam's momenta, gradient and update (16), the anchor weights and averaged mean (8), fp32; the
    fp32 partial sums of a quantized ring (4)."""
    return 24 + (4 if config.quant_bits else 0)


class MTDAOSettings(GradSettings, StatePeriodSettings, QuantSettings):
    """MT-DAO's settings: the periods of its three averaged states and its local QH-Adam's constants."""

    FORMER_NAMES: ClassVar[dict[str, str]] = {"beta": "beta1"}
    m1_every: int = Field(
        32, ge=1, description="steps between first-momentum all-reduces (K_1).", json_schema_extra=PAYLOAD
    )
    m2_every: int = Field(
        32, ge=1, description="steps between second-momentum all-reduces (K_v).", json_schema_extra=PAYLOAD
    )
    beta1: float = decay(0.999, "first-momentum decay.")
    beta2: float = decay(0.999, "second-momentum decay.")
    nu: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="quasi-hyperbolic weight of the momentum against the gradient.",
        json_schema_extra=FILE_ONLY,
    )


SPEC = ReplicatorSpec(
    codec_bytes_per_param=0,
    state_bytes_per_param=state_bytes,
    name="mtdao",
    summary="local QH-Adam; parameters and both momenta all-reduced densely, each every K steps",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.mtdao:MTDAOReplicator",
    order=6,
    settings=MTDAOSettings,
    test_preset=TestPreset(
        check=dict(params_every=2, m1_every=3, m2_every=6, lr=0.01),
        train=dict(params_every=8, m1_every=8, m2_every=16, lr=0.01),
        variants={"int4": dict(quant_bits=4, quant_block=32)},
    ),
    cost_settings=("quant_bits", "quant_block"),  # quantized: its codec's encode and decode
    color="#17becf",
    period=period,
    encodes=lambda config: config.quant_bits > 0,  # dense: its local step is the apply time; quant_bits adds a codec
)
