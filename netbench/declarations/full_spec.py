"""The dense baseline's declaration: every gradient in one flat all-reduce, as DistributedDataParallel does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.buckets import bucket_bytes, slot_ranges
from netbench.declarations.shared_settings import BucketSettings, GradSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def flat_all_reduce(values: int, itemsize: int, config: Settings) -> PayloadDecl:
    """One flat buffer of ``values`` elements, all-reduced in ``bucket_mb`` buckets (one when 0)."""
    buckets = len(slot_ranges(values, itemsize, bucket_bytes(config.bucket_mb)))
    return PayloadDecl("all_reduce", values * itemsize, collectives_per_step=buckets)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return flat_all_reduce(sum(s.numel for s in shapes), DTYPE_BYTES[config.grad_dtype], config)


class FullSettings(GradSettings, BucketSettings):
    """The dense baseline's settings: its wire dtype and its buckets."""


SPEC = ReplicatorSpec(
    codec_bytes_per_param=10,
    in_default_sweep=True,
    name="full",
    summary="every gradient, averaged by one ring all-reduce (DDP)",
    collective="all-reduce",
    payload=payload,
    codec="netbench.replicators.full:FullReplicator",
    order=0,
    settings=FullSettings,
    test_preset=TestPreset(
        check=dict(optimizer="sgd", lr=0.1), train=dict(lr=0.01), variants={"bf16": dict(grad_dtype="bf16")}
    ),
    cost_settings=("grad_dtype",),
    color="#1f77b4",
    state_bytes_per_param=8,  # AdamW's two moments (its flat wire buffer is the payload's)
)
