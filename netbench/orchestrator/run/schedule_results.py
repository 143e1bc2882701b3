"""A scheduled run's results: which schedule segment each step ran in, and per segment what it measured and the model
said.

Time 0 is the first measured step's start on rank 0 (what the live schedule counts from); a step belongs to the
segment in force when it began. Per segment: the median step of the slowest node, the model's forecast (the network
in force then, the segment's measured local work, the calibration's codec scaled by the slowest node's compute scale)
and its replay (the segment's measured codec), and their errors. A segment with a link down gets no prediction;
instead it lists the steps that overlapped the outage (the stall).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from netbench.declarations.registry import spec
from netbench.emulation.spec import ClusterSpec
from netbench.emulation.tcpsettings import expected_tcp_settings
from netbench.model.framing import Framing
from netbench.model.goodput import QUORUM_WAIT_S
from netbench.model.heal import heal_bytes, heal_time_s
from netbench.model.reform import reform_time_s
from netbench.model.schemes import scheme_from_config
from netbench.orchestrator.prediction import KernelClock, predict_run, replay_run, workload_shapes
from netbench.rundir.churn_figures import healed
from netbench.rundir.steps_schema import Col, step_row
from netbench.rundir.summary import measured_steps, statistic
from netbench.schedule.model import Segment
from netbench.schedule.state import members_graph, segments
from netbench.shapes import ParamShape
from netbench.tcp import TcpSettings

if TYPE_CHECKING:
    from netbench.model.calibration import Calibration
    from netbench.orchestrator.config import RunConfig

__all__ = ["annotate", "segment_cluster", "segment_summary", "step_errors", "churn_error", "slowest_node_step_s"]


def _time_zero(steps: pd.DataFrame) -> float | None:
    measured = measured_steps(steps)
    first = measured[measured[Col.RANK] == measured[Col.RANK].min()] if not measured.empty else measured
    return float(first.sort_values(Col.STEP)[Col.T_START].iloc[0]) if not first.empty else None


def annotate(steps: pd.DataFrame, config: RunConfig, dilation: float) -> pd.DataFrame:
    """``steps`` with the segment each step ran in and the slowest link rate, the longest uplink delay, a link down,
    the nodes taking part."""
    if config.schedule is None or steps.empty or Col.T_START not in steps:
        return steps
    t0, found = _time_zero(steps), segments(config.schedule, config.cluster.topology)
    if t0 is None:
        return steps
    starts = pd.Series([s.start_s for s in found])
    elapsed = (steps[Col.T_START] - t0) / dilation
    index = elapsed.clip(lower=0.0).apply(lambda t: int((starts <= t).sum()) - 1)  # warm-up ran on the time-0 network
    by_index = {s.index: s for s in found}
    values = {
        Col.SCHEDULE_SEGMENT: index,
        Col.SCHEDULE_RATE_BPS: index.map(lambda i: _rate(by_index[i]) if i in by_index else None),
        Col.SCHEDULE_DELAY_S: index.map(lambda i: _delay(by_index[i]) if i in by_index else None),
        Col.SCHEDULE_LINK_DOWN: index.map(lambda i: bool(by_index[i].down) if i in by_index else False),
        Col.SCHEDULE_MEMBERS: index.map(
            lambda i: by_index[i].members if i in by_index else config.cluster.topology.node_count
        ),
        Col.SCHEDULE_ELAPSED_S: elapsed,
    }
    return steps.assign(**step_row("schedule", values))


def _rate(segment: Segment) -> float:
    return min(min(link.forward.rate_bps, link.reverse.rate_bps) for link in segment.graph.links)


def _delay(segment: Segment) -> float:
    return max(link.forward.delay_s for link in segment.graph.links)


def segment_cluster(cluster: ClusterSpec, segment: Segment) -> ClusterSpec | None:
    """The cluster as the model should see it during ``segment``: its graph with the nodes taking part (ranks placed
    as the topology orders them), and the star's up/down from the first one's link; None where fewer than two nodes
    take part.
    """
    graph = members_graph(segment) if segment.away else segment.graph
    if graph is None:
        return None
    first = graph.access_link(0)
    update = {"topology": graph, "up": first.forward, "down": first.reverse}
    if segment.away:
        update |= {"nodes": graph.node_count, "rank_order": "topology"}
    return cluster.model_copy(update=update)


def segment_summary(
    config: RunConfig,
    steps: pd.DataFrame,
    n_params: int | None,
    calibration: Calibration | None,
    cpus: int | None,
    identity: dict[str, Any] | None,
    clock: KernelClock | None = None,
) -> list[dict[str, Any]]:
    """One entry per schedule segment that has measured steps (or that took a link down); ``clock``: how the kernel's
    timers met the whole run, which each segment is priced under (its connections opened as the run began)."""
    if config.schedule is None or Col.SCHEDULE_SEGMENT not in steps:
        return []
    measured = measured_steps(steps)
    shapes = _shapes(config) if Col.HEAL_BYTES in steps else "no quorum"
    out = []
    members_before = config.cluster.nodes
    for segment in segments(config.schedule, config.cluster.topology):
        rows = measured[measured[Col.SCHEDULE_SEGMENT] == segment.index]
        left = segment.members < members_before
        members_before = segment.members
        entry: dict[str, Any] = {
            "segment": segment.index,
            "start_s": segment.start_s,
            "end_s": segment.end_s,
            "label": segment.label,
            "rate_bps": _rate(segment),
            "delay_s": _delay(segment),
            "link_down": sorted(segment.down),
            "members": segment.members,
            "compute_scale": max(n.compute_scale for n in segment.graph.nodes),
            "steps": int(rows[Col.STEP].nunique()),
        }
        if segment.down:
            entry["stalled_steps"] = _overlapping(measured, steps, segment)
        path = _path(config, segment, shapes, calibration)
        if rows.empty:
            if segment.down:
                out.append(entry | _heals(config, segment, steps, path, calibration))
            continue
        entry.update(_heals(config, segment, steps, path, calibration))
        entry.update(_reform(config, segment, rows, path))
        transient = _transient_steps(rows, spec(config.replicator.name).period(config.replicator), left)
        steady = rows[~rows[Col.STEP].isin(transient)]
        entry["step_time_s"] = slowest_node_step_s(steady if not steady.empty else rows, statistic(rows))
        if not segment.down:
            entry.update(
                _predicted(config, segment, rows, n_params, calibration, cpus, identity, entry["step_time_s"], clock)
            )
        if transient:
            if steady.empty:  # every window paid for a change: only the whole segment compares with the model
                for key in ("step_time_s", "forecast_error", "replay_error"):
                    entry.pop(key, None)
            entry.update(_membership_cost(rows, transient, entry, left))
        out.append(entry)
    return out


def _transient_steps(rows: pd.DataFrame, period: int, left: bool) -> set[int]:
    """The steps of the windows (``period`` steps, ending in an exchange) that a change in members cost: a window
    holding a heal or an attempt not committed, and, in a segment that a leave began, its first window, whose quorum
    waits for the lighthouse to drop the node that left. Empty for a run without quorum columns."""
    if Col.COMMITTED not in rows or rows.empty:
        return set()
    window = rows[Col.STEP] // period
    hit = rows[healed(rows) | ~rows[Col.COMMITTED].astype(bool)]
    windows = set(window[hit.index])
    if left:
        windows.add(int(window.min()))
    return {int(s) for s in rows[Col.STEP][window.isin(windows)].unique()}


def slowest_node_step_s(rows: pd.DataFrame, how: str) -> float:
    """The step as a run's summary measures it (:func:`netbench.orchestrator.run.results.summarize`): each node's
    ``how`` (median, mean, sum) of its steps among ``rows``, at the slowest node.

    Not the statistic of each step's slowest node: in a replicator that exchanges every K steps the nodes wait for
    one another only at the exchange, so the node that computed slowest in the window's local steps is the one that
    waited least at its end, and taking each step's slowest node would count that node's lead twice (once in its
    local steps, once in the others' wait)."""
    return float(rows.groupby(Col.RANK)[Col.STEP_S].agg(how).max())


def _membership_cost(rows: pd.DataFrame, transient: set[int], entry: dict[str, Any], left: bool) -> dict[str, Any]:
    """The time the segment's changes in members cost beside the model's: the transient windows' slowest-node time
    against their steps at the segment's modelled step, one heal per quorum that healed a node (the nodes healed in
    one quorum are healed at once), and, after a leave, the lighthouse's wait for the node that left
    (:data:`~netbench.model.goodput.QUORUM_WAIT_S`, the whole of it: a bound). The whole segment's mean step is set
    beside the same sum for the model."""
    in_transient = rows[Col.STEP].isin(transient)
    measured_s = slowest_node_step_s(rows[in_transient], "sum")
    out: dict[str, Any] = {"transient_steps": len(transient), "transient_s": measured_s}
    model_step = entry.get("predicted_step_time_s")
    if model_step is None:
        return out
    heal_quorums = rows[healed(rows)][Col.STEP].nunique()
    predicted = len(transient) * model_step + heal_quorums * entry.get("predicted_heal_s", 0.0)
    predicted += QUORUM_WAIT_S if left else 0.0
    predicted += (heal_quorums + left) * entry.get("predicted_reform_s", 0.0)  # each re-formed quorum configures
    steps = rows[Col.STEP].nunique()
    steady = rows[~in_transient]
    steady_n = steps - len(transient)
    steady_s = steady_n * slowest_node_step_s(steady, "mean") if steady_n else 0.0
    out["predicted_transient_s"] = predicted
    out["transient_error"] = predicted / measured_s - 1 if measured_s > 0 else None
    out["segment_step_time_s"] = (steady_s + measured_s) / steps
    out["predicted_segment_step_time_s"] = (steady_n * model_step + predicted) / steps
    out["segment_error"] = out["predicted_segment_step_time_s"] / out["segment_step_time_s"] - 1
    return out


@dataclass(frozen=True)
class _Path:
    """What the model prices a segment's heal and re-formed quorum over: the workload's shapes and one node's path
    (the slower of its link's directions, the one-way delay, the TCP settings, the framing)."""

    shapes: list[ParamShape]
    rate_bps: float
    one_way_s: float
    tcp: TcpSettings
    framing: Framing | None


def _shapes(config: RunConfig) -> list[ParamShape] | str:
    """The workload's shapes, or why the model has none (a python: workload that cannot be built here)."""
    try:
        return list(workload_shapes(config.workload, config.cluster.nodes))
    except Exception as exc:  # noqa: BLE001 - a python: workload that cannot be built here: no prediction
        return f"the model's shapes: {type(exc).__name__}"


def _path(config: RunConfig, segment: Segment, shapes: list[ParamShape] | str, calibration: Any) -> _Path | str:
    """The segment's :class:`_Path` over ``shapes``, or why the model has none."""
    if isinstance(shapes, str):
        return shapes
    cluster = segment_cluster(config.cluster, segment) or config.cluster
    access = cluster.access
    return _Path(
        shapes,
        min(access.forward.rate_bps, access.reverse.rate_bps),
        cluster.one_way_delay_s(),
        expected_tcp_settings(cluster.tcp),
        calibration.framing() if calibration is not None else None,
    )


def _heals(
    config: RunConfig, segment: Segment, steps: pd.DataFrame, path: _Path | str, calibration: Any
) -> dict[str, Any]:
    """The heals recorded in the segment (a node that joined receiving the live state): how many, the median bytes
    and seconds of one, beside the model's (:mod:`netbench.model.heal`) over a node's link in the segment's network;
    nothing where the run recorded none."""
    if Col.HEAL_BYTES not in steps or Col.SCHEDULE_SEGMENT not in steps:
        return {}
    healed_rows = steps[(steps[Col.SCHEDULE_SEGMENT] == segment.index) & healed(steps)]
    if healed_rows.empty:
        return {}
    out: dict[str, Any] = {
        "heals": len(healed_rows),
        "heal_bytes": float(healed_rows[Col.HEAL_BYTES].median()),
    }
    if Col.HEAL_S in healed_rows:
        out["heal_s"] = float(healed_rows[Col.HEAL_S].median())
    if isinstance(path, str):
        return out | {"heal_prediction_error": path}
    predicted_s = heal_time_s(
        config.replicator,
        path.shapes,
        path.rate_bps,
        path.one_way_s,
        tcp=path.tcp,
        framing=path.framing,
        overhead_s=calibration.overhead("pairwise") if calibration is not None else 0.0,
    )
    out["predicted_heal_bytes"] = heal_bytes(config.replicator, path.shapes)
    out["heal_bytes_error"] = out["heal_bytes"] / out["predicted_heal_bytes"] - 1
    out["predicted_heal_s"] = predicted_s
    if "heal_s" in out and predicted_s > 0:
        out["heal_s_error"] = out["heal_s"] / predicted_s - 1
    return out


def _reform(config: RunConfig, segment: Segment, rows: pd.DataFrame, path: _Path | str) -> dict[str, Any]:
    """The model's time for a quorum re-formed with the segment's members to configure its process group and run its
    first call on fresh connections (:func:`netbench.model.reform.reform_time_s`, the segment's median compute
    beside it); nothing where the model has no path."""
    rep = config.replicator
    if isinstance(path, str) or spec(rep.name).kept_state is None:
        return {}
    scheme = scheme_from_config(rep)
    compute_s = float(rows[Col.COMPUTE_S].median()) if Col.COMPUTE_S in rows and not rows.empty else 0.0
    reform_s = reform_time_s(
        scheme, path.shapes, max(segment.members, 2), path.rate_bps, path.one_way_s, compute_s=compute_s,
        tcp=path.tcp, framing=path.framing,
    )  # fmt: skip
    return {"predicted_reform_s": reform_s}


STALL_FACTOR = 2.0  # a step an outage overlapped counts as stalled when it took this many times the run's median step


def _overlapping(measured: pd.DataFrame, steps: pd.DataFrame, segment: Segment) -> list[int]:
    """Steps that ran while the segment's link was down and took over STALL_FACTOR x the run's median step."""
    end = segment.end_s if segment.end_s is not None else float("inf")
    span = steps.groupby(Col.STEP).agg(start=(Col.SCHEDULE_ELAPSED_S, "min"), took=(Col.STEP_S, "max"))
    typical = float(measured.groupby(Col.STEP)[Col.STEP_S].max().median()) if not measured.empty else 0.0
    hit = span[
        (span["start"] < end)
        & (span["start"] + span["took"] > segment.start_s)
        & (span["took"] > STALL_FACTOR * typical)
    ]
    return [int(s) for s in hit.index]


def _predicted(
    config: RunConfig,
    segment: Segment,
    rows: pd.DataFrame,
    n_params: int | None,
    calibration: Any,
    cpus: int | None,
    identity: dict[str, Any] | None,
    measured_s: float,
    clock: KernelClock | None = None,
) -> dict[str, Any]:
    """The model's step for the segment's network beside the segment's median, forecast and replay, with errors."""
    seg_cluster = segment_cluster(config.cluster, segment)
    if seg_cluster is None:
        return {"prediction_error": "one node takes part: it exchanges nothing"}
    seg_config = config.model_copy(update={"cluster": seg_cluster})
    forecast = predict_run(seg_config, rows, n_params, calibration, cpus=cpus, identity=identity, clock=clock)
    out: dict[str, Any] = {}
    if "error" in forecast:
        return {"prediction_error": forecast["error"]}
    out["predicted_step_time_s"] = forecast["step_time_s"]
    out["predicted_comm_time_s"] = forecast.get("comm_time_s")
    out["forecast_error"] = forecast["step_time_s"] / measured_s - 1
    replay = replay_run(seg_config, rows, calibration, cpus=cpus, clock=clock)
    if replay is not None:
        out["replay_step_time_s"] = replay
        out["replay_error"] = replay / measured_s - 1
    return out


def step_errors(steps: pd.DataFrame, found: list[dict[str, Any]]) -> dict[str, float]:
    """Per measured step, the model for the segment in force against the slowest node's step: the median |error|,
    forecast and replay (``schedule_forecast_step_error``, ``schedule_replay_step_error``)."""
    measured = measured_steps(steps)
    if measured.empty or Col.SCHEDULE_SEGMENT not in measured or not found:
        return {}
    per_step = measured.groupby(Col.STEP).agg(segment=(Col.SCHEDULE_SEGMENT, "first"), step_s=(Col.STEP_S, "max"))
    by_index = {s["segment"]: s for s in found}
    out = {}
    for key, model in (
        ("schedule_forecast_step_error", "predicted_step_time_s"),
        ("schedule_replay_step_error", "replay_step_time_s"),
    ):
        predicted = per_step["segment"].map(lambda i, model=model: by_index.get(i, {}).get(model))
        errors = (pd.to_numeric(predicted, errors="coerce") / per_step[Col.STEP_S] - 1).abs().dropna()
        if not errors.empty:
            out[key] = float(errors.median())
    return out


def churn_error(found: list[dict[str, Any]]) -> dict[str, float]:
    """Over a run through churn, the model's time for the measured steps against theirs, each segment's steady step,
    heals and waits priced (``churn_model_error``); nothing for a run whose members never changed."""
    if not any("transient_s" in s for s in found):
        return {}
    measured = model = 0.0
    for s in found:
        mean, predicted = (
            s.get("segment_step_time_s", s.get("step_time_s")),
            s.get("predicted_segment_step_time_s", s.get("predicted_step_time_s")),
        )
        if mean is None or predicted is None or not s.get("steps"):
            continue
        measured += mean * s["steps"]
        model += predicted * s["steps"]
    return {"churn_model_error": model / measured - 1} if measured > 0 else {}
