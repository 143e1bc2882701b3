"""Replicator and workload options shared by `run`, `sweep` and `worker`, built into validated configs."""

from __future__ import annotations

from typing import Any

import pydantic
import typer

from netbench.cli.errors import UserError, one_line
from netbench.replicators.config import ReplicatorConfig
from netbench.shapes import ShapeError, resolve_shapes
from netbench.workloads.config import WorkloadConfig

ReplicatorOpt = typer.Option("dct", "--replicator", "-r", help="full, dct, random, striding, diloco, lowrank or mtdao.")
TopkOpt = typer.Option(32, "--topk", help="dct: coefficients kept per chunk.")
ChunkOpt = typer.Option(64, "--chunk", help="dct: chunk side s.")
RateOpt = typer.Option(0.1, "--rate", help="random/striding: fraction sent per step, in (0, 1].")
SyncEveryOpt = typer.Option(10, "--sync-every", help="diloco: local steps between all-reduces.")
ValueDtypeOpt = typer.Option("fp32", "--value-dtype", help="dct: wire dtype of values (fp32, bf16).")
IndexDtypeOpt = typer.Option("auto", "--index-dtype", help="dct: wire dtype of indices (auto, int16, int32, int64).")
GradDtypeOpt = typer.Option("fp32", "--grad-dtype", help="full/diloco/lowrank/mtdao: all-reduce dtype (fp32, bf16).")
RankOpt = typer.Option(4.0, "--rank", help="lowrank: factor rank r (an integer >= 1) or a fraction of min(m, n) (< 1).")
MuOpt = typer.Option(0.95, "--mu", help="lowrank: momentum decay mu, in [0, 1).")
ParamsEveryOpt = typer.Option(32, "--params-every", help="mtdao: steps between parameter all-reduces (K_x).")
M1EveryOpt = typer.Option(32, "--m1-every", help="mtdao: steps between first-momentum all-reduces (K_1).")
M2EveryOpt = typer.Option(32, "--m2-every", help="mtdao: steps between second-momentum all-reduces (K_v).")
SignOpt = typer.Option(True, "--sign/--no-sign", help="dct: sign of the decoded update, as DeMo.")
LrOpt = typer.Option(0.0, "--lr", help="Base learning rate; 0 picks the replicator's default.")
BucketMbOpt = typer.Option("auto", "--bucket-mb", help="dct/random/striding/full: megabytes per pipelined collective "
                           "(encode, wire and decode of successive buckets overlap); 0: one collective per step; auto: from the link.")
OverlapBackwardOpt = typer.Option(True, "--overlap-backward/--no-overlap-backward", help="dct on the transformer and mlp "
                                  "workloads: encode and send each bucket from backward as soon as its gradients exist (as DDP).")
WorkloadOpt = typer.Option("transformer", "--workload", "-w", help="transformer, mlp, shapes, or python:MODULE:FACTORY (your model and batches).")
ShapesOpt = typer.Option("gpt2-small:blocks=2", "--shapes", help="shapes workload: preset, llama:... spec or .json file.")
ComputeMsOpt = typer.Option(100.0, "--compute-ms", help="shapes workload: stand-in forward/backward time.")

_REPLICATOR_OPTIONS = {"name": "--replicator", "topk": "--topk", "chunk": "--chunk", "rate": "--rate", "sync_every": "--sync-every",
                       "value_dtype": "--value-dtype", "index_dtype": "--index-dtype", "grad_dtype": "--grad-dtype", "lr": "--lr",
                       "rank": "--rank", "mu": "--mu", "params_every": "--params-every", "m1_every": "--m1-every",
                       "m2_every": "--m2-every", "bucket_mb": "--bucket-mb"}
_WORKLOAD_OPTIONS = {"kind": "--workload", "shapes": "--shapes", "compute_ms": "--compute-ms"}


def build_replicator_config(name: str, **settings: Any) -> ReplicatorConfig:
    """``ReplicatorConfig(name=name, **settings)``; a bad value is a UserError naming its option."""
    try:
        return ReplicatorConfig(name=name, **settings)
    except pydantic.ValidationError as exc:
        message = one_line(exc, _REPLICATOR_OPTIONS)
        if message.startswith("topk "):
            message = "--topk: " + message
        raise UserError(message) from None


def build_workload_config(kind: str, shapes: str, compute_ms: float) -> WorkloadConfig:
    """The workload; ``--shapes`` is checked whatever the kind (a config only checks it for shapes,
    so a spec stays portable): an unknown preset or unreadable file typed here is a mistake."""
    try:
        resolve_shapes(shapes)
        return WorkloadConfig(kind=kind, shapes=shapes, compute_ms=compute_ms)
    except ShapeError as exc:
        raise UserError(f"--shapes: {exc}") from None
    except pydantic.ValidationError as exc:
        message = one_line(exc, _WORKLOAD_OPTIONS)
        if not message.startswith("--"):
            message = ("--workload: " if kind.startswith("python") else "--shapes: ") + message
        raise UserError(message) from None


def check_workload(workload: WorkloadConfig, world_size: int) -> None:
    """A python:MODULE:FACTORY workload is imported and called here, so a mistake costs one line, not a cluster."""
    if workload.kind != "python":
        return
    from netbench.workloads.python import FactoryError, check_factory

    try:
        check_factory(workload, world_size)
    except FactoryError as exc:
        raise UserError(f"--workload python:{workload.factory}: {exc}") from None


def with_bucket_mb(rep: ReplicatorConfig, text: str, rate_bps: float | None, rtt_s: float,
                   workload: WorkloadConfig, world_size: int) -> ReplicatorConfig:
    """``rep`` with ``--bucket-mb`` applied: a number, or ``auto`` (from the link and the step's payload).

    ``auto`` without a known link rate (an unshaped host) keeps one bucket.
    """
    if text.strip().lower() == "auto":
        if rate_bps is None:
            return rep
        from netbench.model.overlap import bucket_mb_for
        from netbench.orchestrator.prediction import workload_shapes
        from netbench.replicators import declared_payload

        payload = declared_payload(workload_shapes(workload, world_size), rep, world_size).bytes_per_step
        from netbench.model.overlap import BACKWARD_OVERLAP_WORKLOADS

        backward = rep.overlap_backward and workload.kind in BACKWARD_OVERLAP_WORKLOADS
        value = bucket_mb_for(rep.name, rate_bps, rtt_s, payload, world_size, backward=backward)
    else:
        try:
            value = float(text)
        except ValueError:
            raise UserError(f"--bucket-mb: expected a number of megabytes or auto, got {text!r}") from None
    return build_replicator_config(rep.name, **{**rep.model_dump(exclude={"name"}), "bucket_mb": value})
