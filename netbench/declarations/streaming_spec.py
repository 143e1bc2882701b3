"""Streaming DiLoCo's declaration: DiLoCo whose model is cut into fragments, each synchronised on its own step of the
H-step cycle, its exchange overlapping the next ``fragment_sync_delay`` inner steps, optionally quantized.

One exchange per fragment (``fragment0``, ``fragment1``, ...), each with its exact bytes, period H, the step of the
cycle it leaves on (``offset``) and the steps it overlaps (``overlap_steps``): everything a planner needs to price
the peak bandwidth (one fragment's bytes within ``H / F`` steps) and the hidden communication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from netbench.declarations.diloco_spec import DiLoCoSettings, outer_exchange, state_bytes
from netbench.declarations.fragments import fragment_layers, fragment_members, send_offset
from netbench.declarations.registry import spec
from netbench.declarations.shared_settings import PAYLOAD
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def period(config: Settings) -> int:
    """The whole cycle: every fragment synchronises once in it."""
    return config.sync_every


def fragment_numels(shapes: Sequence[ParamShape], config: Settings) -> list[int]:
    """Elements of each fragment (FragmentError where the fragments do not divide the layers)."""
    members = fragment_members([s.name for s in shapes], config.fragments, config.fragment_pattern)
    return [sum(shapes[i].numel for i in group) for group in members]


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    h, f, tau = config.sync_every, config.fragments, config.fragment_sync_delay
    layers, count = fragment_layers([s.name for s in shapes], f, config.fragment_pattern)
    parts = []
    for i, numel in enumerate(fragment_numels(shapes, config)):
        collective, nbytes = outer_exchange(numel, config, world_size)
        parts.append(
            PayloadDecl(
                collective,
                nbytes,
                period=h,
                label=f"fragment{i}",
                offset=send_offset(i, h, f, tau),
                overlap_steps=tau,
                layers=layers[i] if f > 1 else (),
                layer_count=count,
                hop_codec=config.quant_bits > 0,
            )
        )
    first, *rest = parts
    return replace(first, also=tuple(rest))


MAX_FRAGMENTS = 1024  # far more than any model's layers


class StreamingSettings(DiLoCoSettings):
    """Streaming DiLoCo's settings: DiLoCo's (its H and outer optimizer) and how the model is cut into fragments."""

    fragments: int = Field(
        1,
        ge=1,
        le=MAX_FRAGMENTS,
        description="model fragments (groups of layers), each synchronised on its own step of the sync_every cycle; "
        "must divide the model's layers and not exceed sync_every.",
        json_schema_extra=PAYLOAD,
    )
    fragment_sync_delay: int = Field(
        0,
        ge=0,
        description="inner steps a fragment's exchange overlaps before its outer step waits for it (tau); "
        "below sync_every / fragments (rounded down).",
        json_schema_extra=PAYLOAD,
    )
    fragment_update_alpha: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="share of the local weights a fragment keeps when its outer step lands (0: the global weights).",
    )
    fragment_pattern: Literal["strided", "sequential"] = Field(
        "strided",
        description="layer i joins fragment i mod F (strided) or i // (layers / F) (sequential).",
        json_schema_extra=PAYLOAD,
    )

    @model_validator(mode="after")
    def _fragments_fit_the_cycle(self) -> StreamingSettings:
        # Only where the replicator takes fragments: a sweep may set them beside replicators that ignore them.
        name = getattr(self, "name", None)  # the composed config's; these settings alone are checked in full
        if name is not None and "fragments" not in spec(name).options:
            return self
        if self.fragments > self.sync_every:
            raise ValueError(
                f"fragments {self.fragments} must not exceed sync_every {self.sync_every} "
                "(each fragment synchronises once per cycle, on its own step)"
            )
        window = self.sync_every // self.fragments
        if self.fragment_sync_delay >= window:
            raise ValueError(
                f"fragment_sync_delay {self.fragment_sync_delay} must be below sync_every / fragments = {window} "
                "(one fragment in flight at a time)"
            )
        return self


SPEC = ReplicatorSpec(
    name="streaming",
    summary="Streaming DiLoCo: fragments of layers, each outer-synchronised on its own step, overlapping tau steps",
    collective="staggered all-reduce",
    payload=payload,
    codec="netbench.replicators.streaming:StreamingDiLoCoReplicator",
    order=7,
    settings=StreamingSettings,
    test_preset=TestPreset(
        check=dict(sync_every=2, lr=0.01),
        train=dict(sync_every=10, fragments=2, fragment_sync_delay=2, quant_bits=4, lr=0.005),
        variants={
            "4frag-int4": dict(sync_every=4, fragments=4, fragment_sync_delay=0, quant_bits=4, quant_block=16),
            "2frag-tau1-bf16": dict(sync_every=6, fragments=2, fragment_sync_delay=1, grad_dtype="bf16"),
        },
    ),
    cost_settings=("sync_every", "grad_dtype", "quant_bits", "quant_block"),
    color="#e377c2",
    period=period,
    # not measured on an accelerator: each fragment does DiLoCo's outer work (the pseudo-gradient, its cast or
    # quantization, the averaged result's outer Nesterov step, the parameters set back), so DiLoCo's traffic
    codec_bytes_per_param=80,
    state_bytes_per_param=state_bytes,  # DiLoCo's, every fragment's kept on the device
)
