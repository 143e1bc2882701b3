"""0/1 Adam's declaration (Lu et al. 2022, arXiv 2202.06009; DeepSpeed ``runtime/fp16/onebit/zoadam.py``): which
steps exchange what, from DeepSpeed's ``ZeroOneAdam`` counters, declared once for the codec, the run's accounting, the
replay and plan.

DeepSpeed counts its steps from a first call that only sets its buffers up, so the n-th training step is its step
k = n + 1 and every rule below reads k.

- Variance phase (training steps 1..``var_freeze_step``): on the steps k that are multiples of the variance interval
  the gradients are all-reduced densely and both moments updated; on the others each rank's gradient goes through
  the compressed all-reduce and only the momentum takes the result. The interval starts at 1 and doubles after every
  ``var_update_scaler`` variance updates.
- Local phase (after ``var_freeze_step``): each rank takes Adam steps on its own gradients with the frozen variance,
  and on the steps k that are multiples of the local-step interval the accumulated update goes through the compressed
  all-reduce. The interval starts at 1 and doubles (up to ``local_step_clipper``) every ``local_step_scaler`` steps;
  once it reaches the clipper the phase lasts, and the model prices it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from netbench.declarations.onebit_spec import compressed_allreduce
from netbench.declarations.shared_settings import PAYLOAD, ReplicatorSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

StepKind = Literal["dense", "compressed", "local", "sync"]


@dataclass(frozen=True)
class Phase:
    """Training steps ``first``..``last`` (last 0: to the end of the run) with one interval: a variance phase's steps
    on the interval update the variance (dense), the others compress the gradients; a local phase's steps on the
    interval sync the accumulated update, the others are local."""

    first: int
    last: int
    interval: int
    variance: bool

    def kind(self, step: int) -> StepKind:
        """What training ``step`` (in this phase) does: DeepSpeed's k = step + 1 on the interval or not."""
        on = (step + 1) % self.interval == 0
        if self.variance:
            return "dense" if on else "compressed"
        return "sync" if on else "local"


@lru_cache(maxsize=256)
def _phases(var_freeze_step: int, var_update_scaler: int, local_step_scaler: int, clipper: int) -> tuple[Phase, ...]:
    out: list[Phase] = []
    k, interval = 2, 1  # DeepSpeed's step of the first training step, and its var_interval
    while k - 1 <= var_freeze_step:
        first_update = -(-k // interval) * interval
        end = first_update + (var_update_scaler - 1) * interval  # the step whose update doubles the interval
        out.append(Phase(k - 1, min(end - 1, var_freeze_step), interval, True))
        k, interval = end + 1, 2 * interval
    step, interval = var_freeze_step + 1, 1
    while interval < clipper:
        out.append(Phase(step, step + local_step_scaler - 1, interval, False))
        step, interval = step + local_step_scaler, min(clipper, 2 * interval)
    out.append(Phase(step, 0, interval, False))
    return tuple(out)


def phases(config: Settings) -> tuple[Phase, ...]:
    """Every phase of a run of ``config``, in order, the last one lasting."""
    return _phases(
        config.var_freeze_step, config.var_update_scaler, config.local_step_scaler, config.local_step_clipper
    )


def step_kind(config: Settings, step: int) -> StepKind:
    """What 1-based training ``step`` does (:class:`Phase`)."""
    return next(p for p in phases(config) if p.last == 0 or step <= p.last).kind(step)


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    """Per phase: a variance phase's dense fp32 all-reduce of the gradients on its interval's steps and their
    compressed all-reduce on the others; a local phase's compressed all-reduce of the accumulated update on its
    interval's steps (DeepSpeed's k = step + 1 a multiple of the interval: offset interval - 1)."""
    numel = sum(s.numel for s in shapes)
    parts: list[PayloadDecl] = []
    for p in phases(config):
        where = dict(period=p.interval, offset=p.interval - 1, steps=(p.first, p.last))
        if p.variance:
            parts.append(PayloadDecl("all_reduce", 4 * numel, label="variance", **where))
            if p.interval > 1:
                parts += compressed_allreduce(numel, world_size, others=True, **where)
        else:
            parts += compressed_allreduce(numel, world_size, **where)
    # the last phase's compressed all-reduce first: the exchange the model prices
    *opening, signs, worker_scales, server_signs, server_scales = parts
    return replace(signs, also=(worker_scales, server_signs, server_scales, *opening))


def period(config: Settings) -> int:
    """Steps between syncs in the lasting phase: ``local_step_clipper``."""
    return config.local_step_clipper


class ZeroOneSettings(ReplicatorSettings):
    """0/1 Adam's settings, DeepSpeed's names and defaults (its betas, eps and lr are its defaults too)."""

    var_freeze_step: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        description="the last step that may update the variance; after it the ranks take local steps and sync the "
        "accumulated update (DeepSpeed: the end of the learning-rate warm-up).",
        json_schema_extra=PAYLOAD,
    )
    var_update_scaler: int = Field(
        16,
        ge=1,
        le=1_000_000,
        description="variance updates (dense all-reduce steps) per variance interval; the interval then doubles "
        "(the paper's kappa).",
        json_schema_extra=PAYLOAD,
    )
    local_step_scaler: int = Field(
        32678,
        ge=1,
        le=10_000_000,
        description="steps after var_freeze_step between doublings of the local-step interval.",
        json_schema_extra=PAYLOAD,
    )
    local_step_clipper: int = Field(
        16,
        ge=1,
        le=1024,
        description="the largest local-step interval: steps between syncs once it is reached (the paper's H).",
        json_schema_extra=PAYLOAD,
    )


def state_bytes(config: Settings) -> float:
    """Adam's two moments, the flat gradient, the accumulated update, the weights at the last sync, the worker error
    and the padded working buffer (28), fp32, and the server error, 1/N of that (at most 2 at N >= 2)."""
    return 30


SPEC = ReplicatorSpec(
    codec_bytes_per_param=40,  # counted from the operations (an estimate): 1-bit Adam's compressed all-reduce
    state_bytes_per_param=state_bytes,
    name="zeroone",
    summary="0/1 Adam: variance updated on a growing interval, then local steps; syncs as error-fed sign bits",
    collective="all-to-all",
    payload=payload,
    codec="netbench.replicators.zeroone:ZeroOneAdamReplicator",
    order=13,
    settings=ZeroOneSettings,
    test_preset=TestPreset(
        check=dict(var_freeze_step=3, var_update_scaler=1, local_step_scaler=1, local_step_clipper=2, lr=0.01),
        train=dict(var_freeze_step=16, var_update_scaler=4, local_step_scaler=8, local_step_clipper=4, lr=0.01),
    ),
    cost_settings=("local_step_clipper",),  # its codec runs on one step in H of the lasting phase
    # the lasting phase after a few steps (the defaults reach it after 230,712), which is what the calibration times
    calibrated_with=dict(var_freeze_step=1, var_update_scaler=1, local_step_scaler=1),
    color="",
    period=period,
)
