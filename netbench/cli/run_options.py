"""Replicator and workload settings of `run`, `sweep` and `worker` (options: cli/fields.py), built into validated configs."""

from __future__ import annotations

from typing import Any

import pydantic

from netbench.cli import fields
from netbench.cli.errors import UserError
from netbench.cli.fields import option_names
from netbench.replicators.config import ReplicatorConfig
from netbench.shapes import ShapeError, resolve_shapes
from netbench.validation import one_line
from netbench.workloads.config import WorkloadConfig


def build_replicator_config(name: str, **settings: Any) -> ReplicatorConfig:
    """``ReplicatorConfig(name=name, **settings)``; a bad value is a UserError naming its option."""
    try:
        return ReplicatorConfig(name=name, **settings)
    except pydantic.ValidationError as exc:
        message = one_line(exc, option_names(fields.REPLICATOR), options=True)
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
        message = one_line(exc, option_names(fields.WORKLOAD), options=True)
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


def bucket_link(cluster, gpus_per_node: int = 1) -> tuple[float, float]:
    """(rate, round trip) ``--bucket-mb auto`` sizes buckets for: the ring's bottleneck on the cluster's graph and
    placement (a WAN link or a rack uplink where one is the narrowest, shared by the hops that cross it); the star's
    (or the hybrid mode's) ``min(up, down)`` and round trip."""
    if cluster.topology is None or gpus_per_node > 1:
        return min(cluster.up.rate_bps, cluster.down.rate_bps), cluster.expected_rtt_s()
    from netbench.model.network import GraphModel

    return GraphModel(cluster.graph, cluster.placement).ring_link()


def with_bucket_mb(
    rep: ReplicatorConfig,
    text: str,
    rate_bps: float | None,
    rtt_s: float,
    workload: WorkloadConfig,
    world_size: int,
    gpus_per_node: int = 1,
) -> ReplicatorConfig:
    """``rep`` with ``--bucket-mb`` applied: a number, or ``auto`` (from the link and the step's payload;
    with several accelerators per node the buckets queue on the replication subgroup's one lane).

    ``auto`` without a known link rate (an unshaped host) keeps one bucket.
    """
    if text.strip().lower() == "auto":
        if rate_bps is None:
            return rep
        from netbench.model.overlap import bucket_mb_for
        from netbench.orchestrator.prediction import workload_shapes
        from netbench.replicators import declared_payload

        payload = declared_payload(workload_shapes(workload, world_size), rep, world_size).bytes_per_step
        from netbench.workloads.config import BACKWARD_OVERLAP_WORKLOADS

        backward = rep.overlap_backward and workload.kind in BACKWARD_OVERLAP_WORKLOADS
        value = bucket_mb_for(
            rep.name, rate_bps, rtt_s, payload, world_size, backward=backward, concurrent=gpus_per_node == 1
        )
    else:
        try:
            value = float(text)
        except ValueError:
            raise UserError(f"--bucket-mb: expected a number of megabytes or auto, got {text!r}") from None
    return build_replicator_config(rep.name, **{**rep.model_dump(exclude={"name"}), "bucket_mb": value})
