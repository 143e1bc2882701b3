"""Validated settings of every replicator (shared by the CLI, the workers and the analytic model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netbench.declarations.registry import REGISTRY, names_sentence, spec

MAX_FRAGMENTS = 1024  # Streaming DiLoCo's fragments: far more than any model's layers


def _taken_by(field: str, text: str) -> str:
    """``text`` prefixed by the replicators whose declarations take ``field`` (``dct/random: ...``)."""
    takers = [name for name, declared in REGISTRY.items() if field in declared.options]
    return f"{'/'.join(takers)}: {text}" if takers else text


# The role of a setting only a scenario file sets: the optimizers' constants (momentum decays, outer step, seed) are
# tuned once per replicator, not per run, so no command offers them as options.
FILE_ONLY = {"role": "file"}
# The role of a setting that changes the bytes a step sends or what they cost to encode (a dtype, a rate, a period,
# a bucket size): plan and calibrate take these, as run does, because the model prices them.
PAYLOAD = {"role": "payload"}


class ReplicatorConfig(BaseModel):
    """Everything a replicator needs besides the parameters and the process group.

    One object travels from the CLI to every worker (as JSON) and into the model, so the bytes the
    model predicts and the bytes the workers send are computed from the same settings.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    # A description is also the help of the field's command-line option (netbench/cli/fields.py): it starts with
    # the replicators whose declarations take the field (_taken_by), as `netbench run --help` lists them.
    name: str = Field("dct", description=f"{names_sentence()}.")
    # full
    grad_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description=_taken_by("grad_dtype", "all-reduce dtype (fp32, bf16)."), json_schema_extra=PAYLOAD
    )
    # dct (DeMo)
    topk: int = Field(
        32, ge=1, description=_taken_by("topk", "coefficients kept per chunk."), json_schema_extra=PAYLOAD
    )
    chunk: int = Field(
        64, ge=1, le=4096, description=_taken_by("chunk", "chunk side s."), json_schema_extra=PAYLOAD
    )  # s x s chunks of matrices, s-long chunks of vectors
    beta: float = Field(
        0.999,
        ge=0.0,
        lt=1.0,
        description="decoupled momentum decay; mtdao: its slow first momentum's beta1",
        json_schema_extra=FILE_ONLY,
    )
    value_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description=_taken_by("value_dtype", "wire dtype of values (fp32, bf16)."), json_schema_extra=PAYLOAD
    )
    index_dtype: Literal["auto", "int16", "int32", "int64"] = Field(
        "auto",
        description=_taken_by("index_dtype", "wire dtype of indices (auto, int16, int32, int64)."),
        json_schema_extra=PAYLOAD,
    )  # auto: the smallest that holds a chunk position
    sign: bool = Field(True, description=_taken_by("sign", "sign of the decoded update, as DeMo."))
    # random / striding (beta, value_dtype and sign above apply to them too)
    rate: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description=_taken_by("rate", "fraction sent per step, in (0, 1]."),
        json_schema_extra=PAYLOAD,
    )  # of each tensor
    # diloco
    sync_every: int = Field(
        10,
        ge=1,
        description=_taken_by("sync_every", "local steps between outer synchronisations (H)."),
        json_schema_extra=PAYLOAD,
    )  # H, between pseudo-gradient all-reduces
    outer_lr: float = Field(0.7, gt=0.0, json_schema_extra=FILE_ONLY)
    outer_momentum: float = Field(0.9, ge=0.0, lt=1.0, json_schema_extra=FILE_ONLY)
    # lowrank (Dion)
    rank: float = Field(
        4,
        gt=0,
        description=_taken_by("rank", "factor rank r (an integer >= 1) or a fraction of min(m, n) (< 1)."),
        json_schema_extra=PAYLOAD,
    )
    mu: float = Field(
        0.95, ge=0.0, lt=1.0, description=_taken_by("mu", "momentum decay mu, in [0, 1).")
    )  # error feedback keeps 1 - mu of what was sent
    # mtdao (beta above is its beta1)
    params_every: int = Field(
        32,
        ge=1,
        description=_taken_by("params_every", "steps between parameter all-reduces (K_x)."),
        json_schema_extra=PAYLOAD,
    )
    m1_every: int = Field(
        32,
        ge=1,
        description=_taken_by("m1_every", "steps between first-momentum all-reduces (K_1)."),
        json_schema_extra=PAYLOAD,
    )
    m2_every: int = Field(
        32,
        ge=1,
        description=_taken_by("m2_every", "steps between second-momentum all-reduces (K_v)."),
        json_schema_extra=PAYLOAD,
    )
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="mtdao second-momentum decay", json_schema_extra=FILE_ONLY)
    nu: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="mtdao quasi-hyperbolic weight of the momentum against the gradient",
        json_schema_extra=FILE_ONLY,
    )
    # streaming (Streaming DiLoCo; sync_every, outer_lr and outer_momentum above are its H and outer optimizer)
    fragments: int = Field(
        1,
        ge=1,
        le=MAX_FRAGMENTS,
        description=_taken_by(
            "fragments",
            "model fragments (groups of layers), each synchronised on its own step of the sync_every cycle; "
            "must divide the model's layers and not exceed sync_every.",
        ),
        json_schema_extra=PAYLOAD,
    )
    fragment_sync_delay: int = Field(
        0,
        ge=0,
        description=_taken_by(
            "fragment_sync_delay",
            "inner steps a fragment's exchange overlaps before its outer step waits for it (tau); "
            "below sync_every / fragments (rounded down).",
        ),
        json_schema_extra=PAYLOAD,
    )
    fragment_update_alpha: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description=_taken_by(
            "fragment_update_alpha",
            "share of the local weights a fragment keeps when its outer step lands (0: the global weights).",
        ),
    )
    fragment_pattern: Literal["strided", "sequential"] = Field(
        "strided",
        description=_taken_by(
            "fragment_pattern", "layer i joins fragment i mod F (strided) or i // (layers / F) (sequential)."
        ),
        json_schema_extra=PAYLOAD,
    )
    # quantized outer exchanges (diloco, mtdao, streaming, sparseloco)
    quant_bits: Literal[0, 2, 4, 8] = Field(
        0,
        description=_taken_by(
            "quant_bits",
            "bits per value of the outer exchange: 0 sends grad_dtype (value_dtype) values; 2, 4 or 8 send "
            "integers with one fp32 scale per quant_block values, all-gathered and summed in fp32 on every rank.",
        ),
        json_schema_extra=PAYLOAD,
    )
    quant_block: int = Field(
        2048,
        ge=16,
        le=1 << 20,
        description=_taken_by("quant_block", "values sharing one fp32 scale when quant_bits is set."),
        json_schema_extra=PAYLOAD,
    )
    # sparseloco (topk, chunk and index_dtype above pick its chunk-wise top-k; outer_lr its outer step)
    error_decay: float = Field(
        0.95,
        ge=0.0,
        lt=1.0,
        description=_taken_by("error_decay", "decay of the error-feedback buffer the outer gradient accumulates in."),
    )
    # base optimizer applying the synchronised update
    # auto: adamw for full/diloco inner, sgd for dct/random/striding; decoupled_adamw: AdamW with local moments whose
    # direction is what the replicator synchronises; lowrank: the element-wise optimizer of its 1-D and embedding
    # tensors (auto: adamw); mtdao ignores it (its own local QH-Adam)
    optimizer: Literal["auto", "sgd", "adamw", "decoupled_adamw"] = Field(
        "auto",
        description="Base optimizer: auto (the replicator's own), sgd, adamw, or decoupled_adamw (AdamW with local "
        "moments; the replicator synchronises its direction).",
    )
    lr: float = Field(0.0, ge=0.0, description="Base learning rate; 0 picks the replicator's default.")
    seed: int = Field(
        0,
        ge=0,
        description="shared seed for random/striding selections and lowrank's initial right factors",
        json_schema_extra=FILE_ONLY,
    )
    # pipelining (dct, random, striding, full): encode bucket i+1 while bucket i is on the wire
    bucket_mb: float = Field(
        0.0,
        ge=0.0,
        le=4096.0,
        description=_taken_by(
            "bucket_mb",
            "megabytes per pipelined collective (encode, wire and decode of successive buckets overlap); "
            "0: one collective per step.",
        ),
        json_schema_extra=PAYLOAD,
    )  # 1e6 B of payload
    # started from backward's post-accumulate-grad hooks
    overlap_backward: bool = Field(
        True,
        description=_taken_by(
            "overlap_backward",
            "on the transformer and mlp workloads, encode and send each bucket "
            "from backward as soon as its gradients exist (as DDP).",
        ),
    )

    @field_validator("name")
    @classmethod
    def _name_declared(cls, v: str) -> str:
        spec(v)  # ValueError naming the declared replicators
        return v

    @field_validator("rank")
    @classmethod
    def _rank_integral_when_absolute(cls, v: float) -> float:
        if v >= 1 and v != int(v):
            raise ValueError(f"must be an integer >= 1 or a fraction below 1, got {v:g}")
        return v

    @model_validator(mode="after")
    def _topk_fits_a_chunk(self) -> ReplicatorConfig:
        if self.topk > self.chunk * self.chunk:
            raise ValueError(
                f"topk {self.topk} is larger than a chunk ({self.chunk}x{self.chunk} = "
                f"{self.chunk * self.chunk} coefficients)"
            )
        return self

    @model_validator(mode="after")
    def _index_dtype_holds_a_chunk_position(self) -> ReplicatorConfig:
        # Positions inside an s x s tile run to s*s - 1; int16 stops at 32767 (s <= 181).
        if self.index_dtype == "int16" and self.chunk * self.chunk - 1 > 32767:
            raise ValueError(
                f"index_dtype int16 cannot hold positions of {self.chunk}x{self.chunk} chunks; use auto, int32 or int64"
            )
        return self

    @model_validator(mode="after")
    def _fragments_fit_the_cycle(self) -> ReplicatorConfig:
        # Only where the replicator takes fragments: a sweep may set them beside replicators that ignore them.
        if "fragments" not in spec(self.name).options:
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


def fields_with_role(role: str) -> tuple[str, ...]:
    """The fields whose declaration gives them ``role`` (``payload``, ``file``), in declaration order."""
    return tuple(
        name
        for name, info in ReplicatorConfig.model_fields.items()
        if (info.json_schema_extra or {}).get("role") == role
    )


def command_line_fields() -> tuple[str, ...]:
    """The settings a training command (run, worker, sweep) offers as options: every field but the replicator's name
    and those only a scenario file sets, in declaration order."""
    return tuple(
        name
        for name, info in ReplicatorConfig.model_fields.items()
        if name != "name" and (info.json_schema_extra or {}).get("role") != FILE_ONLY["role"]
    )
