"""The DCT replicator's declaration (DeMo): top-k DCT coefficients of every chunk, all-gathered with positions."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from netbench.declarations.buckets import Piece, bucket_bytes, row_band_buckets
from netbench.declarations.shared_settings import (
    BackwardHookSettings,
    BucketSettings,
    DecoupledMomentumSettings,
    TileSettings,
)
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.declarations.tiling import TilePlan
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

INDEX_DTYPES = ("int16", "int32", "int64")


def index_dtype_name(config: Settings, max_tile_numel: int) -> str:
    """Smallest signed integer type (``int16``...) that holds every position inside the largest tile.

    ``auto`` picks int16 up to 32768-coefficient tiles (s <= 181 for square tiles); a forced
    type that cannot hold the positions is an error rather than silent wrap-around.
    """

    def holds(name: str) -> bool:
        return max_tile_numel - 1 <= 2 ** (8 * DTYPE_BYTES[name] - 1) - 1

    if config.index_dtype == "auto":
        return next((name for name in INDEX_DTYPES if holds(name)), "int64")
    if not holds(config.index_dtype):
        raise ValueError(
            f"index_dtype {config.index_dtype} cannot hold positions of {max_tile_numel}-coefficient tiles "
            f"(chunk {config.chunk}); use auto or a wider type"
        )
    return config.index_dtype


def bytes_per_coefficient(config: Settings, max_tile_numel: int) -> int:
    """A value plus its position, as they travel."""
    return DTYPE_BYTES[config.value_dtype] + DTYPE_BYTES[index_dtype_name(config, max_tile_numel)]


def pipeline_buckets(shapes: Sequence[Sequence[int]], config: Settings) -> list[list[Piece]]:
    """The pipeline buckets of these shapes (one when ``bucket_mb`` is 0 or the step fits one)."""
    plan = TilePlan(shapes, config.chunk, config.topk)
    per_coefficient = bytes_per_coefficient(config, plan.max_tile_numel)
    # Last tensors first: the order backward makes gradients in (replicators/backward.py).
    return row_band_buckets(
        shapes, config.chunk, config.topk, per_coefficient, bucket_bytes(config.bucket_mb), reverse=True
    )


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    nbytes, buckets = _payload_of(
        tuple(s.shape for s in shapes),
        config.chunk,
        config.topk,
        config.value_dtype,
        config.index_dtype,
        config.bucket_mb,
    )
    return PayloadDecl("all_gather", nbytes, collectives_per_step=buckets)


@lru_cache(maxsize=256)
def _payload_of(
    dims: tuple[tuple[int, ...], ...], chunk: int, topk: int, value_dtype: str, index_dtype: str, bucket_mb: float
) -> tuple[int, int]:
    """(bytes, buckets) of a step from the settings that decide them: the tiling and the bucket cut walk every
    tile row of the model, and a plan asks for the same step at many world sizes and bandwidths."""
    settings = _Settings(chunk, topk, value_dtype, index_dtype, bucket_mb)
    plan = TilePlan(dims, chunk, topk)
    return plan.coefficients * bytes_per_coefficient(settings, plan.max_tile_numel), len(
        pipeline_buckets(dims, settings)
    )


class _Settings:
    """The settings :func:`_payload_of` reads, as the declaration's helpers take them."""

    def __init__(self, chunk: int, topk: int, value_dtype: str, index_dtype: str, bucket_mb: float) -> None:
        self.chunk, self.topk, self.value_dtype, self.index_dtype, self.bucket_mb = (
            chunk,
            topk,
            value_dtype,
            index_dtype,
            bucket_mb,
        )


def compression(fraction: float, config: Settings) -> dict[str, Any]:
    """Keep ``fraction`` of every s x s chunk's coefficients."""
    side = config.chunk * config.chunk
    return {"topk": max(1, min(side, round(fraction * side)))}


class DCTSettings(DecoupledMomentumSettings, TileSettings, BucketSettings, BackwardHookSettings):
    """DeMo's settings: the decoupled momentum, its chunks' top-k and how a step is cut into buckets."""


SPEC = ReplicatorSpec(
    codec_bytes_per_param=90,
    state_bytes_per_param=16,  # the DCT momentum and three scratch tiles, fp32 (plain SGD steps: no state)
    in_default_sweep=True,
    name="dct",
    summary="top-k DCT coefficients of every chunk of a decoupled momentum, all-gathered (DeMo)",
    collective="all-gather",
    payload=payload,
    codec="netbench.replicators.dct:DCTReplicator",
    order=1,
    settings=DCTSettings,
    test_preset=TestPreset(
        check=dict(chunk=4, topk=2, lr=0.01),
        train=dict(chunk=8, topk=8, lr=0.003),
        variants={
            "chunk8": dict(chunk=8, topk=4),
            "bf16-int32": dict(chunk=8, topk=3, value_dtype="bf16", index_dtype="int32"),
            "int64-nosign": dict(chunk=4, topk=16, index_dtype="int64", sign=False, momentum_decay=0.9),
        },
    ),
    cost_settings=("chunk", "topk", "value_dtype", "index_dtype", "sign"),
    color="#d62728",
    pipelined_by_default=True,
    backward_hooks=True,
    compression=compression,
    compression_knob="top-k per chunk",
)
