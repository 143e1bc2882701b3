"""A sweep folder's layout, written down once: the sweep writes it, reports and compare read it.

    OUT/
        summary.csv        one row per point: coordinates, measured and predicted figures
        sweep.json         the scenario and the calibration the predictions use
        calibration.json   this host's model constants, measured for the sweep
        runs/STAMP-LABEL-RUNID/   one run directory per point (:mod:`netbench.rundir.layout`)

Run directories are stored in summary.csv relative to the folder, so a copied folder still resolves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from netbench import safe_files

__all__ = ["SUMMARY", "SWEEP_JSON", "CALIBRATION", "TEXT", "is_sweep", "read_summary", "write_summary", "run_path",
           "read_sweep_json", "write_sweep_doc"]

SUMMARY = "summary.csv"
SWEEP_JSON = "sweep.json"
CALIBRATION = "calibration.json"
# summary.csv columns that hold text (an all-empty one would otherwise read back as float NaN)
TEXT = ("key", "label", "replicator", "bw", "delay", "status", "reason", "run_dir", "prediction_error", "statistic", "fidelity_reasons",
        "topology", "wan_bw", "wan_delay", "rank_order", "bottleneck_model", "busiest_link")


def is_sweep(folder: Path) -> bool:
    """A sweep folder has a summary.csv (a run directory has a run.json instead)."""
    return (folder / SUMMARY).is_file()


def read_summary(out: Path) -> pd.DataFrame:
    """summary.csv with its text columns as text; an empty frame with the key columns when there is none yet."""
    path = out / SUMMARY
    if not path.exists():
        return pd.DataFrame(columns=["key", "status", "run_dir"])
    frame = pd.read_csv(path, dtype={c: str for c in TEXT})
    for column in TEXT:
        if column in frame:
            frame[column] = frame[column].fillna("")
    return frame


def write_summary(out: Path, frame: pd.DataFrame) -> None:
    """Atomic rewrite, so an interrupted sweep never leaves half a CSV behind."""
    with safe_files.replace_from(out / SUMMARY) as fh:  # a fresh temporary name: never through a planted symlink
        frame.to_csv(fh, index=False)


def run_path(out: Path, run_dir: object) -> Path | None:
    """A row's run directory (stored relative to the sweep folder, so a copied folder still resolves)."""
    return out / str(run_dir) if isinstance(run_dir, str) and run_dir else None


def read_sweep_json(folder: Path) -> dict[str, Any]:
    """sweep.json as a dict ({} when the folder has none)."""
    path = folder / SWEEP_JSON
    return json.loads(path.read_text()) if path.exists() else {}


def write_sweep_doc(folder: Path, doc: dict[str, Any]) -> None:
    """sweep.json, written atomically."""
    safe_files.write_text(folder / SWEEP_JSON, json.dumps(doc, indent=2) + "\n")
