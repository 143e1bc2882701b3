"""Streaming DiLoCo's declaration: DiLoCo whose model is cut into fragments, each synchronised on its own step of the
H-step cycle, its exchange overlapping the next ``fragment_sync_delay`` inner steps, optionally quantized.

One exchange per fragment (``fragment0``, ``fragment1``, ...), each with its exact bytes, period H, the step of the
cycle it leaves on (``offset``) and the steps it overlaps (``overlap_steps``): everything a planner needs to price
the peak bandwidth (one fragment's bytes within ``H / F`` steps) and the hidden communication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from netbench.declarations.diloco_spec import outer_exchange, state_bytes
from netbench.declarations.fragments import fragment_layers, fragment_members, send_offset
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings

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
        collective, nbytes = outer_exchange(numel, config)
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
            )
        )
    first, *rest = parts
    return replace(first, also=tuple(rest))


SPEC = ReplicatorSpec(
    name="streaming",
    summary="Streaming DiLoCo: fragments of layers, each outer-synchronised on its own step, overlapping tau steps",
    collective="staggered all-reduce",
    payload=payload,
    codec="netbench.replicators.streaming:StreamingDiLoCoReplicator",
    order=7,
    options=(
        "grad_dtype",
        "sync_every",
        "outer_lr",
        "outer_momentum",
        "fragments",
        "fragment_sync_delay",
        "fragment_update_alpha",
        "fragment_pattern",
        "quant_bits",
        "quant_block",
    ),
    cost_settings=("sync_every", "grad_dtype", "quant_bits", "quant_block"),
    color="#e377c2",
    period=period,
    # not measured on an accelerator: each fragment does DiLoCo's outer work (the pseudo-gradient, its cast or
    # quantization, the averaged result's outer Nesterov step, the parameters set back), so DiLoCo's traffic
    codec_bytes_per_param=80,
    state_bytes_per_param=state_bytes,  # DiLoCo's, every fragment's kept on the device
)
