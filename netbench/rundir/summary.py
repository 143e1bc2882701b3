"""A run's summary, typed, and the one table of metrics every view prints.

The summary is what a run measured (medians after warm-up, times at the slowest node, bytes per
node) beside what the model predicted; run.json stores it under ``summary`` and a sweep's
summary.csv keeps one row of it per point. Its keys are declared here once, in :data:`FIELDS`;
the records :class:`RunSummary` and :class:`Prediction` are built from that list, and every view --
the terminal table, summary.csv's columns, report.md's points table, the figures -- takes its
rows, columns, labels and units from the :class:`Metric` entries, the way nccl-tests prints one
fixed set of columns everywhere.

JSON keys stay as runs write them (stored run directories and committed reports are read by
these names); where a key misleads, the label says what it is: ``capture_wire_bytes_per_step`` is
the *tx* direction of the capture ("captured tx bytes/step/node"), beside its rx twin
``capture_rx_wire_bytes_per_step``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, create_model

from netbench.rundir.steps_schema import Col

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Field",
    "Metric",
    "FIELDS",
    "METRICS",
    "RunSummary",
    "Prediction",
    "measured_steps",
    "statistic",
    "metric",
    "predicted_column",
    "compared_column",
    "error_column",
    "csv_measured",
    "csv_predicted",
    "terminal_metrics",
    "step_parts",
    "report_metrics",
    "reduced_metrics",
    "statistic",
]

Number = int | float  # an int stays an int (bw_bps 100000000, not 100000000.0)
Unit = Literal["s", "B", "x", "", "text", "count"]
View = Literal["measured", "model", "error"]


@dataclass(frozen=True)
class Field:
    """One key: the name run.json and summary.csv use, its type, and which record has it.

    ``summary``: the measured summary (run.json's ``summary``); ``prediction``: the model's
    prediction beside it (``summary.predicted``), keyed like the measurement.
    """

    key: str
    type: Any = Number | None
    summary: bool = True
    prediction: bool = False


@dataclass(frozen=True)
class Metric(Field):
    """A figure a reader compares, and how each view shows it.

    ``label`` names it in the terminal table and the figures (indented under the step time when ``part_of_step``, one
    of the parts the step's time splits into, or ``nested``); ``unit`` decides how it is printed. ``csv`` lists which
    of summary.csv's columns it has (``measured``: the key itself, ``predicted``: ``pred_<key>``); ``terminal`` makes
    it a row of the run's table (with the model's value beside it where the prediction has one); ``report`` its
    columns in report.md's points table, headed by ``short``. ``source`` is the steps.csv column the run summary
    reduces to this figure, ``across`` how the nodes' figures combine (the slowest node's for times, the median
    node's for bytes; ``mean``: over every node and step, for rare events a median would show as zero). ``captured``
    names the capture's figure for the same quantity, which the report holds against the model where a point has it
    (MTU frames, as a real wire carries them). ``parts``: the metric is the sum of these (the report adds them up).
    """

    label: str = ""
    unit: Unit = ""
    csv: tuple[Literal["measured", "predicted"], ...] = ()
    terminal: bool = False
    part_of_step: bool = False
    nested: bool = False
    report: tuple[View, ...] = ()
    short: str = ""
    source: Col | None = None
    across: Literal["slowest", "median", "mean"] | None = None
    captured: str | None = None
    parts: tuple[str, ...] = ()


_S, _B = dict(unit="s"), dict(unit="B")
_TIME = dict(unit="s", across="slowest")
_BYTES = dict(unit="B", across="median")
_MODEL = dict(summary=False, prediction=True)  # the model's only (no measured key of that name)

# Every key, in the order summary.csv and the terminal table show them (run.json writes the same order).
FIELDS: tuple[Field, ...] = (
    Metric(
        "step_time_s",
        label="step time",
        csv=("measured", "predicted"),
        terminal=True,
        report=("measured", "model", "error"),
        short="step",
        source=Col.STEP_S,
        prediction=True,
        **_TIME,
    ),
    Metric(
        "compute_time_s",
        label="compute",
        csv=("measured",),
        terminal=True,
        part_of_step=True,
        source=Col.COMPUTE_S,
        **_TIME,
    ),
    Metric(
        "compress_time_s",
        label="encode",
        csv=("measured", "predicted"),
        terminal=True,
        part_of_step=True,
        source=Col.COMPRESS_S,
        prediction=True,
        **_TIME,
    ),
    Metric(
        "comm_time_s",
        label="communicate",
        csv=("measured", "predicted"),
        terminal=True,
        part_of_step=True,
        report=("measured", "model"),
        short="comm",
        source=Col.COMM_S,
        prediction=True,
        **_TIME,
    ),
    Metric(
        "intra_comm_time_s",
        label="communicate inside the sharding group",
        terminal=True,
        nested=True,
        prediction=True,
        **_S,
    ),
    Metric(
        "decode_time_s",
        label="decode",
        csv=("measured", "predicted"),
        terminal=True,
        part_of_step=True,
        source=Col.DECODE_S,
        prediction=True,
        **_TIME,
    ),
    Metric(
        "apply_time_s", label="apply", csv=("measured",), terminal=True, part_of_step=True, source=Col.APPLY_S, **_TIME
    ),
    Metric(
        "encode_decode_time_s",
        label="encode + decode",
        report=("measured", "model"),
        short="enc+dec",
        parts=("compress_time_s", "decode_time_s"),
        **_MODEL,
        **_S,
    ),
    Metric(
        "local_time_s",
        label="local work (compute + apply)",
        csv=("predicted",),
        report=("model",),
        short="local",
        **_MODEL,
        **_S,
    ),
    Metric("codec_cpu_s", label="encode + decode CPU time per worker, calibrated (no core shared)", **_MODEL, **_S),
    Metric(
        "dense_step_time_s",
        label="step time in the phases that open the run (1-bit Adam's dense warm-up)",
        csv=("predicted",),
        **_MODEL,
        **_S,
    ),
    Metric("dense_steps", label="steps in the phases that open the run", csv=("predicted",), **_MODEL),
    Metric(
        "payload_bytes_per_step",
        label="payload bytes/step/node",
        csv=("measured", "predicted"),
        terminal=True,
        report=("measured",),
        short="payload/step",
        source=Col.PAYLOAD_BYTES,
        prediction=True,
        **_BYTES,
    ),
    Metric(
        "wire_tx_bytes_per_step",
        label="wire tx bytes/step/node",
        csv=("measured", "predicted"),
        terminal=True,
        report=("measured", "model", "error"),
        short="wire tx",
        source=Col.TX_BYTES,
        captured="capture_wire_bytes_per_step",
        prediction=True,
        **_BYTES,
    ),
    Metric(
        "wire_rx_bytes_per_step",
        label="wire rx bytes/step/node",
        csv=("measured", "predicted"),
        terminal=True,
        report=("error",),
        short="wire rx",
        source=Col.RX_BYTES,
        captured="capture_rx_wire_bytes_per_step",
        prediction=True,
        **_BYTES,
    ),
    Metric("intra_tx_bytes_per_step", label="intra-node bytes/step/node", terminal=True, prediction=True, **_B),
    Metric("intra_rx_bytes_per_step", label="intra-node rx bytes/step/node", **_B),
    Metric("worker_payload_bytes_per_step", label="payload bytes/step/worker", **_B),
    Metric(
        "capture_wire_bytes_per_step",
        label="captured tx bytes/step/node",
        csv=("measured",),
        terminal=True,
        source=Col.CAPTURE_TX_WIRE_BYTES,
        **_BYTES,
    ),
    Metric(
        "capture_rx_wire_bytes_per_step",
        label="captured rx bytes/step/node",
        csv=("measured",),
        source=Col.CAPTURE_RX_WIRE_BYTES,
        **_BYTES,
    ),
    Metric(
        "capture_payload_bytes_per_step",
        label="captured tx payload bytes/step/node",
        csv=("measured",),
        source=Col.CAPTURE_TX_PAYLOAD_BYTES,
        **_BYTES,
    ),
    Metric(
        "capture_ack_only_bytes_per_step",
        label="captured tx ACK-only bytes/step/node",
        csv=("measured",),
        source=Col.CAPTURE_TX_ACK_ONLY_BYTES,
        **_BYTES,
    ),
    Metric(
        "capture_vs_counter_median_rel_diff", label="captured vs counted tx bytes, median rel. diff", csv=("measured",)
    ),
    Metric("capture_vs_counter_max_rel_diff", label="captured vs counted tx bytes, max rel. diff", csv=("measured",)),
    Metric("step_time_mean_s", label="mean step time", terminal=True, **_S),
    Metric("slowdown_vs_model", label="slowdown vs model (mean step)", unit="x", terminal=True),
    Metric(
        "replay_step_time_s",
        label="step time, model replayed with the run's measured local work",
        csv=("measured",),
        terminal=True,
        **_S,
    ),
    Metric(
        "replay_error",
        label="model error, replayed: (replay - measured) / measured step",
        csv=("measured",),
        terminal=True,
    ),
    Metric(
        "forecast_error",
        label="model error, forecast from calibration: (model - measured) / measured step",
        csv=("measured",),
        terminal=True,
    ),
    Metric(
        "schedule_forecast_step_error",
        label="model error per step under a schedule, forecast: median |model / measured - 1|",
        terminal=True,
    ),
    Metric(
        "schedule_replay_step_error",
        label="model error per step under a schedule, replayed: median |model / measured - 1|",
        terminal=True,
    ),
    Metric(
        "retrans_bytes_per_step",
        label="retransmitted bytes/step/node",
        terminal=True,
        source=Col.CAPTURE_TX_RETRANS_BYTES,
        across="mean",
        **_B,
    ),
    Metric(
        "retrans_segs_per_step",
        label="retransmitted segments/step/node",
        csv=("measured",),
        terminal=True,
        source=Col.RETRANS_SEGS,
        across="mean",
    ),
    Metric("retrans_fraction", label="retransmitted share of the captured payload"),
    Metric(
        "replica_drift",
        label="replica drift after a sync (distance between nodes / length), median over syncs",
        unit="x",
        terminal=True,
    ),
    Metric("replica_drift_last", label="replica drift after the last sync", unit="x"),
    Metric("steps_lost", int, label="steps lost to churn (run, not committed)", unit="count", terminal=True),
    Metric("heals", int, label="heals (a joining node caught up from a peer)", unit="count", terminal=True),
    Metric("heal_bytes", label="bytes received per heal (median)", unit="B", terminal=True),
    Metric("heal_bytes_model", label="bytes per heal, the model's (weights and kept state)", unit="B", terminal=True),
    Metric("heal_time_s", label="time per heal (median)", unit="s", terminal=True),
    Metric("goodput_steps_per_s", label="goodput: committed steps per wall second", terminal=True),
    Metric(
        "kept_steps_per_s",
        label="progress kept: steps per wall second the training holds at the end (goodput less restarts' loss)",
        terminal=True,
    ),
    Metric(
        "kept_steps",
        label="steps the training holds at the end (committed since it last started afresh)",
        unit="count",
        terminal=True,
    ),
    Metric("restarts", int, label="times the training was lost and started afresh (every node holding it left)"),
    Metric("restart_steps_lost", label="committed steps those restarts threw away (redone)", unit="count"),
    Metric(
        "churn_model_error",
        label="model error through churn (segments' steps, heals and waits as they happened): "
        "(model - measured) / measured",
        terminal=True,
    ),
    Metric(
        "goodput_model_steps_per_s",
        label="goodput the model's rules give over the run's own leaves and joins",
        terminal=True,
    ),
    Metric(
        "goodput_model_error",
        label="goodput model error (the model's rules over the run's changes): (model - measured) / measured",
        terminal=True,
    ),
    Metric("restarts_model", int, label="restarts the model's rules give over the run's own leaves and joins"),
    Metric("first_loss", label="first loss", csv=("measured",)),
    Metric("final_loss", label="last loss", csv=("measured",)),
    Metric(
        "diverged_at_step",
        int | None,
        label="training diverged: from this step on no node's loss was a number",
        unit="count",
        terminal=True,
    ),
    Metric("steps_measured", int, label="steps measured", unit="count", csv=("measured",)),
    Metric("statistic", str | None, label="statistic", unit="text", csv=("measured",)),
    Field("per_node", dict[int, dict[str, float]] | None),
    Field("gpus_per_node", int | None, prediction=True),
    Field("per_machine", dict[int, dict[str, float]] | None),
    Field("stalls", list[dict[str, Any]] | None),
    Field("restart_events", list[dict[str, Any]] | None),  # each restart: when, its quorums, members, steps lost
    Field("schedule_segments", list[dict[str, Any]] | None),  # a link schedule's segments: median step, model, error
    Field("run_id", str | None),
    Field("status", str | None),
    Field("reason", str | None),
    Field("replicator", str | None),
    Field("nodes", int | None),
    Field("bw_bps"),
    Field("up_bps"),
    Field("down_bps"),
    Field("delay_ms"),
    Field("jitter_ms"),
    Field("loss"),
    Field("steps", int | None),
    Field("delay_engine", str | None),
    Field("run_dir", str | None),
    Field("fidelity", dict[str, Any] | None),
    Field("predicted", Optional["Prediction"]),
    Field(
        "links", dict[str, Any] | None
    ),  # bytes per link direction, the model's beside the counters' (orchestrator/run/links.py)
    Field("prediction_error", str | None),
    Field("params", int | None, **_MODEL),
    Field("calibration", dict[str, Any] | None, **_MODEL),  # the calibration's identity (source, file, digest)
    Field("host_cpus", int | None, **_MODEL),
)
METRICS: tuple[Metric, ...] = tuple(f for f in FIELDS if isinstance(f, Metric))
_BY_KEY = {f.key: f for f in FIELDS}


def _check(fields: tuple[Field, ...]) -> None:
    """The table is consistent with itself; a mistake fails at import, so any test catches it."""
    problems = [] if len(_BY_KEY) == len(fields) else ["a key declared twice"]
    for m in (f for f in fields if isinstance(f, Metric)):
        if "predicted" in m.csv and not m.prediction:
            problems.append(f"{m.key}: a pred_ column of a key the model does not predict")
        if "measured" in m.csv and not m.summary:
            problems.append(f"{m.key}: a measured column of a key the run does not measure")
        if not all(isinstance(_BY_KEY.get(k), Metric) for k in (*m.parts, *([m.captured] if m.captured else []))):
            problems.append(f"{m.key}: parts or captured name no metric")
        if m.source is not None and not isinstance(m.source, Col):
            problems.append(f"{m.key}: source names no steps.csv column (netbench/rundir/steps_schema.py)")
        if m.report and not m.short:
            problems.append(f"{m.key}: report columns need a short heading")
    if problems:
        raise ValueError("netbench/rundir/summary.py: " + "; ".join(problems))


_check(FIELDS)


class _Record(BaseModel):
    """Typed keys, unknown keys kept (a newer or older writer's), and JSON exactly as the writer gave it."""

    model_config = ConfigDict(extra="allow")
    declared: ClassVar[tuple[Field, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON object (as Python values): the keys that were set, in declaration order, extra keys last."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def from_json(cls, data: dict[str, Any] | str):
        """A record from run.json's object (or its text)."""
        return cls.model_validate(json.loads(data) if isinstance(data, str) else data)

    @classmethod
    def new(cls, **values: Any):
        """A record a writer is producing now: every key must be declared (a misspelt key fails here, not in a
        reader).
        """
        unknown = sorted(set(values) - {f.key for f in cls.declared})
        if unknown:
            raise KeyError(f"{cls.__name__} has no key {', '.join(unknown)} (declare it in netbench/rundir/summary.py)")
        return cls(**values)


def _record(name: str, doc: str, fields: tuple[Field, ...]) -> type[_Record]:
    model = create_model(name, __base__=_Record, __doc__=doc, **{f.key: (f.type, None) for f in fields})
    model.declared = fields
    return model


Prediction = _record(
    "Prediction",
    "What the model says a run should measure, keyed like the measurement.",
    tuple(f for f in FIELDS if f.prediction),
)
RunSummary = _record(
    "RunSummary",
    "A run's summary: measured figures, coordinates, status and the model's prediction.",
    tuple(f for f in FIELDS if f.summary),
)
RunSummary.model_rebuild(_types_namespace={"Prediction": Prediction})


def measured_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps a summary reads: those after warm-up (every row of a frame without a ``warmup`` column)."""
    return steps[~steps[Col.WARMUP].astype(bool)] if Col.WARMUP in steps else steps


def statistic(measured: pd.DataFrame) -> Literal["median", "mean"]:
    """``median`` per node, or ``mean`` when a node's payload changes from step to step.

    Replicators that communicate every K steps (a declared period) have a typical step with no
    traffic at all: its median shows 0 bytes and no communication, while what a user plans with
    (and what the model predicts) is the average over a period. Constant-payload replicators keep
    the median, which shrugs off the odd slow step. The summary's times and bytes and the replay's
    codec (:func:`netbench.orchestrator.prediction.measured_codec_s`) all take it.
    """
    if Col.PAYLOAD_BYTES not in measured:
        return "median"
    varying = measured.groupby(Col.RANK)[Col.PAYLOAD_BYTES].nunique().max() > 1
    return "mean" if varying else "median"


def metric(key: str) -> Metric:
    """The metric named ``key`` (KeyError for a key that is not a metric)."""
    found = _BY_KEY[key]
    if not isinstance(found, Metric):
        raise KeyError(key)
    return found


def predicted_column(key: str) -> str:
    """summary.csv's column of the model's figure for ``key``."""
    return f"pred_{key}"


def compared_column(key: str) -> str:
    """A report frame's column of the measured figure the model is held against (the capture's where a point has it)."""
    return f"compared_{key}"


def error_column(key: str) -> str:
    """A report frame's column of the model's relative error, (predicted - measured) / measured."""
    return f"err_{key}"


def csv_measured() -> tuple[str, ...]:
    """summary.csv's measured columns, in order."""
    return tuple(m.key for m in METRICS if "measured" in m.csv)


def csv_predicted() -> tuple[str, ...]:
    """The prediction's keys summary.csv keeps (as ``pred_<key>``), in order."""
    return tuple(m.key for m in METRICS if "predicted" in m.csv)


def terminal_metrics() -> tuple[Metric, ...]:
    """The rows of a run's terminal table, in order."""
    return tuple(m for m in METRICS if m.terminal)


def step_parts() -> tuple[Metric, ...]:
    """The parts a step's time splits into (compute, encode, communicate, decode, apply), in order."""
    return tuple(m for m in METRICS if m.part_of_step)


def report_metrics() -> tuple[Metric, ...]:
    """The metrics with columns in report.md's points table, in order."""
    return tuple(m for m in METRICS if m.report)


def reduced_metrics(across: str) -> tuple[Metric, ...]:
    """The metrics the run summary reduces from a steps.csv column, combining nodes ``across`` (slowest, median or
    mean).
    """
    return tuple(m for m in METRICS if m.source and m.across == across)
