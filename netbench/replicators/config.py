"""Validated settings of every replicator (shared by the CLI, the workers and the analytic model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ReplicatorName = Literal["full", "dct", "random", "striding", "diloco", "lowrank", "mtdao"]
REPLICATOR_NAMES: tuple[str, ...] = ("full", "dct", "random", "striding", "diloco", "lowrank", "mtdao")


class ReplicatorConfig(BaseModel):
    """Everything a replicator needs besides the parameters and the process group.

    One object travels from the CLI to every worker (as JSON) and into the model, so the bytes the
    model predicts and the bytes the workers send are computed from the same settings.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf or nan would pass every range check

    name: ReplicatorName = "dct"
    # full
    grad_dtype: Literal["fp32", "bf16"] = Field("fp32", description="dtype of the dense all-reduces (full, diloco, lowrank, mtdao)")
    # dct (DeMo)
    topk: int = Field(32, ge=1, description="coefficients kept per chunk")
    chunk: int = Field(64, ge=1, le=4096, description="DCT chunk side s (s x s chunks of matrices, s-long chunks of vectors)")
    beta: float = Field(0.999, ge=0.0, lt=1.0, description="decoupled momentum decay; mtdao: its slow first momentum's beta1")
    value_dtype: Literal["fp32", "bf16"] = Field("fp32", description="wire dtype of transmitted values (dct, random, striding)")
    index_dtype: Literal["auto", "int16", "int32", "int64"] = Field("auto", description="wire dtype of indices; auto = smallest that holds a chunk position")
    sign: bool = Field(True, description="apply sign() to the decoded update, as DeMo does")
    # random / striding (beta, value_dtype and sign above apply to them too)
    rate: float = Field(0.1, gt=0.0, le=1.0, description="fraction of each tensor sent per step")
    # diloco
    sync_every: int = Field(10, ge=1, description="local steps H between pseudo-gradient all-reduces")
    outer_lr: float = Field(0.7, gt=0.0)
    outer_momentum: float = Field(0.9, ge=0.0, lt=1.0)
    # lowrank (Dion)
    rank: float = Field(4, gt=0, description="factor rank r: an integer >= 1, or a fraction in (0, 1) of min(m, n)")
    mu: float = Field(0.95, ge=0.0, lt=1.0, description="lowrank momentum decay (error feedback keeps 1 - mu of what was sent)")
    # mtdao (beta above is its beta1)
    params_every: int = Field(32, ge=1, description="mtdao K_x: steps between parameter all-reduces")
    m1_every: int = Field(32, ge=1, description="mtdao K_1: steps between first-momentum all-reduces")
    m2_every: int = Field(32, ge=1, description="mtdao K_v: steps between second-momentum all-reduces")
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="mtdao second-momentum decay")
    nu: float = Field(0.7, ge=0.0, le=1.0, description="mtdao quasi-hyperbolic weight of the momentum against the gradient")
    # base optimizer applying the synchronised update
    optimizer: Literal["auto", "sgd", "adamw", "decoupled_adamw"] = Field(
        "auto", description="auto: adamw for full/diloco inner, sgd for dct/random/striding; decoupled_adamw: AdamW with "
        "local moments whose direction is what the replicator synchronises; lowrank: the element-wise "
        "optimizer of its 1-D and embedding tensors (auto: adamw); mtdao ignores it (its own local QH-Adam)")
    lr: float = Field(0.0, ge=0.0, description="base learning rate; 0 picks the replicator's default")
    seed: int = Field(0, ge=0, description="shared seed for random/striding selections and lowrank's initial right factors")
    # pipelining (dct, random, striding, full): encode bucket i+1 while bucket i is on the wire
    bucket_mb: float = Field(0.0, ge=0.0, le=4096.0, description="payload megabytes (1e6 B) per pipelined collective; "
                             "0: the whole step in one collective (no pipelining)")
    overlap_backward: bool = Field(True, description="dct on the built-in transformer and mlp workloads: start each bucket "
                                   "from backward's post-accumulate-grad hooks as soon as its gradients are final (as DDP)")

    @field_validator("rank")
    @classmethod
    def _rank_integral_when_absolute(cls, v: float) -> float:
        if v >= 1 and v != int(v):
            raise ValueError(f"must be an integer >= 1 or a fraction below 1, got {v:g}")
        return v

    @model_validator(mode="after")
    def _topk_fits_a_chunk(self) -> "ReplicatorConfig":
        if self.topk > self.chunk * self.chunk:
            raise ValueError(f"topk {self.topk} is larger than a chunk ({self.chunk}x{self.chunk} = {self.chunk * self.chunk} coefficients)")
        return self

    @model_validator(mode="after")
    def _index_dtype_holds_a_chunk_position(self) -> "ReplicatorConfig":
        # Positions inside an s x s tile run to s*s - 1; int16 stops at 32767 (s <= 181).
        if self.index_dtype == "int16" and self.chunk * self.chunk - 1 > 32767:
            raise ValueError(f"index_dtype int16 cannot hold positions of {self.chunk}x{self.chunk} chunks; use auto, int32 or int64")
        return self
