"""The dense baseline's declaration: every gradient in one flat all-reduce, as DistributedDataParallel does (with
``quant_bits``, a ring all-reduce of the gradients quantized: :mod:`netbench.declarations.quant_wire`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import model_validator

from netbench.declarations.buckets import bucket_bytes, slot_ranges
from netbench.declarations.kept_state import KeptState, inner_optimizer_state
from netbench.declarations.quant_wire import ring_quantized_bytes
from netbench.declarations.registry import spec
from netbench.declarations.shared_settings import BucketSettings, GradSettings, QuantSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def flat_all_reduce(values: int, itemsize: int, config: Settings) -> PayloadDecl:
    """One flat buffer of ``values`` elements, all-reduced in ``bucket_mb`` buckets (one when 0)."""
    buckets = len(slot_ranges(values, itemsize, bucket_bytes(config.bucket_mb)))
    return PayloadDecl("all_reduce", values * itemsize, collectives_per_step=buckets)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    numel = sum(s.numel for s in shapes)
    if config.quant_bits:
        nbytes = ring_quantized_bytes(numel, config.quant_bits, config.quant_block, world_size)
        return PayloadDecl("all_reduce", nbytes, hop_codec=True)
    return flat_all_reduce(numel, DTYPE_BYTES[config.grad_dtype], config)


def kept_state(config: Settings) -> KeptState:
    """The base optimizer's state (AdamW's two moments and step count): all a heal sends beside the weights."""
    return inner_optimizer_state(config)


def state_bytes(config: Settings) -> float:
    """The kept state (AdamW's two moments: 8; its flat wire buffer is the payload's); quantized, the flat gradient,
    the ring's fp32 partial sums and the mean (12)."""
    return kept_state(config).bytes_per_param + (12 if config.quant_bits else 0)


class FullSettings(GradSettings, QuantSettings, BucketSettings):
    """The dense baseline's settings: its wire dtype or quantization, and its buckets."""

    @model_validator(mode="after")
    def _quantized_in_one_ring(self) -> FullSettings:
        name = getattr(self, "name", None)  # the composed config's; these settings alone are checked in full
        if name is not None and not {"quant_bits", "bucket_mb"} <= set(spec(name).options):
            return self
        if self.quant_bits and self.bucket_mb:
            raise ValueError("quant_bits reduces the gradients in one ring: set bucket_mb 0 (or quant_bits 0)")
        return self


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
        check=dict(optimizer="sgd", lr=0.1),
        train=dict(lr=0.01),
        variants={"bf16": dict(grad_dtype="bf16"), "int8": dict(quant_bits=8, quant_block=16)},
    ),
    cost_settings=("grad_dtype", "quant_bits", "quant_block"),
    color="#1f77b4",
    state_bytes_per_param=state_bytes,
    kept_state=kept_state,
)
