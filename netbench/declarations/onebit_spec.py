"""1-bit Adam's declaration (arXiv 2102.02888; DeepSpeed ``runtime/fp16/onebit/adam.py``): ``freeze_step`` steps of
dense Adam over an all-reduce of the gradients, then every step the momentum as error-compensated sign bits through
DeepSpeed's ``compressed_allreduce`` (``runtime/comm/nccl.py``): an all-to-all of the packed signs, an all-gather of
the worker scales, an all-gather of the servers' packed signs and one of their scales."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import Field

from netbench.declarations.shared_settings import PAYLOAD, ReplicatorSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

SCALE_BYTES = 4  # one fp32 scale per worker and per server chunk


def padded(numel: int, world_size: int) -> int:
    """The compressed buffer's length n': ``numel`` rounded up to a multiple of N lcm(N, 8) (DeepSpeed's
    ``corrected_tensor_size``), so each of the N server chunks packs into whole bytes."""
    unit = world_size * math.lcm(world_size, 8)
    return -(-numel // unit) * unit


def compressed_allreduce(numel: int, world_size: int, **where: object) -> tuple[PayloadDecl, ...]:
    """DeepSpeed's compressed all-reduce of an ``numel``-long fp32 buffer, as four exchanges made on the steps
    ``where`` names (``steps``, ``period``, ``offset``, ``others``): the sign bits' all-to-all (n'/8 bytes handed), the
    worker scales' all-gather, the server chunk's signs (n'/8N) and its scale's."""
    signs = padded(numel, world_size) // 8
    return (
        PayloadDecl("all_to_all", signs, label="signs", **where),
        PayloadDecl("all_gather", SCALE_BYTES, label="worker scales", **where),
        PayloadDecl("all_gather", signs // world_size, label="server signs", **where),
        PayloadDecl("all_gather", SCALE_BYTES, label="server scales", **where),
    )


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    """The warm-up's fp32 all-reduce of the gradients on steps 1..freeze_step; after them the momentum's compressed
    all-reduce (:func:`compressed_allreduce`)."""
    numel = sum(s.numel for s in shapes)
    signs, *scales_and_server = compressed_allreduce(numel, world_size, steps=(config.freeze_step + 1, 0))
    warm_up = PayloadDecl("all_reduce", 4 * numel, label="warm-up", steps=(1, config.freeze_step))
    return replace(signs, also=(*scales_and_server, warm_up))


def state_bytes(config: Settings) -> float:
    """Adam's two moments, the flat gradient, the worker error and the padded working buffer (20), fp32, and the
    server error, 1/N of that (at most 2 at N >= 2)."""
    return 22


class OnebitSettings(ReplicatorSettings):
    """1-bit Adam's settings: how long the dense warm-up lasts (its betas and eps are DeepSpeed's defaults)."""

    freeze_step: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="steps of dense Adam (all-reduced gradients) before the variance freezes and the momentum "
        "travels as sign bits (DeepSpeed's tutorial: 15-25 % of the training steps).",
        json_schema_extra=PAYLOAD,
    )


SPEC = ReplicatorSpec(
    codec_bytes_per_param=40,  # counted from the operations (an estimate): 10 fp32 passes over the buffer a step
    state_bytes_per_param=state_bytes,
    name="onebit",
    summary="1-bit Adam: dense Adam for freeze_step steps, then the momentum as error-fed sign bits (all-to-all)",
    collective="all-to-all",
    payload=payload,
    codec="netbench.replicators.onebit:OnebitAdamReplicator",
    order=12,
    settings=OnebitSettings,
    test_preset=TestPreset(check=dict(freeze_step=2, lr=0.01), train=dict(freeze_step=10, lr=0.01)),
    cost_settings=(),
    color="",
)
