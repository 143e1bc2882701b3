"""Settings several replicators take, each declared once: a replicator's settings class composes the ones it reads.

A replicator's own settings class (beside its declaration, in its ``*_spec`` module) inherits the classes below that
it reads and adds its own fields; :class:`~netbench.declarations.config.ReplicatorConfig` composes every
declaration's class into the one validated object that travels. A field's description is the help of its
command-line option; the config prefixes it with the replicators that take it. List a class's bases in the order
this module declares them, so that every composition has one method resolution order.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "FILE_ONLY",
    "PAYLOAD",
    "decay",
    "ReplicatorSettings",
    "GradSettings",
    "DecoupledMomentumSettings",
    "ValueSettings",
    "TileSettings",
    "OuterStepSettings",
    "OuterMomentumSettings",
    "StatePeriodSettings",
    "QuantSettings",
    "ErrorFeedbackSettings",
    "BucketSettings",
    "BackwardHookSettings",
    "SeedSettings",
]

# The role of a setting only a scenario file sets: the optimizers' constants (momentum decays, outer step, seed) are
# tuned once per replicator, not per run, so no command offers them as options.
FILE_ONLY = {"role": "file"}
# The role of a setting that changes the bytes a step sends or what they cost to encode (a dtype, a rate, a period,
# a bucket size): plan and calibrate take these, as run does, because the model prices them.
PAYLOAD = {"role": "payload"}


def decay(default: float, description: str) -> Any:
    """A decay constant in [0, 1) that only a scenario file sets (a momentum's beta)."""
    return Field(default, ge=0.0, lt=1.0, description=description, json_schema_extra=FILE_ONLY)


class ReplicatorSettings(BaseModel):
    """The base of every settings class: ``FORMER_NAMES`` maps a name a stored run or scenario file may still use
    to the field it names for the replicators that take this class (``{"beta": "beta1"}``)."""

    # a settings class is validated only as a base of the replicator's config: its own validator is built when first
    # used (never, for most), not when the class is declared
    model_config = ConfigDict(defer_build=True)

    FORMER_NAMES: ClassVar[dict[str, str]] = {}


class GradSettings(ReplicatorSettings):
    """Dense exchanges of gradients or weights, in one wire dtype."""

    grad_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description="all-reduce dtype (fp32, bf16).", json_schema_extra=PAYLOAD
    )


class ValueSettings(ReplicatorSettings):
    """Sparse exchanges of values (with or without their positions), in one wire dtype."""

    value_dtype: Literal["fp32", "bf16"] = Field(
        "fp32", description="wire dtype of values (fp32, bf16).", json_schema_extra=PAYLOAD
    )


class DecoupledMomentumSettings(ValueSettings):
    """A decoupled momentum (DeMo's): each rank accumulates its gradients, sends a part and keeps the rest."""

    FORMER_NAMES: ClassVar[dict[str, str]] = {"beta": "momentum_decay"}

    momentum_decay: float = decay(0.999, "decay of the decoupled momentum the gradients accumulate in.")
    sign: bool = Field(True, description="sign of the decoded update, as DeMo.")


class TileSettings(ReplicatorSettings):
    """The top-k of every s x s chunk (:mod:`netbench.declarations.tiling`), sent with its positions."""

    topk: int = Field(32, ge=1, description="coefficients kept per chunk.", json_schema_extra=PAYLOAD)
    chunk: int = Field(
        64, ge=1, le=4096, description="chunk side s.", json_schema_extra=PAYLOAD
    )  # s x s chunks of matrices, s-long chunks of vectors
    index_dtype: Literal["auto", "int16", "int32", "int64"] = Field(
        "auto", description="wire dtype of indices (auto, int16, int32, int64).", json_schema_extra=PAYLOAD
    )  # auto: the smallest that holds a chunk position

    @model_validator(mode="after")
    def _topk_fits_a_chunk(self) -> TileSettings:
        if self.topk > self.chunk * self.chunk:
            raise ValueError(
                f"topk {self.topk} is larger than a chunk ({self.chunk}x{self.chunk} = "
                f"{self.chunk * self.chunk} coefficients)"
            )
        return self

    @model_validator(mode="after")
    def _index_dtype_holds_a_chunk_position(self) -> TileSettings:
        # Positions inside an s x s tile run to s*s - 1; int16 stops at 32767 (s <= 181).
        if self.index_dtype == "int16" and self.chunk * self.chunk - 1 > 32767:
            raise ValueError(
                f"index_dtype int16 cannot hold positions of {self.chunk}x{self.chunk} chunks; use auto, int32 or int64"
            )
        return self


class OuterStepSettings(ReplicatorSettings):
    """Local steps, then an outer step every ``sync_every`` (H) on what the ranks exchanged."""

    sync_every: int = Field(
        10, ge=1, description="local steps between outer synchronisations (H).", json_schema_extra=PAYLOAD
    )  # H, between outer exchanges
    outer_lr: float = Field(0.7, gt=0.0, json_schema_extra=FILE_ONLY)


class OuterMomentumSettings(OuterStepSettings):
    """An outer step with Nesterov momentum (DiLoCo's outer optimizer)."""

    outer_momentum: float = Field(0.9, ge=0.0, lt=1.0, json_schema_extra=FILE_ONLY)


class StatePeriodSettings(ReplicatorSettings):
    """Parameters averaged every ``params_every`` steps (K_x) beside optimizer state on periods of its own."""

    params_every: int = Field(
        32, ge=1, description="steps between parameter all-reduces (K_x).", json_schema_extra=PAYLOAD
    )


class QuantSettings(ReplicatorSettings):
    """Outer exchanges sent as low-bit integers with block scales (:mod:`netbench.declarations.quant_wire`)."""

    quant_bits: Literal[0, 2, 4, 8] = Field(
        0,
        description="bits per value of the outer exchange: 0 sends grad_dtype (value_dtype) values; 2, 4 or 8 send "
        "integers with one fp32 scale per quant_block values: a mean through a ring that sums in fp32 and "
        "requantizes at every hop, a selection all-gathered and summed in fp32 on every rank.",
        json_schema_extra=PAYLOAD,
    )
    quant_block: int = Field(
        2048,
        ge=16,
        le=1 << 20,
        description="values sharing one fp32 scale when quant_bits is set.",
        json_schema_extra=PAYLOAD,
    )


class ErrorFeedbackSettings(ReplicatorSettings):
    """An outer gradient folded into an error buffer that keeps what the wire's compression left out."""

    error_decay: float = Field(
        0.95,
        ge=0.0,
        lt=1.0,
        description="decay of the error-feedback buffer the outer gradient accumulates in.",
    )


class BucketSettings(ReplicatorSettings):
    """A step cut into pipelined collectives: encode bucket i+1 while bucket i is on the wire."""

    bucket_mb: float = Field(
        0.0,
        ge=0.0,
        le=4096.0,
        description="megabytes per pipelined collective (encode, wire and decode of successive buckets overlap); "
        "0: one collective per step.",
        json_schema_extra=PAYLOAD,
    )  # 1e6 B of payload


class BackwardHookSettings(ReplicatorSettings):
    """Buckets started from backward's post-accumulate-grad hooks (a declaration with ``backward_hooks``)."""

    overlap_backward: bool = Field(
        True,
        description="on the transformer and mlp workloads, encode and send each bucket "
        "from backward as soon as its gradients exist (as DDP).",
    )


class SeedSettings(ReplicatorSettings):
    """A selection or initial state drawn alike on every rank from one seed."""

    seed: int = Field(
        0, ge=0, description="shared seed of the ranks' selections and initial factors.", json_schema_extra=FILE_ONLY
    )
