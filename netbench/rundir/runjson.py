"""A run directory's run.json read back as untrusted input: the parts `netbench report RUN_DIR` shows, typed.

run.json's summary is :class:`~netbench.rundir.summary.RunSummary`; a run's table also needs its
coordinates, and `netbench exec` adds its nodes and command. A run.json that lacks them, or holds
another type, is one :class:`~netbench.untrusted.BadInput` line naming the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from netbench.rundir.layout import RunDir
from netbench.rundir.reading import BadInput, read_json_object, validated
from netbench.rundir.summary import Prediction, RunSummary
from netbench.shapes import ParamShape, ShapeError, shapes_from_json

__all__ = [
    "BadInput",
    "RunDoc",
    "ShownSummary",
    "read_run_json",
    "read_run_doc",
    "recorded_shapes",
    "recorded_dilation",
]


class _Lax(BaseModel):
    model_config = ConfigDict(extra="allow")


class FidelityDoc(_Lax):
    ok: bool
    reasons: list[str] = []
    dilation: float = 1.0


class ShownSummary(RunSummary):
    """A run's summary with what its table's title names: id, replicator, nodes, delay and status."""

    run_id: str
    replicator: str
    nodes: int
    delay_ms: float
    status: str
    fidelity: FidelityDoc | None = None
    predicted: Prediction | None = None


class ExecNode(_Lax):
    rank: int
    exit_code: int | None = None
    stopped_by: str | None = None
    wall_time_s: float
    cpu_time_s: float | None = None
    wire_tx_bytes: float | None = None
    wire_rx_bytes: float | None = None
    capture_wire_tx_bytes: float | None = None
    capture_wire_rx_bytes: float | None = None
    retransmissions: int | None = None


class ExecDoc(_Lax):
    nodes: list[ExecNode]
    command: list[str]


class RunDoc(_Lax):
    """run.json: the summary, who launched the run, how it ended, and `netbench exec`'s nodes."""

    summary: ShownSummary
    launcher: str | None = None
    status: str | None = None
    reason: str | None = None
    exec: ExecDoc | None = None


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run.json as a dict: a regular file, strict UTF-8, a JSON object (else BadInput)."""
    return read_json_object(RunDir(run_dir).run_json)


def recorded_dilation(doc: dict[str, Any]) -> float | None:
    """The time dilation run.json records (``dilation``: wall seconds per emulated second), or None where it records
    none a number can be taken from (a run directory written before it was recorded, or an edited one)."""
    value = doc.get("dilation")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def read_run_doc(run_dir: Path) -> RunDoc:
    """run.json's shown parts, typed (BadInput naming the first missing or mistyped field)."""
    path = RunDir(run_dir).run_json
    return validated(RunDoc, read_json_object(path), path)


def recorded_shapes(doc: dict[str, Any], path: Path) -> list[ParamShape] | None:
    """The parameter shapes run.json records (``workload.shapes``), within the shapes files' caps; None where it
    records none (a run from before they were recorded, or one whose shapes could not be had)."""
    workload = doc.get("workload")
    record = workload.get("shapes") if isinstance(workload, dict) else None
    if record is None:
        return None
    try:
        return shapes_from_json({"shapes": record}, f"{path}: workload.shapes")
    except ShapeError as exc:
        raise BadInput(str(exc)) from None
