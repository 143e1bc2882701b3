"""Replicator and workload settings of `run`, `sweep` and `worker` (options: cli/fields.py), built into validated
configs.
"""

from __future__ import annotations

import os
from typing import Any

import pydantic

from netbench.cli import fields
from netbench.cli.errors import UserError
from netbench.cli.fields import option_names
from netbench.declarations.config import ReplicatorConfig
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


def name_for_run(workload: WorkloadConfig) -> None:
    """The user named ``workload`` for a run they start: a python:MODULE:FACTORY one may then be imported, its module
    from the working directory (netbench.workloads.python imports no other)."""
    if workload.kind != "python":
        return
    from netbench.workloads.python import name_for_run as allow  # late: keeps torch off this module's import

    allow(workload.factory, os.getcwd())


def check_workload(workload: WorkloadConfig, world_size: int) -> None:
    """A python:MODULE:FACTORY workload is imported and called here, so a mistake costs one line, not a cluster."""
    if workload.kind != "python":
        return
    from netbench.workloads.python import FactoryError, check_factory  # late: keeps torch off this module's import

    name_for_run(workload)
    try:
        check_factory(workload, world_size)
    except FactoryError as exc:
        raise UserError(f"--workload python:{workload.factory}: {exc}") from None


def bucket_choice(text: str) -> tuple[bool, float | None]:
    """``--bucket-mb`` as (auto, megabytes): ``auto`` sizes buckets from the link when the run is resolved
    (:func:`netbench.orchestrator.run.resolve.resolve`); a number is the replicator's own setting."""
    if text.strip().lower() == "auto":
        return True, None
    try:
        return False, float(text)
    except ValueError:
        raise UserError(f"--bucket-mb: expected a number of megabytes or auto, got {text!r}") from None


def replicator_from_options(name: str, settings: dict[str, Any], **extra: Any) -> tuple[ReplicatorConfig, bool]:
    """A training command's replicator from its options, and whether ``--bucket-mb`` was ``auto`` (the buckets are
    then sized when the run is resolved, :func:`netbench.orchestrator.run.resolve.resolve`)."""
    settings = dict(settings)
    auto, megabytes = bucket_choice(settings.pop("bucket_mb"))
    config = build_replicator_config(name, **settings, **({} if auto else {"bucket_mb": megabytes}), **extra)
    return config, auto
