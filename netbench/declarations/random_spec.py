"""The random-subset replicator's declaration: ``rate`` of every tensor, drawn from a shared seed, all-reduced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from netbench.declarations.full_spec import flat_all_reduce
from netbench.declarations.shared_settings import PAYLOAD, BucketSettings, DecoupledMomentumSettings, SeedSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

SUBSET_COST_SETTINGS = ("rate", "value_dtype", "sign")


def counts(shapes: Sequence[ParamShape], rate: float) -> list[int]:
    """Positions sent per tensor: ``round(rate * numel)``, at least one."""
    return [max(1, round(rate * s.numel)) for s in shapes]


def slots(shapes: Sequence[ParamShape], config: Settings) -> int:
    """Values in the all-reduce buffer (the same on every step)."""
    return sum(counts(shapes, config.rate))


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return flat_all_reduce(slots(shapes, config), DTYPE_BYTES[config.value_dtype], config)


def rate_compression(fraction: float, config: Settings) -> dict[str, Any]:
    """Send ``fraction`` of every tensor."""
    return {"rate": fraction}


class SubsetSettings(DecoupledMomentumSettings, BucketSettings, SeedSettings):
    """The settings of a replicator that all-reduces a subset of a decoupled momentum's positions."""

    rate: float = Field(
        0.1, gt=0.0, le=1.0, description="fraction sent per step, in (0, 1].", json_schema_extra=PAYLOAD
    )  # of each tensor


SPEC = ReplicatorSpec(
    codec_bytes_per_param=90,
    state_bytes_per_param=8,  # the decoupled momentum and the update, fp32 (plain SGD steps)
    in_default_sweep=True,
    name="random",
    summary="a seeded random rate of every tensor's decoupled momentum, all-reduced (values only)",
    collective="all-reduce",
    payload=payload,
    codec="netbench.replicators.random_subset:RandomReplicator",
    order=2,
    settings=SubsetSettings,
    test_preset=TestPreset(
        check=dict(rate=0.25, lr=0.01),
        train=dict(rate=0.25, lr=0.003),
        variants={"bf16": dict(rate=0.1, value_dtype="bf16")},
    ),
    cost_settings=SUBSET_COST_SETTINGS,
    color="#2ca02c",
    compression=rate_compression,
    compression_knob="rate",
)
