"""This host's model constants: saved by ``netbench calibrate``, read by ``run``, ``sweep`` and ``plan``.

Defaults when nothing was measured are the ideal-link model -- zero software overhead, zero
compression cost -- marked ``source: "defaults"`` so every report can say it is uncalibrated
rather than silently use some other machine's numbers.

Location: ``--out``/``path`` argument, else ``$NETBENCH_CALIBRATION``, else
``~/.local/share/netbench/calibration.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from netbench import safe_files

__all__ = ["Calibration", "CalibrationError", "default_path", "load_calibration", "save_calibration", "ENV_VAR"]

ENV_VAR = "NETBENCH_CALIBRATION"
SCHEMA_VERSION = 1


class CalibrationError(ValueError):
    """A calibration file exists but cannot be used."""


class Calibration(BaseModel):
    """Measured constants of the analytic model; each has a neutral default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = SCHEMA_VERSION
    source: Literal["defaults", "measured"] = "defaults"
    created: str = Field("", description="ISO timestamp of the measurement")
    host: str = ""
    torch_version: str = ""
    software_overhead_s: float = Field(0.0, ge=0.0, description="per-message (per ring hop) software time, added to link delay")
    software_overhead_by_collective: dict[str, float] = Field(default_factory=dict, description="per-collective override of software_overhead_s")
    loopback_bandwidth_bps: float | None = Field(None, ge=0.0, description="reference only: gloo all_reduce goodput over 127.0.0.1")
    compression_s_per_param: dict[str, float] = Field(default_factory=dict, description="seconds of encode/decode per parameter per step, by scheme")
    acks_per_segment: float = Field(0.5, ge=0.0, le=1.0, description="pure ACK frames per data segment on the reverse path")
    notes: dict[str, str] = Field(default_factory=dict, description="how each value was obtained, or why it was skipped")

    def overhead(self, collective: str) -> float:
        """Software overhead per message for ``collective`` (its override, else the common value)."""
        return self.software_overhead_by_collective.get(collective, self.software_overhead_s)

    def compression(self, scheme: str) -> float:
        """Seconds per parameter per step of ``scheme``'s encode/decode (0 when not measured)."""
        return self.compression_s_per_param.get(scheme, 0.0)


def default_path() -> Path:
    """``$NETBENCH_CALIBRATION`` if set, else ``~/.local/share/netbench/calibration.json``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "netbench" / "calibration.json"


def load_calibration(path: str | Path | None = None) -> Calibration:
    """The saved calibration, or defaults when the file is absent; a broken file is an error, not defaults."""
    target = Path(path).expanduser() if path else default_path()
    if not target.exists():
        return Calibration()
    try:
        data = json.loads(target.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"calibration file {str(target)!r} cannot be read: {exc}") from None
    try:
        return Calibration.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise CalibrationError(f"calibration file {str(target)!r}: {where}: {err.get('msg')} (re-run netbench calibrate)") from None


def save_calibration(calibration: Calibration, path: str | Path | None = None) -> Path:
    """Write ``calibration`` as JSON (atomically, creating parent folders); returns the path."""
    target = Path(path).expanduser() if path else default_path()
    safe_files.make_folder(target.parent)  # UnsafeOutput (a ValueError) for a folder a stranger could redirect
    safe_files.write_text(target, calibration.model_dump_json(indent=2) + "\n")
    return target
