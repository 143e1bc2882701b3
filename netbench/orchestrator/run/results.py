"""Turn worker records and captures into steps.csv, run.json and the run summary.

steps.csv has one row per node per step; the summary uses steps after warm-up only, and for
times the slowest node (the cluster moves at its pace): the largest per-node median.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from netbench import __version__, safe_files
from netbench.capture.pcap import STEP_COLUMNS as CAPTURE_COLUMNS
from netbench.capture.pcap import bin_pcap
from netbench.capture.tcpdump import MAX_PACKETS
from netbench.model.heal import heal_bytes
from netbench.orchestrator.prediction import (
    KernelClock,
    kernel_clock,
    model_errors,
    predict_run,
    replay_run,
    shapes_record,
    workload_shapes,
)
from netbench.orchestrator.run import health
from netbench.orchestrator.run.churn_results import churn_model
from netbench.orchestrator.run.divergence import diverged_at_step
from netbench.orchestrator.run.fidelity import codec_reason, codec_speed, unfinished
from netbench.orchestrator.run.links import link_report, read_trunks
from netbench.orchestrator.run.schedule_results import annotate, churn_error, segment_summary, step_errors
from netbench.orchestrator.run.sharding_results import sharding_summary
from netbench.rundir.churn_figures import churn_figures
from netbench.rundir.drift import drift_figures
from netbench.rundir.layout import RunDir, read_records, start_record  # noqa: F401 - read_records: also results.read_records
from netbench.rundir.restarts import restart_figures
from netbench.rundir.steps_schema import RECORD_ONLY, Col
from netbench.rundir.summary import RunSummary, measured_steps, reduced_metrics, statistic
from netbench.validation import error_text

if TYPE_CHECKING:
    from netbench.orchestrator.config import RunConfig


def steps_frame(records_by_rank: dict[int, list[dict]]) -> pd.DataFrame:
    rows = [r for recs in records_by_rank.values() for r in recs if r.get("event") == "step"]
    if not rows:
        return pd.DataFrame(columns=[Col.RANK.value, Col.STEP.value])
    return (
        pd.DataFrame(rows)
        .drop(columns=list(RECORD_ONLY), errors="ignore")
        .sort_values([Col.STEP, Col.RANK])
        .reset_index(drop=True)
    )


def step_windows(steps: pd.DataFrame, rank: int) -> pd.DataFrame:
    """(step, t_from, t_to] per step record of one rank, in time order, with the record's t_start; windows tile the
    rank's run like its counters. Under churn a rank may record one step number twice (an attempt its node ran
    before it left and was healed to an earlier number), so a record is its step and its start, not its step alone."""
    mine = steps[steps[Col.RANK] == rank].sort_values([Col.T_START, Col.STEP])
    t_from = [mine[Col.T_START].iloc[0], *mine[Col.T_END].iloc[:-1].tolist()]
    return pd.DataFrame(
        {
            Col.STEP.value: mine[Col.STEP].to_numpy(),
            Col.T_START.value: mine[Col.T_START].to_numpy(),
            "t_from": t_from,
            "t_to": mine[Col.T_END].to_numpy(),
        }
    )


def attach_capture(
    steps: pd.DataFrame, pcaps: dict[int, Path], addresses: dict[int, str]
) -> tuple[pd.DataFrame, dict, dict]:
    """Add capture_* columns to ``steps`` from each rank's pcap, streamed; also bytes by peer, and notes for
    run.json.
    """
    frames, peers, notes = [], {}, {}
    for rank, path in pcaps.items():
        if steps.empty or rank not in set(steps[Col.RANK]):
            continue
        windows = step_windows(steps, rank)
        bins = bin_pcap(path, addresses[rank], windows)
        record = {Col.RANK.value: rank, Col.T_START.value: windows[Col.T_START].to_numpy()}
        frames.append(bins.frame(MAX_PACKETS).assign(**record))
        peers[rank] = bins.by_peer()
        if bins.clock_went_back:
            notes.setdefault("clock_went_back", []).append(rank)
        if bins.truncated(MAX_PACKETS):  # the steps after the capture's last packet have no capture columns
            notes.setdefault("truncated_at_packets", {})[rank] = bins.packets
    if not frames:
        return steps, peers, notes
    steps = steps.drop(columns=[c for c in CAPTURE_COLUMNS if c in steps])
    key = [Col.RANK.value, Col.STEP.value, Col.T_START.value]  # a step record (see step_windows)
    return steps.merge(pd.concat(frames), on=key, how="left"), peers, notes


def _median(values: list[float]) -> float | None:
    clean = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(clean) if clean else None


BUSY_SHARE = 0.1  # of a node's busiest step: the steps capture_vs_counters compares


def capture_vs_counters(measured: pd.DataFrame) -> dict[str, float]:
    """How far the capture's bytes are from the interface counters', per node per communicating step.

    Both count the same skbs (the capture before its GSO expansion), so they must agree at any
    rate. Steps that carry no collective's bytes (a periodic replicator between syncs) carry a
    few ACKs, where a frame landing on the other side of a step boundary is a large fraction: only
    steps whose counters saw at least a tenth of the node's busiest step count. (Not the steps that
    hand bytes to a collective: an overlapped exchange's bytes travel in the steps after it starts.)
    """
    column, counted = Col.CAPTURE_TX_SKB_BYTES, Col.TX_BYTES
    if column not in measured or counted not in measured:
        return {}
    both = measured[(measured[counted] > 0) & measured[column].notna()]
    busiest = both.groupby(Col.RANK)[counted].transform("max")
    both = both[both[counted] >= BUSY_SHARE * busiest]
    if both.empty:
        return {}
    rel = (both[column] - both[counted]).abs() / both[counted]
    return {
        "capture_vs_counter_max_rel_diff": float(rel.max()),
        "capture_vs_counter_median_rel_diff": float(rel.median()),
    }


def summarize(steps: pd.DataFrame, warmup_steps: int, weights_sharded: bool = False) -> dict[str, Any]:
    """Per-node medians (means for periodic replicators) after warm-up: times at the slowest node, bytes per node.
    ``weights_sharded`` (``--shard zero3|hsdp``): the sharding group's collectives count in a node's payload.

    Which steps.csv column becomes which summary key, and how nodes combine, is the metrics
    table's (:mod:`netbench.rundir.summary`); the result is a :class:`RunSummary`'s JSON object.
    """
    measured = measured_steps(steps)
    if measured.empty:
        return RunSummary.new(steps_measured=0).to_json()
    per_node = measured.groupby(Col.RANK)
    how = statistic(measured)
    out: dict[str, Any] = {"steps_measured": int(measured[Col.STEP].nunique()), "statistic": how}
    for m in reduced_metrics("slowest"):
        out[m.key] = float(per_node[m.source].agg(how).max())
    nodes: dict[int, dict[str, float]] = {}
    for m in reduced_metrics("median"):
        if m.source in measured and measured[m.source].notna().any():  # capture columns stay empty without a capture
            per_rank = per_node[m.source].agg(how)
            out[m.key] = float(per_rank.median())
            for rank, value in per_rank.items():
                nodes.setdefault(int(rank), {})[m.key] = float(value)
    out["per_node"] = nodes
    last = measured[measured[Col.STEP] == measured[Col.STEP].max()]
    out["final_loss"] = _median(last[Col.LOSS].tolist())
    first = measured[measured[Col.STEP] == measured[Col.STEP].min()]
    out["first_loss"] = _median(first[Col.LOSS].tolist())
    out["diverged_at_step"] = diverged_at_step(steps)
    out.update(capture_vs_counters(measured))
    if Col.REPLICA_SKETCH in measured:
        out.update(drift_figures(measured[Col.STEP], measured[Col.REPLICA_SKETCH]))
    out.update(sharding_summary(measured, how, weights_sharded))
    out.update(churn_figures(measured))
    out.update(restart_figures(steps))  # every step: a restart throws away the warm-up's training too
    out.update(health.figures(measured, steps))
    return RunSummary.new(**out).to_json()


def write_steps_csv(steps: pd.DataFrame, path: Path) -> None:
    """Atomic: a reader, or a run interrupted mid-write, sees the old file or the whole new one."""
    with safe_files.replace_from(path) as fh:
        steps.to_csv(fh, index=False)


def installed_version(package: str) -> str:
    """``package``'s installed version, or "absent"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def write_run_json(path: Path, data: dict[str, Any]) -> None:
    safe_files.write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def versions() -> dict[str, str]:
    """What the run ran with, read from the packages' metadata: naming torch's version does not import torch (seconds
    of the orchestrator's CPU, which the workers' fork server has imported already)."""
    return {
        "netbench": __version__,
        "python": platform.python_version(),
        "torch": installed_version("torch"),
        "pyroute2": installed_version("pyroute2"),
        "scapy": installed_version("scapy"),
        "kernel": platform.release(),
    }


def config_summary(config: RunConfig) -> dict[str, Any]:
    """The configuration fields every run summary carries (rates None where a real link's rate is unknown)."""
    cluster = config.cluster
    access = cluster.access
    up, down = access.forward.rate_bps, access.reverse.rate_bps
    return RunSummary.new(
        replicator=config.replicator.name,
        nodes=cluster.nodes,
        bw_bps=min(up, down) if up and down else None,
        up_bps=up,
        down_bps=down,
        delay_ms=cluster.one_way_delay_s() * 1e3,
        jitter_ms=access.forward.jitter_s * 1e3,
        loss=access.forward.loss,
        steps=config.steps,
    ).to_json()


@dataclass
class RunOutput:
    """What a run produced, as the writer takes it: every rank's records, how the run ended, what it ran on.

    Shared by `netbench run` (emulated cluster, optional capture), `netbench exec` and rank 0 of
    `netbench worker` (real hosts under torchrun).
    """

    config: RunConfig  # the run as reported (undilated); the model predicts it
    records: dict[int, list[dict]]  # every rank's worker records
    run_id: str
    status: str  # "ok" or "failed"
    reason: str | None  # why it failed (naming the rank), or a note on an ok run
    started: float  # wall-clock start (time.time())
    warnings: list[str]
    cluster: dict[str, Any]  # how the nodes came to be
    extra: dict[str, Any] = field(default_factory=dict)  # further top-level run.json keys (launcher, ...)
    pcaps: dict[int, Path] = field(default_factory=dict)  # each rank's capture (a node's goes with its first worker)
    addresses: dict[int, str] = field(default_factory=dict)  # each captured rank's address
    capture: dict[str, Any] = field(default_factory=dict)  # further capture facts (drops, why there is none)
    cpus: int | None = None  # the cores the model takes the nodes to share (None: this host's, as emulated nodes do)
    predict: bool = True  # False leaves the model out (`netbench exec` of a program that declared no payload)
    calibration: Any = None  # the HostCalibration the prediction uses (None: the saved one)
    fidelity: dict[str, Any] | None = (
        None  # the run's verdict on its own emulation (netbench.orchestrator.run.fidelity)
    )
    trunks_csv: Path | None = (
        None  # the trunks' per-step counters (`netbench run` on a topology), for the per-link comparison
    )


def write_run(run_dir: RunDir, out: RunOutput) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write a run directory's steps.csv and run.json from every rank's records; returns (summary, run.json).

    The one writer of the format. Both files are first written from the records alone, so what the
    workers measured is on disk before the capture is parsed; the capture's columns are then added
    and both files rewritten (each write atomic). A capture that cannot be parsed, or a Ctrl-C while
    it is, costs only those columns: the reason says so and the Ctrl-C is raised again once the
    files are safe.
    """
    steps = annotate(steps_frame(out.records), out.config, out.extra.get("dilation", 1.0))  # a link schedule's segments
    for column in CAPTURE_COLUMNS:  # the same columns with or without a capture
        if column not in steps:
            steps[column] = pd.Series(dtype="float64")
    start = start_record(out.records.get(0, []))
    prediction = _prediction(out, steps, start) if out.status == "ok" and out.predict else {}
    capture_facts = {"enabled": bool(out.pcaps), **out.capture, "bytes_by_peer": {}}
    if out.pcaps and not steps.empty:
        capture_facts["parsed"] = False  # until the second write below
    summary, run_json = _write_files(run_dir, out, steps, out.reason, start, prediction, capture_facts)
    if not (out.pcaps and not steps.empty):
        return summary, run_json
    interrupted: BaseException | None = None
    reason = out.reason
    try:
        steps, peers, notes = attach_capture(steps, out.pcaps, out.addresses)
        capture_facts.update(parsed=True, bytes_by_peer=peers, **notes)
    except (KeyboardInterrupt, SystemExit) as exc:
        interrupted = exc
        capture_facts["error"] = (
            "interrupted while parsing the capture"
            if isinstance(exc, KeyboardInterrupt)
            else f"terminated (exit {exc.code}) while parsing the capture"
        )
    except Exception as exc:  # noqa: BLE001 - the records are safe on disk; only the capture columns are lost
        capture_facts["error"] = f"capture not parsed: {error_text(exc)}"
    if "error" in capture_facts:
        reason = f"{reason}; {capture_facts['error']}" if reason else capture_facts["error"]
    summary, run_json = _write_files(run_dir, out, steps, reason, start, prediction, capture_facts)
    if interrupted is not None:
        raise interrupted
    return summary, run_json


def _kernel_clock(out: RunOutput, steps: pd.DataFrame) -> KernelClock:
    """How the kernel's timers, which run on wall time, met the run's steps at its dilation."""
    return kernel_clock(steps, float(out.extra.get("dilation", 1.0)))


def _prediction(out: RunOutput, steps: pd.DataFrame, start: dict[str, Any]) -> dict[str, Any]:
    """The model's prediction beside the measurement, or why there is none; a model failure never fails the run."""
    rates = config_summary(out.config)
    known = rates["up_bps"] and rates["down_bps"]  # a real NIC may report no rate (`netbench worker`)
    calibration = out.calibration
    calib, identity = (calibration.calibration, calibration.identity()) if calibration is not None else (None, None)
    clock = _kernel_clock(out, steps)
    predicted = (
        predict_run(out.config, steps, start.get("n_params"), calib, cpus=out.cpus, identity=identity, clock=clock)
        if known
        else {"error": "link rate unknown"}
    )
    if "error" in predicted:
        return {"prediction_error": predicted["error"]}
    found: dict[str, Any] = {"predicted": predicted}
    replay = replay_run(out.config, steps, calib, cpus=out.cpus, clock=clock)
    if replay is not None:
        found["replay_step_time_s"] = replay
    found["links"] = link_report(
        out.config, steps, read_trunks(out.trunks_csv), calib
    )  # the model's bytes per link beside the counters'
    return found


def _with_codec_speed(
    fidelity: dict[str, Any], steps: pd.DataFrame, predicted: dict[str, Any] | None, replayed: bool = False
) -> dict[str, Any]:
    """``fidelity`` (a copy) with the nodes' codec CPU time against the calibration the forecast used.

    Where the run has a replay (the model fed the measured codec), a codec slower than calibrated moves the forecast
    only, so it is a note; without one it is a reason the run does not describe the model's machines.
    """

    speed = codec_speed(steps, (predicted or {}).get("codec_cpu_s"), (predicted or {}).get("step_time_s"))
    if speed is None:
        return fidelity
    judged = {**fidelity, "observed": {**(fidelity.get("observed") or {}), "codec_cpu": speed}}
    reason = codec_reason(speed)
    if reason and replayed:
        judged["notes"] = [
            *fidelity.get("notes", []),
            f"{reason} (the forecast's error; the replay takes the measured codec)",
        ]
    elif reason:
        judged.update(ok=False, reasons=[*fidelity.get("reasons", []), reason])
    return judged


def _heal_model(config: RunConfig) -> dict[str, Any]:
    """The model's bytes for one heal (:mod:`netbench.model.heal`), beside the measured median heal."""
    try:
        shapes = workload_shapes(config.workload, config.cluster.nodes)
        return {"heal_bytes_model": heal_bytes(config.replicator, shapes)}
    except Exception:  # noqa: BLE001 - the model never costs a run its measurements
        return {}


def _write_files(
    run_dir: RunDir,
    out: RunOutput,
    steps: pd.DataFrame,
    reason: str | None,
    start: dict[str, Any],
    prediction: dict[str, Any],
    capture: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """steps.csv, then run.json (which names steps.csv's figures), each replaced atomically."""
    config, fidelity = out.config, out.fidelity
    write_steps_csv(steps, run_dir.steps_csv)
    summary = (
        summarize(steps, config.warmup_steps, config.shard != "none") if not steps.empty else {"steps_measured": 0}
    )
    summary.update(
        {
            "run_id": out.run_id,
            "status": out.status,
            "reason": reason,
            **config_summary(config),
            "delay_engine": out.cluster.get("delay_engine"),
            "run_dir": str(run_dir.path),
        }
    )
    if fidelity is not None and out.status == "ok":
        fidelity = _with_codec_speed(fidelity, steps, prediction.get("predicted"), "replay_step_time_s" in prediction)
    elif fidelity is not None:
        fidelity = unfinished(fidelity)
    if fidelity is not None:
        summary["fidelity"] = {
            k: fidelity[k] for k in ("ok", "reasons", "notes", "dilation", "cpu_stretch") if k in fidelity
        }
    if out.config.schedule is not None and not steps.empty:
        calib = out.calibration
        summary["schedule_segments"] = segment_summary(
            config,
            steps,
            start.get("n_params"),
            calib.calibration if calib else None,
            out.cpus,
            calib.identity() if calib else None,
            _kernel_clock(out, steps),
        )
        summary.update(step_errors(steps, summary["schedule_segments"]))
        summary.update(churn_error(summary["schedule_segments"]))
        summary.update(
            churn_model(
                config,
                steps,
                summary["schedule_segments"],
                out.cluster,
                out.extra.get("dilation", 1.0),
                summary.get("goodput_steps_per_s"),
            )
        )
    if summary.get("heals"):
        summary.update(_heal_model(config))
    if out.status == "ok":
        summary.update(prediction)
        summary.update(health.slowdown(summary))
        summary.update(model_errors(summary))
    run_json = {
        "run_id": out.run_id,
        "status": out.status,
        "reason": reason,
        "warnings": out.warnings,
        "started": dt.datetime.fromtimestamp(out.started).isoformat(),
        "wall_s": time.time() - out.started,
        "argv": sys.argv,
        "config": json.loads(config.model_dump_json()),
        **out.extra,
        "cluster": out.cluster,
        "versions": versions(),
        "workload": {
            "n_params": start.get("n_params"),
            "n_tensors": start.get("n_tensors"),
            "shapes": shapes_record(config.workload, config.cluster.nodes),
        },
        "capture": dict(capture),
        **({"fidelity": fidelity} if fidelity is not None else {}),
        "summary": summary,
    }
    write_run_json(run_dir.run_json, run_json)
    return summary, run_json
