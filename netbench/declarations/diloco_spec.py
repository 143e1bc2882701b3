"""The DiLoCo replicator's declaration: local steps, then an all-reduce of the pseudo-gradient every ``sync_every``
(with ``quant_bits``, a ring all-reduce of it quantized: :mod:`netbench.declarations.quant_wire`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.kept_state import KeptState, inner_optimizer_state
from netbench.declarations.quant_wire import ring_quantized_bytes
from netbench.declarations.shared_settings import GradSettings, OuterMomentumSettings, QuantSettings
from netbench.declarations.spec import Collective, PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    return config.sync_every


def outer_exchange(numel: int, config: Settings, world_size: int) -> tuple[Collective, int]:
    """(collective, bytes one node hands it) of an outer exchange of ``numel`` values over ``world_size`` nodes: an
    all-reduce in grad_dtype, or with ``quant_bits`` a ring all-reduce of the values quantized chunk by chunk, their
    scales included."""
    if config.quant_bits:
        return "all_reduce", ring_quantized_bytes(numel, config.quant_bits, config.quant_block, world_size)
    return "all_reduce", numel * DTYPE_BYTES[config.grad_dtype]


def kept_state(config: Settings) -> KeptState:
    """The inner optimizer's state (AdamW's two moments and step count), and the global weights the pseudo-gradient
    is taken from and the outer momentum: what a heal sends beside the weights."""
    return inner_optimizer_state(config) + KeptState(copies=2)


def state_bytes(config: Settings) -> float:
    """The kept state (AdamW's moments, the global weights and outer momentum: 16), the pseudo-gradient and the
    averaged mean (8), fp32; the fp32 partial sums of a quantized ring (4)."""
    return kept_state(config).bytes_per_param + 8 + (4 if config.quant_bits else 0)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    collective, nbytes = outer_exchange(sum(s.numel for s in shapes), config, world_size)
    return PayloadDecl(collective, nbytes, period=config.sync_every, hop_codec=config.quant_bits > 0)


class DiLoCoSettings(GradSettings, OuterMomentumSettings, QuantSettings):
    """DiLoCo's settings: its period and outer optimizer, and the outer exchange's dtype or quantization."""


SPEC = ReplicatorSpec(
    codec_bytes_per_param=80,  # the H100 profile: 8 bytes a parameter a step at sync_every 10
    state_bytes_per_param=state_bytes,
    kept_state=kept_state,
    name="diloco",
    summary="local steps; every sync_every steps the pseudo-gradient is all-reduced and an outer step taken",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.diloco:DiLoCoReplicator",
    order=4,
    settings=DiLoCoSettings,
    test_preset=TestPreset(
        check=dict(sync_every=2, lr=0.01),
        train=dict(sync_every=10, lr=0.005),
        variants={"bf16": dict(sync_every=3, grad_dtype="bf16"), "int8": dict(sync_every=3, quant_bits=8)},
    ),
    cost_settings=("sync_every", "grad_dtype", "quant_bits", "quant_block"),  # the period: its average divides by it
    color="#ff7f0e",
    period=period,
)
