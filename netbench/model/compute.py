"""Compute time of a training step from the model's FLOPs, the accelerator and the batch.

FLOPs per token of forward + backward: 6 N (two for the forward's multiply-add of every weight, four for the
backward's two products; Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1) plus the
attention scores, 12 L d s (Q K^T and the weighted sum of V, 2 d s each per layer and token forward, three times
that with backward; PaLM, Chowdhery et al. 2022, appendix B), counted for the full s x s score matrix as both
papers do (a causal kernel skips half of it: the figure is what the MFU convention divides by, not what the
kernel executes). A step of T tokens (the global batch) on W accelerators of peak P at utilisation MFU takes::

    compute = T x flops_per_token / (W x P x MFU)

The model's layers are read from its parameter names (``layers.N.``, ``h.N.``, ``blocks.N.``); what sits outside
them (embedding, final norm, output head) joins the first or the last layer, which is where the schedule meets
it (the embedding's gradient is ready last in backward, the head's first).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from netbench.model.accelerators import Accelerator
from netbench.settings import Setting, table
from netbench.shapes import ParamShape

__all__ = ["ModelShape", "model_shape", "flops_per_token", "compute_time_s", "ComputeSpec"]

_LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)\.")
_HEAD_SIDE = re.compile(r"(lm_head|head|output|norm|ln_f)", re.IGNORECASE)


@dataclass(frozen=True)
class ModelShape:
    """What the compute model and the layer schedule read from a shape list.

    ``layer_params``: parameters per layer in forward order (the embedding in the first, the head in the last);
    ``d_model``: the hidden width (None where the shapes do not say: the attention term is then left out).
    """

    params: int
    layer_params: tuple[int, ...]
    d_model: int | None

    @property
    def layers(self) -> int:
        return len(self.layer_params)


def model_shape(shapes: Sequence[ParamShape], layers: int | None = None) -> ModelShape:
    """Layers and width of ``shapes``; ``layers`` splits a model whose names say nothing into that many equal
    layers (and overrides what the names say)."""
    params = sum(s.numel for s in shapes)
    if layers:
        base, extra = divmod(params, layers)
        return ModelShape(params, tuple(base + (1 if i < extra else 0) for i in range(layers)), _width(shapes))
    by_layer: dict[int, int] = {}
    before, after = 0, 0
    for s in shapes:
        m = _LAYER.search(s.name)
        if m:
            by_layer[int(m.group(1))] = by_layer.get(int(m.group(1)), 0) + s.numel
        elif by_layer or _HEAD_SIDE.search(s.name) and not s.name.startswith(("embed", "wte", "wpe", "tok")):
            after += s.numel
        else:
            before += s.numel
    if not by_layer:
        return ModelShape(params, (params,), _width(shapes))
    counts = [by_layer[k] for k in sorted(by_layer)]
    counts[0] += before
    counts[-1] += after
    return ModelShape(params, tuple(counts), _width(shapes))


def _width(shapes: Sequence[ParamShape]) -> int | None:
    """The hidden width: a norm's length, else the embedding's row length."""
    for s in shapes:
        if len(s.shape) == 1 and ("norm" in s.name or ".ln_" in s.name):
            return s.shape[0]
    for s in shapes:
        if len(s.shape) == 2 and s.name.startswith(("embed", "wte", "tok")):
            return s.shape[1]
    return None


def flops_per_token(model: ModelShape, seq_len: int) -> float:
    """Forward + backward FLOPs per token: 6 N + 12 L d s (the attention term only where the width is known)."""
    attention = 12 * model.layers * model.d_model * seq_len if model.d_model else 0
    return 6.0 * model.params + attention


@dataclass(frozen=True)
class ComputeSpec:
    """How a step's compute is sized: the accelerator, its utilisation and the global batch in tokens."""

    accelerator: Accelerator
    mfu: float
    tokens_per_step: float
    seq_len: int

    def __post_init__(self) -> None:
        if not 0 < self.mfu <= 1:
            raise ValueError(f"mfu must be in (0, 1], got {self.mfu}")
        if self.tokens_per_step <= 0 or self.seq_len <= 0:
            raise ValueError("tokens per step and sequence length must be positive")


def compute_time_s(model: ModelShape, spec: ComputeSpec, workers: int) -> float:
    """Forward + backward time of one step: the global batch's FLOPs spread over ``workers`` accelerators."""
    flops = spec.tokens_per_step * flops_per_token(model, spec.seq_len)
    return flops / (workers * spec.accelerator.bf16_flops * spec.mfu)


# The compute term of plan on an accelerator: its FLOPs at a utilisation, for a batch of tokens
COMPUTE_SETTINGS = table(
    (
        Setting(
            "--accelerator",
            "accelerator_name",
            "text",
            "the GPUs (h100-sxm, h200, h800, gh200, a100-80gb, a100-40gb, v100, l40s, mi300x, b200): compute from the "
            "model's FLOPs with --batch; with --backend nccl also their links and codec profile.",
        ),
        Setting(
            "--mfu",
            "mfu",
            "factor",
            "model FLOPs utilisation of the compute term (0-1].",
            default=0.4,
            range=(1e-3, 1.0),
        ),
        Setting("--batch", "batch", "count", "global batch per step in sequences of --seq tokens.", range=(1, 1e9)),
        Setting(
            "--seq",
            "seq_len",
            "count",
            "sequence length in tokens (FLOPs of attention; with --batch).",
            default=2048,
            range=(1, 1e7),
        ),
        Setting("--tokens-per-step", "tokens_per_step", "text", "global batch per step in tokens, instead of --batch."),
        Setting(
            "--layers",
            "layers",
            "count",
            "layers of the GPU backends' layer schedule [default: from the shapes' names]; with --params, the "
            "synthetic model's layers (Streaming DiLoCo's fragments group them).",
            range=(1, 1e5),
        ),
    )
)
