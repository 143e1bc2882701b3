"""SparseLoCo's declaration: DiLoCo's outer gradient through error feedback, chunk-wise top-k and low-bit values,
all-gathered every ``sync_every`` steps (Sarfi et al. 2025, arXiv 2508.15706).

The chunks are DeMo's s x s tiles (:mod:`netbench.declarations.tiling`; ``chunk`` s, ``topk`` k per tile: a density
of k / s^2), so a step sends ``coefficients`` positions and values: the positions in ``index_dtype``, the values
in ``value_dtype`` or, with ``quant_bits``, as packed integers with one fp32 scale per ``quant_block`` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.dct_spec import compression, index_dtype_name
from netbench.declarations.quant_wire import quantized_bytes
from netbench.declarations.shared_settings import (
    ErrorFeedbackSettings,
    OuterStepSettings,
    QuantSettings,
    TileSettings,
    ValueSettings,
)
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.declarations.tiling import TilePlan
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    return config.sync_every


def value_bytes(count: int, config: Settings) -> int:
    """Bytes of ``count`` values as they travel (quantized with their scales, or in value_dtype)."""
    if config.quant_bits:
        return quantized_bytes(count, config.quant_bits, config.quant_block)
    return count * DTYPE_BYTES[config.value_dtype]


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    plan = TilePlan(shapes, config.chunk, config.topk)
    positions = plan.coefficients * DTYPE_BYTES[index_dtype_name(config, plan.max_tile_numel)]
    return PayloadDecl("all_gather", positions + value_bytes(plan.coefficients, config), period=config.sync_every)


class SparseLoCoSettings(ValueSettings, TileSettings, OuterStepSettings, QuantSettings, ErrorFeedbackSettings):
    """SparseLoCo's settings: DeMo's chunk-wise top-k, DiLoCo's period and outer step, the values' wire format and
    the error feedback's decay."""


SPEC = ReplicatorSpec(
    name="sparseloco",
    summary="local steps; every sync_every steps the top-k of an error-fed outer gradient, low-bit, all-gathered",
    collective="periodic all-gather",
    payload=payload,
    codec="netbench.replicators.sparseloco:SparseLoCoReplicator",
    order=8,
    settings=SparseLoCoSettings,
    test_preset=TestPreset(
        check=dict(sync_every=2, chunk=4, topk=2, lr=0.01),
        train=dict(sync_every=10, chunk=8, topk=16, quant_bits=2, outer_lr=1.0, lr=0.005),
        variants={
            "chunk8": dict(chunk=8, topk=4),
            "2bit": dict(sync_every=3, chunk=4, topk=3, quant_bits=2, quant_block=32),
        },
    ),
    cost_settings=("sync_every", "chunk", "topk", "value_dtype", "index_dtype", "quant_bits", "quant_block"),
    color="#bcbd22",
    period=period,
    # not measured on an accelerator, counted from its operations in fp32: the pseudo-gradient (12 bytes), error
    # feedback (12), the top-k of every chunk (about 20), the error's update (8), the gathered values scattered into
    # a dense buffer (8), the outer Nesterov step (36) and the parameters set back (8): about 100
    codec_bytes_per_param=100,
    state_bytes_per_param=20,  # AdamW's moments (8); the global weights, pseudo-gradient and error buffer, fp32 (12)
    compression=compression,
    compression_knob="top-k per chunk",
)
