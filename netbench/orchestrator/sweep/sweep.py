"""Run a scenario's grid point by point, resumably, keeping ``summary.csv`` current after each point.

Layout of a sweep folder::

    sweep.json        the scenario and the calibration the predictions use
    calibration.json  this host's model constants, when the scenario asks to measure them
    summary.csv       one row per point: measured, predicted (read from the run's run.json), fidelity, status,
                      run directory
    runs/<run>/       each point's run (steps.csv, run.json, worker records)

One sweep at a time per folder: :func:`sweep_lock` holds an exclusive ``flock`` on ``.sweep.lock`` in it for the
whole sweep, so two sweeps cannot each rewrite summary.csv without the other's rows.

Points that share a network run one after another on one cluster, their workers forked from one server that imported
torch once (:mod:`netbench.orchestrator.cluster_reuse`; ``--no-reuse``: each point builds its own).

Resuming: a point is done when summary.csv has a row with its key, status ok, and its run directory still holds
run.json; everything else is (re-)run. The key hashes the point's whole RunConfig, so changing steps or the workload
re-runs points instead of mixing results.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from netbench import untrusted
from netbench.calibrate.hostcache import HostCalibration
from netbench.model.calibration import Calibration
from netbench.orchestrator.cluster_reuse import ClusterReuse, order_by_network, reusable
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import kernel_clock, predict_run
from netbench.orchestrator.run.dilation import parse_dilation
from netbench.orchestrator.sweep.scenario import Point, SweepScenario
from netbench.rundir.layout import RunDir
from netbench.rundir.runjson import read_run_json, recorded_dilation
from netbench.rundir.summary import csv_measured, csv_predicted, predicted_column
from netbench.rundir.sweepdir import SUMMARY, read_summary, run_path, write_summary, write_sweep_doc

if TYPE_CHECKING:
    from netbench.orchestrator.cluster_reuse import ClusterReuse
    from netbench.orchestrator.forked_workers import Launcher
    from netbench.orchestrator.run.runner import Measured, RunResult

__all__ = [
    "SweepBusy",
    "sweep_lock",
    "SUMMARY",
    "MEASURED",
    "SweepOutcome",
    "read_summary",
    "write_summary",
    "run_path",
    "done_keys",
    "point_row",
    "predict_point",
    "stored_prediction",
    "run_sweep",
    "write_sweep_json",
]

# summary.csv's figures: the measured metrics' columns, then the prediction's as pred_<key> (rundir/summary.py's table)
MEASURED = csv_measured()
PREDICTED = csv_predicted()

PointProgress = Callable[[Point, int, int], None]  # (point, steps done, steps total)
LOCK_NAME = ".sweep.lock"


class SweepBusy(RuntimeError):
    """Another sweep holds the folder; one line naming it."""


@contextlib.contextmanager
def sweep_lock(out: Path) -> Iterator[None]:
    """Hold the sweep folder for this process (released on exit, however it ends); SweepBusy if another holds it.

    The folder is one netbench has checked (safe_files.make_folder); the lock file is opened without
    following a link, and never removed, so every sweep locks the same file.
    """
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepBusy(f"sweep folder {str(out)!r} is in use by another sweep") from None
        yield
    finally:
        os.close(fd)


@dataclass
class SweepOutcome:
    ran: int
    skipped: int
    failed: list[str]
    interrupted: bool
    last_status: str = ""  # the status of the point run last


def done_keys(frame: pd.DataFrame, out: Path) -> set[str]:
    """Keys of points measured successfully whose run directory is still there."""
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    return {str(r.key) for r in ok.itertuples() if (path := run_path(out, r.run_dir)) and RunDir(path).written}


def predict_point(config: RunConfig, run_dir: Path, calibration: Calibration) -> dict[str, Any]:
    """The model's prediction for a finished point, from its steps.csv and its workers' parameter count."""
    folder = RunDir(run_dir)
    if not folder.steps_csv.exists():
        return {"error": "no steps.csv"}
    steps = pd.read_csv(folder.steps_csv)
    clock = kernel_clock(steps, recorded_dilation(read_run_json(run_dir)) if folder.run_json.is_file() else None)
    return predict_run(config, steps, folder.start().get("n_params"), calibration, clock=clock)


def point_row(
    point: Point,
    summary: dict[str, Any],
    status: str,
    reason: str | None,
    run_dir: Path,
    predicted: dict[str, Any],
    out: Path,
) -> dict[str, Any]:
    """One summary.csv row: the point's coordinates, what it measured and what the model says."""
    cfg = point.config
    row: dict[str, Any] = {
        "key": point.key,
        "label": point.label,
        "replicator": cfg.replicator.name,
        "nodes": cfg.cluster.nodes,
        "bw": point.bw,
        "bw_bps": cfg.cluster.access.forward.rate_bps,
        "delay": point.delay,
        "delay_ms": cfg.cluster.one_way_delay_s() * 1e3,
        "variant": point.variant,
        "topology": point.topology,
        "wan_bw": point.wan_bw,
        "wan_delay": point.wan_delay,
        "rank_order": point.rank_order,
        **_wan_figures(cfg),
        "status": status,
        "reason": reason or "",
        "run_dir": os.path.relpath(run_dir, out),
    }
    row.update({k: summary.get(k) for k in MEASURED})
    row.update({predicted_column(k): predicted.get(k) for k in PREDICTED})
    row["params"] = predicted.get("params")
    row["prediction_error"] = predicted.get("error", "")
    links = summary.get("links") or {}
    row["bottleneck_model"] = links.get("bottleneck_model") or ""
    row["busiest_link"] = links.get("busiest_link") or ""
    row["bottleneck_measured"] = links.get("bottleneck_measured") or ""
    row["bottleneck_agrees"] = links.get("bottleneck_agrees")
    row["link_bytes_max_error"] = links.get("link_bytes_max_error")
    fidelity = summary.get("fidelity") or {}
    row["fidelity_ok"] = fidelity.get("ok")
    row["dilation"] = fidelity.get("dilation", 1.0)
    row["fidelity_reasons"] = "; ".join(fidelity.get("reasons", []))
    return row


def _wan_figures(config: RunConfig) -> dict[str, float | None]:
    """The slowest trunk direction's rate and the longest trunk delay (None on the star): numbers to plot against."""
    trunks = config.cluster.topology.trunks
    directions = [d for t in trunks for d in (t.forward, t.reverse)]
    return {
        "wan_bw_bps": min(d.rate_bps for d in directions) if directions else None,
        "wan_delay_ms": max(d.delay_s for d in directions) * 1e3 if directions else None,
    }


def stored_prediction(summary: dict[str, Any]) -> dict[str, Any]:
    """The prediction a run made when it finished (run.json's summary), or its error: never recomputed."""
    if summary.get("predicted"):
        return summary["predicted"]
    return {"error": summary.get("prediction_error") or "no prediction stored"}


def _upsert(frame: pd.DataFrame, row: dict[str, Any]) -> pd.DataFrame:
    kept = frame[frame["key"].astype(str) != row["key"]] if not frame.empty else frame
    new = pd.DataFrame([row])
    return new if kept.empty else pd.concat([kept, new], ignore_index=True)


def _measure_point(
    point: Point,
    calibration: HostCalibration,
    progress: PointProgress | None,
    dilation: str,
    held: ClusterReuse | None,
) -> Measured:
    """Run one point's steps (on the held cluster, where given); its run directory is still to write."""
    from netbench.orchestrator.run.runner import measure  # late: orchestration: only when actually running

    factor = parse_dilation(dilation)  # auto: each point's own, from its prediction (orchestrator.dilation.resolve)
    return measure(
        point.config,
        progress=(lambda d, t, p=point: progress(p, d, t)) if progress else None,
        calibration=calibration,
        dilation=factor,
        reuse=held if reusable(point.config) else None,
        launcher=held.launcher if held is not None else None,
    )


def _count(point: Point, status: str, reason: str | None, outcome: SweepOutcome) -> None:
    """The point's status in ``outcome``."""
    outcome.ran += 1
    outcome.last_status = status
    if status != "ok":
        outcome.failed.append(f"{point.label}: {reason}")
        outcome.interrupted = (reason or "").startswith(("interrupted", "terminated"))


def _record(point: Point, result: RunResult, out: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """The point's row in summary.csv (rewritten)."""
    predicted = stored_prediction(result.summary) if result.status == "ok" else {}
    frame = _upsert(
        frame, point_row(point, result.summary, result.status, result.reason, result.run_dir, predicted, out)
    )
    write_summary(out, frame)
    return frame


def write_sweep_json(
    out: Path, scenario: SweepScenario, calibration: Calibration, calibration_path: Path | None
) -> None:
    """What the sweep ran and which model constants its predictions use (the report reads it back)."""
    doc = {
        "scenario": json.loads(scenario.model_dump_json()),
        "calibration": {
            "path": str(calibration_path) if calibration_path else None,
            **json.loads(calibration.model_dump_json()),
        },
    }
    write_sweep_doc(out, doc)


def run_sweep(
    points: list[Point],
    out: Path,
    calibration: HostCalibration,
    fresh: bool = False,
    progress: PointProgress | None = None,
    on_point_done: Callable[[Point, str], None] | None = None,
    dilation: str = "auto",
    reuse: bool = True,
    launcher: Launcher | None = None,
) -> SweepOutcome:
    """Run every point not already done; summary.csv is rewritten after each one.

    ``reuse``: points that share a network run one after another on one cluster, their workers
    forked from one fork server (:mod:`netbench.orchestrator.cluster_reuse`); else each point
    builds its own cluster and starts its own workers. ``launcher``: the fork server the caller started (it may
    have measured the calibration already); default: one of the sweep's own. Stops early (``interrupted``) when a
    run was interrupted by Ctrl-C; the point stays not done.
    """

    frame = pd.DataFrame(columns=["key", "status", "run_dir"]) if fresh else read_summary(out)
    done = set() if fresh else done_keys(frame, out)
    outcome = SweepOutcome(ran=0, skipped=0, failed=[], interrupted=False)
    todo = [p for p in points if p.key not in done]
    outcome.skipped = len(points) - len(todo)
    pending: tuple[Point, Future[RunResult]] | None = None  # an ok point whose run directory is being written
    try:
        with ClusterReuse(launcher=launcher) as held, ThreadPoolExecutor(1, "results") as writer:
            if todo and reuse:  # its imports overlap the first cluster's build
                held.launcher.start_server(todo[0].config.threads)
            try:
                for point in order_by_network(todo, lambda p: p.config) if reuse else todo:
                    untrusted.begin_point()  # each point's records are read within a budget of their own
                    on_held = reuse and reusable(point.config)  # its steps wait for the last point's results
                    if pending is not None and not on_held:
                        frame, pending = _record(pending[0], pending[1].result(), out, frame), None
                    measured = _measure_point(point, calibration, progress, dilation, held if reuse else None)
                    if pending is not None:  # written by now: this point's steps waited for it
                        frame, pending = _record(pending[0], pending[1].result(), out, frame), None
                    status = measured.outcome.status
                    if on_held and status == "ok":  # written while the next point starts (ClusterReuse.await_writing)
                        pending = (point, writer.submit(measured.collect))
                        held.writing(pending[1])
                        _count(point, status, None, outcome)
                    else:
                        result = measured.collect()
                        frame = _record(point, result, out, frame)
                        _count(point, result.status, result.reason, outcome)
                    if on_point_done:
                        on_point_done(point, outcome.last_status)
                    if outcome.interrupted:
                        break
            finally:
                if pending is not None:
                    frame, pending = _record(pending[0], pending[1].result(), out, frame), None
    except KeyboardInterrupt:  # between two points: the held cluster is down by now, every finished point recorded
        outcome.interrupted = True
    order = {p.key: i for i, p in enumerate(points)}
    if not frame.empty:
        frame = (
            frame.assign(_o=frame["key"].astype(str).map(order))
            .sort_values("_o", na_position="last")
            .drop(columns="_o")
        )
        write_summary(out, frame)
    return outcome
