"""What the model says a run should have measured, for putting beside what it did measure.

The model predicts communication and compression; local work comes from the run itself. A
step's local work is the workload's forward/backward (``compute_s``) plus the base optimizer's
update (``apply_s``): neither depends on the network or the replicator's wire format, so the
model takes both as measured inputs (the issue: "compute comes from the user or measurement")
and predicts the rest -- the replicator's encode/decode from the calibration and the
collectives from link rate, delay, framing and per-message overhead.

The emulated cluster is not quite the model's cluster (:mod:`netbench.orchestrator.emulated_host`): its nodes
share the host's cores, so encode/decode of N nodes on C cores takes N/C times its calibrated
time, and tbf's token bucket, refilled while a node computes, lets each step's first burst of
bytes skip the rate limit. Both come from the host and the shaper's settings. The kernel's TCP timers run on wall
time: a dilated run meets bbr's min-RTT window k times sooner in emulated time (:class:`KernelClock`).

Encode and decode are predicted separately (``compress_time_s`` is encode, ``decode_time_s``
decode, as the run summary measures them), each ``a * params + b * tensors`` from the calibration.

Keys of the returned dict match the run summary's (both are declared in :mod:`netbench.rundir.summary`),
so tables can put them side by side. A run
predicts once, when it finishes, with the calibration it used; the prediction (and that
calibration's identity) is stored in run.json and read back by sweep, report and plots.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import pandas as pd

from netbench.calibrate.host import host_cpus
from netbench.calibrate.hostcache import load_calibration
from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.emulation.tcpsettings import expected_tcp_settings
from netbench.model import sharding
from netbench.model.calibration import Calibration, cost_key
from netbench.model.gloo_tcp import BBR_MIN_RTT_WINDOW_S, KernelTimers
from netbench.model.network import GraphEstimate, GraphModel, Layout
from netbench.model.node_clocks import Pair, PairPrice, replay_clocks
from netbench.model.schemes import Scheme, declared, scheme_from_config, shape_key
from netbench.model.step import HostEffects, training_step
from netbench.model.steptime import Scenario, StepEstimate
from netbench.model.view import cluster_scenario
from netbench.orchestrator.emulated_host import bucket_credit_s, cpu_share
from netbench.rundir.segments import slowest_between_syncs_s, slowest_pieces_s
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import Prediction, measured_steps, statistic
from netbench.shapes import ParamShape, total_params
from netbench.validation import error_text
from netbench.workloads.config import WorkloadConfig

__all__ = [
    "RunLike",
    "period_warnings",
    "workload_shapes",
    "shapes_record",
    "local_time_s",
    "run_local_time_s",
    "ranks_meet_at_calls",
    "measured_codec_s",
    "scenario_for",
    "layout_of",
    "measured_step_numbers",
    "priced_steps",
    "model_step",
    "KernelClock",
    "kernel_clock",
    "clock_over",
    "predict",
    "dense_prediction",
    "weights_sharded",
    "prediction",
    "as_summary",
    "predict_run",
    "replay_run",
    "rank_local_s",
    "node_clock_lag_s",
    "model_errors",
]


class RunLike(Protocol):
    """The parts of a RunConfig a prediction needs (kept structural so the model does not import the orchestrator)."""

    cluster: ClusterSpec
    replicator: ReplicatorConfig
    workload: WorkloadConfig


def period_warnings(
    replicator: ReplicatorConfig,
    nodes: int,
    steps: int,
    shapes: Sequence[ParamShape] | None = None,
    warmup: int | None = None,
) -> list[str]:
    """A warning per exchange whose period does not divide the measured steps, and (given the run's ``warmup``
    steps) one per phase that ends after the warm-up.

    The model averages a periodic exchange (a sync every H steps) over its period; a
    window of 4 measured steps of a replicator syncing every 10 held no sync at all and read 0.3x the
    model. The periods come from the replicator's settings alone, so without the model's ``shapes`` one
    placeholder tensor stands in for them (a declaration that reads the layers, as Streaming DiLoCo's, needs them).
    """
    shapes = list(shapes or [ParamShape("w", (1,))])
    exchanges = scheme_from_config(replicator).exchanges(shapes, nodes)
    periods = sorted({e.period for e in exchanges if e.period > 1 and steps % e.period})
    out = [
        f"{replicator.name} communicates every {p} steps and {steps} steps are measured: their mean is not the "
        f"period average the model predicts; measure a multiple of {p} steps (--steps)"
        for p in periods
    ]
    if warmup is None:
        return out
    ends = sorted({p.steps[1] for p in declared(shape_key(shapes), replicator, nodes).parts() if p.steps[1] > warmup})
    return out + [
        f"{replicator.name} changes what it sends after step {end} and {warmup} warm-up steps are left out: the "
        f"model prices the steps after step {end}; leave {end} out (--warmup {end})"
        for end in ends
    ]


def workload_shapes(
    workload: WorkloadConfig, world_size: int = 2, recorded: Sequence[ParamShape] | None = None
) -> list[ParamShape]:
    """Parameter shapes the workers train: ``recorded`` by a finished run where given, else as the settings declare
    them (nothing built), else, for a python: workload, from building its model once: that imports the user's module,
    which only a run the user started allows (:func:`netbench.workloads.python.name_for_run`)."""
    if recorded is not None:
        return list(recorded)
    declared = workload.declared_shapes()
    if declared is not None:
        return declared
    return list(_built_shapes(workload.model_dump_json(), world_size))


def shapes_record(workload: WorkloadConfig, world_size: int) -> dict[str, list[int]] | None:
    """The shapes as run.json records them (name -> dims), so a report predicts again without reading a shapes file
    or importing a python: workload; None where they cannot be had."""
    try:
        return {s.name: list(s.shape) for s in workload_shapes(workload, world_size)}
    except Exception:  # noqa: BLE001 - the prediction reports the same failure
        return None


@functools.lru_cache(maxsize=8)
def _built_shapes(workload_json: str, world_size: int) -> tuple[ParamShape, ...]:
    """A python: workload's shapes, built once per process (the prediction and the per-link bytes both ask)."""
    from netbench.workloads import build_workload  # late: torch: only for the user's own model

    return tuple(build_workload(WorkloadConfig.model_validate_json(workload_json), 0, world_size).param_shapes())


def local_time_s(steps: pd.DataFrame, meet_at_calls: bool = True) -> float | None:
    """Measured local work per step: compute + apply of the slowest node in each step, median over the steps.

    A synchronous step waits for its slowest node, and which node that is changes from step to step: on
    this 2-core host the README's main job (a real model) had a node's median local work at 53 ms while
    the slower of the two took 57.5 ms in the median step, and the difference showed up as unexplained
    communication (waiting for the peer). Uses post-warm-up steps, like the run summary. None when
    nothing was measured.

    With the weights sharded (FSDP), the step also waits for its group's slowest rank at every collective inside
    forward and backward: the compute is then the sum over the pieces between them of the slowest rank's
    (:func:`netbench.rundir.segments.slowest_pieces_s`), which the steps record. Where the ranks call collectives
    only every few steps (a periodic replicator), they wait for each other only there: the local work is the slowest
    rank's over each stretch of steps up to a call, per step (:func:`netbench.rundir.segments.slowest_between_syncs_s`),
    when every call meets every rank (``meet_at_calls``, :func:`ranks_meet_at_calls`).
    """
    if steps.empty or Col.COMPUTE_S not in steps:
        return None
    measured = measured_steps(steps)
    if measured.empty:
        return None
    apply = measured[Col.APPLY_S] if Col.APPLY_S in measured else pd.Series(0.0, index=measured.index)
    pieces = slowest_pieces_s(measured)
    if pieces is not None:  # FSDP: each layer waits for its group's slowest rank (netbench.rundir.segments)
        slowest_apply = apply.groupby(measured[Col.STEP]).max()
        return float((pieces + slowest_apply.reindex(pieces.index).fillna(0.0)).median())
    local = measured[Col.COMPUTE_S] + apply
    between = slowest_between_syncs_s(steps, local) if meet_at_calls else None  # ranks that meet every few steps
    return between if between is not None else float(local.groupby(measured[Col.STEP]).max().median())


def run_local_time_s(steps: pd.DataFrame, config: RunLike, shapes: Sequence[ParamShape]) -> float | None:
    """:func:`local_time_s` of a run's steps, its ranks meeting at every call where its exchanges say so
    (:func:`ranks_meet_at_calls`)."""
    return local_time_s(steps, ranks_meet_at_calls(config, shapes))


def ranks_meet_at_calls(config: RunLike, shapes: Sequence[ParamShape]) -> bool:
    """Whether every exchange of the run's replicator is a collective of all its ranks, so that each call waits for
    the slowest of them (:func:`local_time_s`); a pairwise exchange (gossip) waits for one partner only, and a lag
    carries over to the next pairing."""
    exchanges = scheme_from_config(config.replicator).exchanges(shapes, config.cluster.nodes)
    return all(ex.collective != "pairwise" for ex in exchanges)


def _slowest_codec(measured: pd.DataFrame) -> pd.DataFrame:
    """Per measured step, the slowest node's encode and decode (columns ``compress_s``, ``decode_s`` where recorded)."""
    columns = [c for c in (Col.COMPRESS_S, Col.DECODE_S) if c in measured and measured[c].notna().any()]
    return measured.groupby(Col.STEP)[columns].max()


def measured_codec_s(steps: pd.DataFrame) -> tuple[float, float] | None:
    """Measured (encode, decode) per step: the slowest node's in each step, over the measured steps by the run's own
    statistic (:func:`netbench.rundir.summary.statistic`): the median, or the mean where the payload changes from step
    to step.

    What the replay feeds the model in place of the calibration's codec times: the cores of a shared host drift by a
    third within minutes, and a forecast made from calibration then misses by what the host did, not the network. A
    replicator that exchanges every K steps encodes on its sync steps only: the median step encodes nothing, while
    the measured step (a mean) holds the sync steps' quantizing, top-k and error feedback, spread over the period as
    the calibration times it (:mod:`netbench.calibrate.measure`: mean over whole periods).
    """
    if steps.empty or Col.COMPRESS_S not in steps:
        return None
    measured = measured_steps(steps)
    if measured.empty or not measured[Col.COMPRESS_S].notna().any():
        return None
    per_step = _slowest_codec(measured).agg(statistic(measured))
    return float(per_step[Col.COMPRESS_S]), float(per_step.get(Col.DECODE_S, 0.0))


def mean_codec_s(steps: pd.DataFrame) -> float:
    """Measured encode + decode per step, the slowest node's in each step, mean over the measured steps: what a
    quantized ring's hops are priced at, whichever statistic the run's step takes (:func:`measured_codec_s`)."""
    measured = measured_steps(steps)
    if measured.empty:
        return 0.0
    per_step = _slowest_codec(measured)
    return float(per_step.sum(axis=1).mean()) if not per_step.empty and len(per_step.columns) else 0.0


def scenario_for(
    cluster: ClusterSpec,
    local_s: float,
    calibration: Calibration,
    gpus_per_node: int = 1,
    intra_bits_per_s: float | None = None,
) -> Scenario:
    """The model's view of an emulated cluster (:func:`netbench.model.view.cluster_scenario`): its access links, ring
    collectives, this host's ACK ratio, the nodes' TCP settings; with G workers per node, each worker's share of the
    intra-node link."""

    access = cluster.access
    return cluster_scenario(
        cluster.nodes,
        access.forward.rate_bps,
        access.reverse.rate_bps,
        cluster.one_way_delay_s(),
        local_s,
        expected_tcp_settings(cluster.tcp),
        calibration.framing(),
        gpus_per_node,
        intra_bits_per_s,
    )


def encode_decode_s(
    config: RunLike, shapes: Sequence[ParamShape], calibration: Calibration, cpus: int | None = None
) -> tuple[float, float]:
    """(encode, decode) seconds per step of the run's replicator on ``shapes``, on ``cpus`` cores shared by its nodes.

    With G workers per node, one worker's, on its slices, with every worker sharing the cores.
    """
    g = sharding.gpus_per_node(config)
    shapes = sharding.worker_shapes(shapes, g)
    share = cpu_share(config.cluster.nodes * g, cpus or host_cpus())
    enc, dec = calibration.encode_decode_s(cost_key(config.replicator), total_params(list(shapes)), len(shapes))
    return enc * share, dec * share


def layout_of(config: RunLike) -> Layout:
    """How the run replicates over its graph: one flat ring, or sharded within sites (``shard_within site``)."""
    return "sites" if getattr(config, "shard_within", "node") == "site" else "flat"


def _graph_inputs(
    config: RunLike,
    shapes: Sequence[ParamShape],
    local_s: float,
    calibration: Calibration,
    scheme: Scheme | None = None,
) -> tuple[GraphModel, Scheme, list[ParamShape], Scenario]:
    """The run's graph and placement, the scheme as a node's workers run it, their shapes and the scenario.

    ``scheme``: the run's replicator as a scheme, where the caller holds it already (else built from ``config``).
    ``local_s`` is the slowest node's measured local work, so the model's nominal node gets ``local_s`` over the
    slowest node's ``compute_scale``. With G workers per node the rings run over the machines, fed what each node's
    workers replicate, and the node's workers reduce among themselves on the intra-node link.
    """
    cluster = config.cluster
    graph = GraphModel(cluster.topology, cluster.placement)
    scale = cluster.topology.nodes[graph.slowest].compute_scale
    g = sharding.gpus_per_node(config)
    intra = sharding.intra_bits_per_s(config) if g > 1 else None
    scenario = scenario_for(cluster, local_s / scale, calibration, g, intra)
    scheme = sharding.per_worker(scheme or scheme_from_config(config.replicator), shapes, g)
    return graph, scheme, sharding.node_shapes(shapes, g), scenario


def measured_step_numbers(steps: pd.DataFrame) -> tuple[int, ...]:
    """The 1-based numbers of a run's measured steps (steps.csv counts from 0, warm-up included): the steps whose
    syncs a gossip run's prediction and replay price, each at its own pairs."""
    if steps.empty or Col.STEP not in steps:
        return ()
    return tuple(int(s) + 1 for s in sorted(measured_steps(steps)[Col.STEP].unique()))


def priced_steps(config: RunLike, steps: Sequence[int] | None) -> tuple[int, ...] | None:
    """``steps`` where given, else the steps a run of ``config`` measures (those after its warm-up), else None (the
    pairing's expectation)."""
    if steps:
        return tuple(steps)
    count, warmup = getattr(config, "steps", None), getattr(config, "warmup_steps", None)
    if not isinstance(count, int) or not isinstance(warmup, int):
        return None
    return tuple(range(warmup + 1, warmup + count + 1))


def model_step(
    config: RunLike,
    shapes: Sequence[ParamShape],
    local_s: float,
    calibration: Calibration,
    scheme: Scheme | None = None,
    steps: Sequence[int] | None = None,
) -> GraphEstimate:
    """The model's step on the run's network graph and rank placement, before any overlap rule or the emulator's own
    effects (what sets it, and the bytes per link direction). ``scheme``: the run's replicator as a scheme, where the
    caller built it already; ``steps``: the 1-based steps priced (:func:`priced_steps`)."""
    graph, scheme, node_shapes, scenario = _graph_inputs(config, shapes, local_s, calibration, scheme)
    return graph.estimate(
        scheme, node_shapes, scenario, calibration, layout_of(config), steps=priced_steps(config, steps)
    )


@dataclass(frozen=True)
class KernelClock:
    """How the kernel's timers met a run's measured steps: its time dilation as recorded (bbr's 10 s and 200 ms pass
    in wall time, which a run dilated k times sees k times shorter; None: a run directory that records none, taken as
    undilated for the timers) and how many of bbr's min-RTT expiries its measured steps held per window of wall time
    (:func:`~netbench.model.gloo_tcp.probe_rtt_s`)."""

    dilation: float | None = None
    expiries_per_window: float = 1.0

    def timers(self) -> KernelTimers:
        """The model's view of this clock: what the timers' 10 s and 200 ms are in the run's emulated time."""
        return KernelTimers(1.0 / max(1.0, self.dilation or 1.0), self.expiries_per_window)


def kernel_clock(steps: pd.DataFrame, dilation: float | None = None) -> KernelClock:
    """A finished run's :class:`KernelClock` from its steps.csv, whose ``t_start`` and ``t_end`` are wall time.

    Its connections open as its first step starts (gloo's process group is made before it) and take their first
    minimum round trip then, so their windows run out together at whole windows of wall time after it: the measured
    steps, from the first's start to the last's end, hold those that fall between (the drift each probe adds to the
    next is left out)."""
    measured = measured_steps(steps)
    if steps.empty or measured.empty or Col.T_START not in steps or Col.T_END not in steps:
        return KernelClock(dilation)
    opened = float(steps[Col.T_START].min())
    return clock_over(float(measured[Col.T_START].min()) - opened, float(measured[Col.T_END].max()) - opened, dilation)


def clock_over(first_s: float, last_s: float, dilation: float | None = None) -> KernelClock:
    """The :class:`KernelClock` of measured steps from ``first_s`` to ``last_s`` of wall time after the run's
    connections opened: the whole min-RTT windows that end between, per window of wall time."""
    if last_s <= first_s:
        return KernelClock(dilation)
    expiries = math.floor(last_s / BBR_MIN_RTT_WINDOW_S) - math.floor(first_s / BBR_MIN_RTT_WINDOW_S)
    return KernelClock(dilation, expiries * BBR_MIN_RTT_WINDOW_S / (last_s - first_s))


def predict(
    config: RunLike,
    shapes: Sequence[ParamShape],
    local_s: float,
    calibration: Calibration,
    cpus: int | None = None,
    codec_s: tuple[float, float] | None = None,
    hop_codec_s: float | None = None,
    steps: Sequence[int] | None = None,
    dense: bool = False,
    clock: KernelClock | None = None,
) -> StepEstimate:
    """The model's step for ``config`` on ``shapes`` with ``local_s`` of measured local work, on ``cpus`` shared cores.

    :func:`netbench.model.step.training_step`, the function ``plan`` calls, given the emulated host's effects: its
    ``compression_time_s`` is encode + decode of :func:`encode_decode_s` (per tensor as well as per parameter), on the
    slowest node; ``codec_s`` replaces them with measured (encode, decode) times (the replay), which already hold the
    slowest node's own speed, and ``hop_codec_s`` the encode + decode a quantized ring's hops are priced at (the
    run's mean, :func:`mean_codec_s`); tbf's refilled bucket credits the wire (:func:`bucket_credit_s`). ``steps``:
    the 1-based steps a run measured (:func:`priced_steps`), whose syncs a gossip run is priced at. ``dense``: a step
    of the phases that open the run (:meth:`~netbench.model.schemes.Scheme.dense_phase`: their exchanges, no codec).
    ``clock``: how the kernel's timers met the run (:func:`kernel_clock`; None: a cluster running undilated for long,
    as plan prices it).
    """
    measured = codec_s is not None
    calibrated = (0.0, 0.0) if dense else encode_decode_s(config, shapes, calibration, cpus)
    codec = codec_s if codec_s is not None else calibrated
    hops = sum(calibrated) if hop_codec_s is None else hop_codec_s
    host = HostEffects(codec, measured, functools.partial(bucket_credit_s, config.cluster, local_s), hops)
    run_scheme = scheme_from_config(config.replicator)
    graph, scheme, node_shapes, scenario = _graph_inputs(
        config, shapes, local_s, calibration, run_scheme.dense_phase() if dense else run_scheme
    )
    if clock is not None:
        scenario = scenario.model_copy(update={"timers": clock.timers()})
    found = training_step(
        graph,
        scheme,
        node_shapes,
        scenario,
        calibration,
        layout=layout_of(config),
        host=host,
        workload_kind=config.workload.kind,
        steps=priced_steps(config, steps),
    )
    if getattr(config, "shard", "none") != "none":
        return weights_sharded(config, found.step, graph, scheme, shapes, calibration)
    return found.step


def weights_sharded(
    config: RunLike,
    est: StepEstimate,
    graph: GraphModel,
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    calibration: Calibration,
) -> StepEstimate:
    """``est`` with FSDP's gathers and reduce-scatters (:func:`netbench.model.sharding.fsdp_cost`) in place of what
    the model charges sharding groups otherwise: ZeRO-3 shards over every node and replicates nothing (the step is
    local work, codec and FSDP's collectives); HSDP shards within each site, where FlexDeMo's reduce-scatter and
    all-gather of the dense gradient on the site's LAN would be, and the replicator between sites stays as priced.
    FSDP's collectives run inside forward and backward, never behind compute, so they add to the step. The payload
    is what a node hands to collectives with other nodes: FSDP's (its share of each gather, each reduce-scatter's
    whole buffer), and with HSDP the replicator's between sites too."""
    scenario = est.scenario
    if config.shard == "zero3":
        fsdp = sharding.fsdp_cost(graph.flat, shapes, scenario, calibration)
        return replace(
            est,
            exchanges=(),
            payload_bytes_per_step=sharding.fsdp_payload_bytes(shapes, graph.flat.peers),
            wire=fsdp,
            comm_time_s=fsdp.time_s,
            intra_time_s=fsdp.time_s,
            step_time_s=est.compute_time_s + est.compression_time_s + fsdp.time_s,
        )
    within, _ = graph.layout_rings("sites")
    fsdp = sharding.fsdp_cost(within, shapes, scenario, calibration)
    flexdemo, _ = graph.within_sites(scheme, total_params(list(shapes)), within, scenario, calibration, 1.0)
    wire = replace(est.wire, tx=est.tx + flexdemo.tx.scaled(-1) + fsdp.tx, rx=est.rx + flexdemo.rx.scaled(-1) + fsdp.rx)
    return replace(
        est,
        wire=wire,
        payload_bytes_per_step=est.payload_bytes_per_step + sharding.fsdp_payload_bytes(shapes, within.peers),
        comm_time_s=est.comm_time_s - flexdemo.time_s + fsdp.time_s,
        intra_time_s=fsdp.time_s,
        step_time_s=est.step_time_s - flexdemo.time_s + fsdp.time_s,
    )


def prediction(
    est: StepEstimate,
    calibration: Calibration,
    encode_s: float | None = None,
    decode_s: float = 0.0,
    identity: dict[str, Any] | None = None,
) -> Prediction:
    """The estimate as the typed prediction beside a run's summary: ``compress_time_s`` is encode, ``decode_time_s``
    decode.
    """
    encode_s = est.compression_time_s - decode_s if encode_s is None else encode_s
    return Prediction.new(
        step_time_s=est.step_time_s,
        comm_time_s=est.comm_time_s,
        compress_time_s=encode_s,
        decode_time_s=decode_s,
        encode_decode_time_s=est.compression_time_s,
        local_time_s=est.compute_time_s,
        payload_bytes_per_step=est.payload_bytes_per_step,
        wire_tx_bytes_per_step=est.tx.total,
        wire_rx_bytes_per_step=est.rx.total,
        params=est.params,
        calibration=identity or calibration.identity(),
    )


def as_summary(
    est: StepEstimate,
    calibration: Calibration,
    encode_s: float | None = None,
    decode_s: float = 0.0,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A prediction keyed like the run summary (:func:`prediction` as run.json stores it)."""
    return prediction(est, calibration, encode_s, decode_s, identity).to_json()


def predict_run(
    config: RunLike,
    steps: pd.DataFrame,
    n_params: int | None = None,
    calibration: Calibration | None = None,
    cpus: int | None = None,
    identity: dict[str, Any] | None = None,
    recorded: Sequence[ParamShape] | None = None,
    clock: KernelClock | None = None,
) -> dict[str, Any]:
    """Prediction for a finished run, or ``{"error": why}``: a run's results never depend on the model working.

    ``n_params`` (the workers' count) guards against predicting for a different model than the
    one trained; ``calibration`` defaults to this host's saved one (never measured here);
    ``identity`` names the calibration in the result (default: its source and digest);
    ``recorded``: the shapes the run recorded (a stored run's, so nothing is read or built); ``clock``: how the
    kernel's timers met the run (default: :func:`kernel_clock` of ``steps``, undilated).
    """
    try:
        shapes = workload_shapes(config.workload, config.cluster.nodes, recorded)
        local = run_local_time_s(steps, config, shapes)
        if local is None:
            return {"error": "no measured steps"}
        calib = calibration if calibration is not None else load_calibration()
        if n_params is not None and total_params(shapes) != n_params:
            return {"error": f"workload has {total_params(shapes)} parameters here but the workers trained {n_params}"}
        cpus = cpus or host_cpus()
        enc, dec = encode_decode_s(config, shapes, calib, cpus)
        clock = clock or kernel_clock(steps)
        est = predict(config, shapes, local, calib, cpus, steps=measured_step_numbers(steps), clock=clock)
        g = sharding.gpus_per_node(config)
        out = {
            **as_summary(est, calib, enc, dec, identity),
            "host_cpus": cpus,
            "codec_cpu_s": sum(encode_decode_s(config, shapes, calib, config.cluster.nodes * g)),
            **dense_prediction(config, shapes, local, calib, cpus),
        }  # every worker a core
        if g > 1:  # comm_time_s is the inter-node part, as measured; the intra-node link's beside it
            intra = sharding.intra_prediction(
                shapes, g, est.scenario.framing, calib.overhead("all_reduce"), sharding.intra_bits_per_s(config)
            )
            out.update(comm_time_s=est.comm_time_s - est.intra_time_s, gpus_per_node=g, **intra)
        elif config.shard != "none":  # as measured: the replicator's collectives, the sharding group's beside them
            out.update(comm_time_s=est.comm_time_s - est.intra_time_s, intra_comm_time_s=est.intra_time_s)
        return Prediction.new(**out).to_json()
    except Exception as exc:  # noqa: BLE001 - reported beside the measurement instead of failing the run
        return {"error": error_text(exc)}


def dense_prediction(
    config: RunLike, shapes: Sequence[ParamShape], local_s: float, calibration: Calibration, cpus: int
) -> dict[str, Any]:
    """``dense_steps`` and ``dense_step_time_s``: how many steps open a run of ``config`` in phases that end (1-bit
    Adam's dense warm-up) and the model's step in them, so a run's length is priced phase by phase
    (:func:`netbench.declarations.phases.run_time_s`); nothing where every phase lasts."""
    dense_steps = scheme_from_config(config.replicator).dense_steps(
        sharding.worker_shapes(shapes, sharding.gpus_per_node(config)), config.cluster.nodes
    )
    if not dense_steps:
        return {}
    est = predict(config, shapes, local_s, calibration, cpus, steps=range(1, dense_steps + 1), dense=True)
    return {"dense_steps": dense_steps, "dense_step_time_s": est.step_time_s}


def replay_run(
    config: RunLike,
    steps: pd.DataFrame,
    calibration: Calibration | None = None,
    cpus: int | None = None,
    clock: KernelClock | None = None,
) -> float | None:
    """The replayed step: the model's communication and overlap terms fed with the run's own measured local work.

    Compute and apply (:func:`local_time_s`, median over steps) and encode and decode (:func:`measured_codec_s`, the
    run's statistic over steps) are the slowest node's in each measured step; only the network is predicted. Its
    error judges the network model on what the network did; the forecast (:func:`predict_run`, codec from
    calibration) says what a user would have been told before the run. None where the run measured no codec or the
    model cannot price it. ``clock``: how the kernel's timers met the run and its recorded dilation (default:
    :func:`kernel_clock` of ``steps``, no dilation recorded).
    """
    try:
        shapes = workload_shapes(config.workload, config.cluster.nodes)
        local, codec = run_local_time_s(steps, config, shapes), measured_codec_s(steps)
        if local is None or codec is None:
            return None
        calib = calibration if calibration is not None else load_calibration()
        hops = mean_codec_s(steps)
        numbers, clock = measured_step_numbers(steps), clock or kernel_clock(steps)
        found = predict(config, shapes, local, calib, cpus or host_cpus(), codec, hops, numbers, clock=clock)
        lag = node_clock_lag_s(config, shapes, steps, found.compute_time_s + found.compression_time_s, calib, clock)
        return float(found.step_time_s + lag)
    except Exception:  # noqa: BLE001 - the forecast's own error is reported; the replay is then simply absent
        return None


def rank_local_s(steps: pd.DataFrame, dilation: float | None = None) -> tuple[dict[int, list[float]], dict[int, float]]:
    """Each rank's own local work per measured step (compute, apply, encode and decode as it measured them, the steps
    in order) and when it started the first measured step, after the rank that started it first (the lag the warm-up's
    exchanges left it, in the steps' own time: a dilated run's wall clock over its recorded ``dilation``, or where
    none is recorded over what its steps say, :func:`_wall_per_step_s`; 0 where steps.csv holds no start times); empty
    where a rank lacks a step."""
    measured = measured_steps(steps)
    columns = [c for c in (Col.COMPUTE_S, Col.APPLY_S, Col.COMPRESS_S, Col.DECODE_S) if c in measured]
    if measured.empty or Col.COMPUTE_S not in columns:
        return {}, {}
    per = measured.set_index([Col.STEP, Col.RANK])[columns].fillna(0.0).sum(axis=1).unstack(Col.RANK).sort_index()
    if per.isna().any().any():
        return {}, {}
    local = {int(rank): [float(v) for v in per[rank]] for rank in per.columns}
    first = measured[measured[Col.STEP] == measured[Col.STEP].min()]
    if Col.T_START not in first or first[Col.T_START].isna().any():
        return local, dict.fromkeys(local, 0.0)
    start = first.set_index(Col.RANK)[Col.T_START]
    wall_per_s = dilation if dilation is not None else _wall_per_step_s(measured)
    return local, {int(rank): float(t) / wall_per_s for rank, t in (start - start.min()).items()}


def _wall_per_step_s(measured: pd.DataFrame) -> float:
    """Wall seconds per second of a step, for a run directory that records no dilation: a dilated run's ``t_start``
    and ``t_end`` are wall time and its ``step_s`` the emulated time (1 where steps.csv cannot say)."""
    if Col.T_END not in measured or Col.STEP_S not in measured:
        return 1.0
    timed = measured[measured[Col.STEP_S] > 0]
    ratio = ((timed[Col.T_END] - timed[Col.T_START]) / timed[Col.STEP_S]).median()
    return float(ratio) if ratio == ratio and ratio > 0 else 1.0


def node_clock_lag_s(
    config: RunLike,
    shapes: Sequence[ParamShape],
    steps: pd.DataFrame,
    local_s: float,
    calibration: Calibration,
    clock: KernelClock | None = None,
) -> float:
    """What the ranks' own clocks add to (or take off) a pairwise run's step: the slowest rank's mean step replayed
    with each rank's measured local work, each starting the measured steps when it did (:func:`rank_local_s`,
    :func:`netbench.model.node_clocks.replay_clocks`), less the same replay with every rank at ``local_s`` (the local
    work and codec the step holds) from one start, the pairs of each measured sync priced by the graph model
    (:meth:`~netbench.model.network.GraphModel.pair_prices`). 0 for a run whose exchanges meet every rank
    (:func:`ranks_meet_at_calls`), sharded, or with several workers a node. ``clock``: how the kernel's timers met the
    run, its recorded dilation scaling steps.csv's wall clock back (None: undilated timers, the scale from the
    steps)."""
    if ranks_meet_at_calls(config, shapes) or sharding.gpus_per_node(config) > 1 or layout_of(config) != "flat":
        return 0.0
    if getattr(config, "shard", "none") != "none":
        return 0.0
    own, start = rank_local_s(steps, clock.dilation if clock is not None else None)
    numbers = measured_step_numbers(steps)
    if not own or len(own) != config.cluster.nodes or len(numbers) != len(next(iter(own.values()))):
        return 0.0
    graph, scheme, node_shapes, scenario = _graph_inputs(config, shapes, local_s, calibration)
    if clock is not None:
        scenario = scenario.model_copy(update={"timers": clock.timers()})
    prices = graph.pair_prices(scheme, node_shapes, scenario, calibration, numbers)
    index = {number: i for i, number in enumerate(numbers)}
    syncs = {index[step]: list(pairs) for step, pairs in prices.items()}

    def price(i: int, pair: Pair) -> PairPrice:
        return prices[numbers[i]][pair]

    measured = max(replay_clocks(own, syncs, price, start).values())
    even = max(replay_clocks({r: [local_s] * len(w) for r, w in own.items()}, syncs, price).values())
    return measured - even


def model_errors(summary: dict[str, Any]) -> dict[str, float]:
    """``forecast_error`` and ``replay_error``, (model - measured) / measured of the median step, where both sides
    exist.
    """
    measured = summary.get("step_time_s")
    if not measured:
        return {}
    out: dict[str, float] = {}
    forecast = (summary.get("predicted") or {}).get("step_time_s")
    if forecast:
        out["forecast_error"] = forecast / measured - 1
    if summary.get("replay_step_time_s"):
        out["replay_error"] = summary["replay_step_time_s"] / measured - 1
    return out
