"""A sweep's predictions made again with other model constants (``netbench report --calibration``).

Each measured point is predicted from its own run directory (its recorded config, steps.csv, parameter
count and parameter shapes, read as untrusted input) and the new figures replace the predicted columns of
summary.csv; sweep.json records the calibration they came from. The measurements are never touched, and the
report then reads the stored predictions as it reads any sweep's.

Reading a run runs nothing of it: the workload's shapes are the ones its run recorded, or those its settings
declare (a built-in model, a preset), within the same caps as the command line's; a shapes file a stored run
names is not read and a python: workload is not imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from netbench.calibrate.hostcache import load_calibration
from netbench.model.calibration import Calibration
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import kernel_clock, predict_run
from netbench.rundir.layout import RunDir
from netbench.rundir.reading import parse_csv, read_csv, validated
from netbench.rundir.runjson import read_run_json, recorded_dilation, recorded_shapes
from netbench.rundir.summary import csv_predicted, predicted_column
from netbench.rundir.sweepdir import (
    MAX_ROWS,
    SUMMARY,
    SWEEP_JSON,
    TEXT,
    checked_summary,
    read_summary,
    read_sweep_json,
    run_path,
    sweep_doc,
    write_summary,
    write_sweep_doc,
)
from netbench.shapes import names_a_file
from netbench.untrusted import parse_json
from netbench.workloads.config import STORED

__all__ = ["recorded_calibration", "repredict"]


def recorded_calibration(folder: Path) -> Calibration:
    """The calibration a sweep's predictions used, as its sweep.json records it (BadInput when it is not one)."""
    recorded = read_sweep_json(folder).get("calibration") or {}
    data = {k: v for k, v in recorded.items() if k != "path"} if isinstance(recorded, dict) else recorded
    return validated(Calibration, data, folder / SWEEP_JSON) if data else Calibration()


def _predict_again(run_dir: Path, calibration: Calibration) -> dict[str, Any]:
    """One point's prediction from its own run directory (BadInput for a run.json that is not one)."""
    folder = RunDir(run_dir)
    doc = read_run_json(run_dir)
    config = validated(RunConfig, doc.get("config"), folder.run_json, context=STORED)
    recorded = recorded_shapes(doc, folder.run_json)
    work = config.workload
    if recorded is None and (work.kind == "python" or (work.kind == "shapes" and names_a_file(work.shapes))):
        return {"error": "the run recorded no parameter shapes (its python: workload or shapes file is not read)"}
    if not os.path.lexists(folder.steps_csv):
        return {"error": "no steps.csv"}
    steps = read_csv(folder.steps_csv)
    clock = kernel_clock(steps, recorded_dilation(doc))
    return predict_run(config, steps, folder.start().get("n_params"), calibration, recorded=recorded, clock=clock)


def repredict(folder: Path, calibration_path: Path) -> None:
    """Re-predict every measured point of the sweep in ``folder`` with the calibration at ``calibration_path``."""
    calib = load_calibration(calibration_path)
    frame = read_summary(folder)
    for i, row in frame.iterrows():
        run_dir = run_path(folder, row["run_dir"])
        if row["status"] != "ok" or run_dir is None or not RunDir(run_dir).written:
            continue
        predicted = _predict_again(run_dir, calib)
        for key in csv_predicted():
            frame.loc[i, predicted_column(key)] = predicted.get(key, float("nan"))
        frame.loc[i, "prediction_error"] = predicted.get("error", "")
    doc = read_sweep_json(folder)
    doc["calibration"] = {"path": str(calibration_path), **json.loads(calib.model_dump_json())}
    _accepted(folder, frame, doc)  # nothing is written unless every later reader takes what is written
    write_summary(folder, frame)
    write_sweep_doc(folder, doc)


def _accepted(folder: Path, frame: pd.DataFrame, doc: dict[str, Any]) -> None:
    """BadInput unless summary.csv and sweep.json as they would be written read back as every command reads them."""
    checked_summary(parse_csv(frame.to_csv(index=False), folder / SUMMARY, TEXT, MAX_ROWS), folder / SUMMARY)
    sweep_doc(parse_json(json.dumps(doc), folder / SWEEP_JSON), folder)  # type: ignore[arg-type]
