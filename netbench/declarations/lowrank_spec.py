"""The low-rank replicator's declaration (Dion): a power iteration per step; factors P, then R, all-reduced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from netbench.declarations.buckets import bucket_bytes, item_ranges
from netbench.declarations.lowrank_plan import LowRankPlan
from netbench.declarations.shared_settings import PAYLOAD, BucketSettings, GradSettings, SeedSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def bucket_ranges(plan: LowRankPlan, itemsize: int, config: Settings) -> list[tuple[int, int]]:
    """Pipeline buckets as ranges of round-1 items (matrices, then element-wise tensors), whole tensors each."""
    sizes = [s.first_round for s in plan.matrices] + [plan.numels[i] for i in plan.elementwise]
    return item_ranges([n * itemsize for n in sizes], bucket_bytes(config.bucket_mb))


def sends_second(plan: LowRankPlan, items: tuple[int, int]) -> bool:
    """Whether the bucket of round-1 ``items`` holds a factored matrix (and so sends R in round 2)."""
    a, z = items
    return any(s.factored for s in plan.matrices[a:z])


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    plan = LowRankPlan.from_shapes(shapes, config.rank)
    itemsize = DTYPE_BYTES[config.grad_dtype]
    ranges = bucket_ranges(plan, itemsize, config)
    second = plan.second_round_values * itemsize
    second_calls = sum(sends_second(plan, r) for r in ranges)
    also = (PayloadDecl("all_reduce", second, label="R", collectives_per_step=second_calls),) if second else ()
    return PayloadDecl(
        "all_reduce", plan.first_round_values * itemsize, label="P", collectives_per_step=len(ranges), also=also
    )


class LowRankSettings(GradSettings, BucketSettings, SeedSettings):
    """Dion's settings: the factors' rank and the momentum's decay."""

    rank: float = Field(
        4,
        gt=0,
        description="factor rank r (an integer >= 1) or a fraction of min(m, n) (< 1).",
        json_schema_extra=PAYLOAD,
    )
    mu: float = Field(
        0.95, ge=0.0, lt=1.0, description="momentum decay mu, in [0, 1)."
    )  # error feedback keeps 1 - mu of what was sent

    @field_validator("rank")
    @classmethod
    def _rank_integral_when_absolute(cls, v: float) -> float:
        if v >= 1 and v != int(v):
            raise ValueError(f"must be an integer >= 1 or a fraction below 1, got {v:g}")
        return v


SPEC = ReplicatorSpec(
    codec_bytes_per_param=70,
    state_bytes_per_param=4,  # the matrices' momenta, fp32 (SGD on them; the element-wise rest is small)
    name="lowrank",
    summary="one power iteration per step against a shared right factor; P and R all-reduced (Dion)",
    collective="all-reduce of factors",
    payload=payload,
    codec="netbench.replicators.lowrank:LowRankReplicator",
    order=5,
    settings=LowRankSettings,
    test_preset=TestPreset(
        check=dict(rank=2, lr=0.01),
        train=dict(rank=4, lr=0.02),
        variants={"bf16-frac": dict(rank=0.5, grad_dtype="bf16")},
    ),
    cost_settings=("rank", "grad_dtype"),
    color="#8c564b",
)
