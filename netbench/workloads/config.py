"""Validated settings of a workload (travels inside every worker's spec as JSON).

Bad settings are caught here, when the spec is built, rather than minutes later inside a
worker in some namespace: an unknown shapes preset fails validation with the preset parser's
own message.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from netbench.shapes import (
    ParamShape,
    check_param_count,
    check_tensor_count,
    names_a_file,
    resolve_shapes,
    total_params,
)

WorkloadKind = Literal["transformer", "mlp", "shapes", "python"]
WORKLOAD_KINDS: tuple[str, ...] = ("transformer", "mlp", "shapes", "python")
# Workloads that run one backward per step, so a gradient hook sees each gradient final: the worker attaches the
# replicator's backward hooks there (worker/loop.py), and the model overlaps buckets with backward there too.
BACKWARD_OVERLAP_WORKLOADS: tuple[str, ...] = ("transformer", "mlp")

_DEFAULT_BATCH = {"transformer": 16, "mlp": 512, "shapes": 0, "python": 0}
_FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
VOCAB = 256  # the transformer reads bytes
# Validation context of a workload read back from a folder or a stored run.json: a shapes file it names is not read
# (its shapes are the run's record), and nothing is imported. ``WorkloadConfig.model_validate(data, context=STORED)``.
STORED = {"stored": True}
MAX_COMPUTE_MS = 600_000.0  # ten minutes of stand-in compute per step: beyond that a typo, not an experiment


class WorkloadConfig(BaseModel):
    """What each node trains: a built-in model on local data, or fake parameters of a preset's shapes."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    # A description of a field with a command-line option is also its help (netbench/cli/fields.py).
    kind: WorkloadKind = Field(
        "transformer", description="transformer, mlp, shapes, or python:MODULE:FACTORY (your model and batches)."
    )
    seed: int = Field(
        0, ge=0, description="model init is seeded by seed alone (identical replicas); data by (seed, rank)"
    )
    batch_size: int = Field(
        0, ge=0, description="sequences (transformer) or samples (mlp) per step; 0 picks the kind's default"
    )
    # transformer
    seq_len: int = Field(64, ge=2, le=4096, description="transformer context length in bytes")
    d_model: int = Field(128, ge=8, description="transformer width")
    n_layers: int = Field(2, ge=1, description="transformer blocks")
    n_heads: int = Field(4, ge=1, description="attention heads (must divide d_model)")
    # mlp
    in_dim: int = Field(32, ge=1, description="mlp input features")
    hidden: int = Field(512, ge=1, description="mlp hidden width (student and teacher)")
    mlp_layers: int = Field(3, ge=1, description="mlp hidden layers")
    classes: int = Field(10, ge=2, description="mlp classes (labels are the teacher's argmax)")
    # shapes
    shapes: str = Field("gpt2-small:blocks=2", description="shapes workload: preset, llama:... spec or .json file.")
    compute_ms: float = Field(
        100.0, ge=0.0, le=MAX_COMPUTE_MS, description="shapes workload: stand-in forward/backward time."
    )
    target_scale: float = Field(
        0.02, gt=0.0, description="shapes kind: std of the quadratic's targets (GPT-2's init std)"
    )
    grad_noise: float = Field(0.5, ge=0.0, description="shapes kind: per-step gradient noise, relative to target_scale")
    heterogeneity: float = Field(
        0.3, ge=0.0, description="shapes kind: spread of per-rank targets around the shared one"
    )
    # python
    factory: str = Field(
        "", description="python kind: MODULE:FACTORY returning (model, batches[, loss_fn]) (netbench.workloads.python)"
    )

    @model_validator(mode="before")
    @classmethod
    def _split_python(cls, data: Any) -> Any:
        """``kind="python:MODULE:FACTORY"`` (how --workload and scenario files write it) -> kind python + factory."""
        if isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"].startswith("python:"):
            data = {**data, "kind": "python", "factory": data["kind"].removeprefix("python:")}
        return data

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> WorkloadConfig:
        if self.kind == "transformer" and self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.kind == "shapes":
            if not ((info.context or {}).get("stored") and names_a_file(self.shapes)):
                self.shape_list()  # the parser's message on an unknown preset or bad file (and checks its size)
        elif self.kind == "python":
            if not _FACTORY.fullmatch(self.factory):
                raise ValueError(
                    f"kind python needs MODULE:FACTORY, as in --workload python:mymodel:make (got {self.factory!r})"
                )
        else:
            check_param_count(self.param_count(), f"{self.kind} workload")  # a ShapeError: pydantic keeps it
            check_tensor_count(self.tensor_count(), f"{self.kind} workload")
        return self

    def tensor_count(self) -> int:
        """Parameter tensors of a built-in model, counted from the settings (0 for the other kinds)."""
        if self.kind == "transformer":
            return 2 + 12 * self.n_layers + 3
        if self.kind == "mlp":
            return 2 * (self.mlp_layers + 1)
        return 0

    def declared_shapes(self) -> list[ParamShape] | None:
        """The parameter shapes the workers train, from the settings alone (nothing built, nothing imported): a
        built-in model's as workloads/transformer.py and workloads/mlp.py build it, a preset's or file's; None for
        a python: workload, whose shapes are known once its factory runs.
        """
        if self.kind == "shapes":
            return self.shape_list()
        if self.kind == "python":
            return None
        if self.kind == "transformer":
            d = self.d_model
            block = [
                ("ln_1.weight", (d,)),
                ("ln_1.bias", (d,)),
                ("qkv.weight", (3 * d, d)),
                ("qkv.bias", (3 * d,)),
                ("proj.weight", (d, d)),
                ("proj.bias", (d,)),
                ("ln_2.weight", (d,)),
                ("ln_2.bias", (d,)),
                ("fc.weight", (4 * d, d)),
                ("fc.bias", (4 * d,)),
                ("fc_proj.weight", (d, 4 * d)),
                ("fc_proj.bias", (d,)),
            ]
            return [
                ParamShape("tok_emb.weight", (VOCAB, d)),
                ParamShape("pos_emb.weight", (self.seq_len, d)),
                *(ParamShape(f"blocks.{i}.{name}", dims) for i in range(self.n_layers) for name, dims in block),
                ParamShape("ln_f.weight", (d,)),
                ParamShape("ln_f.bias", (d,)),
                ParamShape("head.weight", (VOCAB, d)),
            ]
        widths = [self.in_dim] + [self.hidden] * self.mlp_layers + [self.classes]
        shapes = []
        for i, (a, b) in enumerate(zip(widths, widths[1:])):  # nn.Sequential: Linear, ReLU, Linear, ..., Linear
            shapes += [ParamShape(f"{2 * i}.weight", (b, a)), ParamShape(f"{2 * i}.bias", (b,))]
        return shapes

    def param_count(self) -> int:
        """Parameters each node trains, counted from the settings (the models are built as in
        workloads/transformer.py and workloads/mlp.py; tests/test_bad_input.py holds the count against them)."""
        if self.kind == "shapes":
            return total_params(self.shape_list())
        if self.kind == "python":
            return 0  # unknown until the user's factory builds it (the orchestrator calls it before the cluster)
        if self.kind == "transformer":
            d = self.d_model
            per_block = 12 * d * d + 13 * d  # layer norms, qkv, projection, 4x MLP (with biases)
            return (
                VOCAB * d + self.seq_len * d + self.n_layers * per_block + 2 * d + VOCAB * d
            )  # byte embeddings, positions, ln_f, head
        widths = [self.in_dim] + [self.hidden] * self.mlp_layers + [self.classes]
        return sum(a * b + b for a, b in zip(widths, widths[1:]))

    @property
    def effective_batch_size(self) -> int:
        """The batch size actually used: the configured one, or the kind's default when 0."""
        return self.batch_size or _DEFAULT_BATCH[self.kind]

    def shape_list(self) -> list[ParamShape]:
        """The shapes kind's parameter shapes (a ShapeError, a ValueError, with a user-facing message if unusable)."""
        return resolve_shapes(self.shapes)
