"""The GPU planner: an accelerator's compute, the nccl and ideal backends, and the utilisation answers.

``--accelerator`` and the batch set the compute time from the model's FLOPs (``compute_ms`` still overrides);
``backend`` nccl or ideal prices the collectives as a GPU cluster runs them (:mod:`netbench.model.backends`); the
utilisation targets, the token budget and the figure's curves are asked of any backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from netbench.model.accelerators import accelerator
from netbench.model.backends import CodecCost, IdealBackend, NcclBackend, measured_codec_profile
from netbench.model.calibration import Calibration
from netbench.model.compute import ComputeSpec, ModelShape, compute_time_s, flops_per_token, model_shape
from netbench.model.memory import MemoryFit, memory_fit
from netbench.model.nccl import WIRE_EFFICIENCY, NetProfile, net_limit, ring_graph, tcp_window_bytes
from netbench.model.nccl_fit import ClusterHardware
from netbench.model.nccl_tests import NcclFit
from netbench.model.parallelism import Layout, memory_split
from netbench.model.planner import BW_RANGE_BPS, Planner
from netbench.model.rows import estimate_row
from netbench.model.schemes import Scheme, shape_key
from netbench.model.steptime import Scenario, StepEstimate
from netbench.model.utilization import bandwidth_for, curve, log_grid, token_budget
from netbench.model.view import cluster_scenario
from netbench.planning.inputs import PlanInputError, PlanInputs
from netbench.planning.request import GpuPlanOptions, PlanRequest
from netbench.units import format_rate_digits, format_time

__all__ = ["compute_seconds", "build_backend", "bottleneck", "answers", "plan_gpu_cluster", "GpuPlan"]

_rate4 = format_rate_digits


def compute_seconds(opts: GpuPlanOptions, model: ModelShape, workers: int, compute_ms: float) -> tuple[float, str]:
    """A step's forward + backward for ``workers`` accelerators, and how it was sized."""
    if compute_ms > 0:
        return compute_ms / 1e3, f"--compute-ms {compute_ms:g}"
    if opts.accelerator is None or opts.tokens_per_step is None:
        return 0.0, "none (pass --compute-ms, or --accelerator with --batch or --tokens-per-step)"
    spec = ComputeSpec(opts.accelerator, opts.mfu, opts.tokens_per_step, opts.seq_len)
    seconds = compute_time_s(model, spec, workers)
    attention = "" if model.d_model else " (width unknown: attention left out)"
    return seconds, (
        f"{opts.tokens_per_step:.4g} tokens/step x {flops_per_token(model, opts.seq_len):.4g} FLOP/token{attention}, "
        f"shared by the workers' {opts.accelerator.name} at MFU {opts.mfu:g}"
    )


def build_backend(
    opts: GpuPlanOptions, shapes, model: ModelShape, profile: Calibration | None, fit_as_measured_bps: float | None
):
    """The GPU backend the options name (``gloo`` is built by the planner itself); a fit of nccl-tests logs applies
    as measured at ``fit_as_measured_bps`` (the plan's bandwidth when --bw was left out)."""
    codec = CodecCost(opts.accelerator, profile) if opts.codec else CodecCost(None)
    parallel = {"layout": opts.layout, "tokens_per_step": opts.tokens_per_step, "wan": opts.wan}
    if opts.backend == "ideal":
        return IdealBackend(shapes=shapes, model=model, codec=codec, **parallel)
    hardware = fitted_hardware(opts.nccl_fit)
    transport = hardware.transport if hardware else opts.transport  # the logs' own transport
    nics = opts.nics or (hardware.nics if hardware else 1)
    net = NetProfile(
        transport=transport,  # type: ignore[arg-type]
        channels=opts.channels or (max(2, nics) if transport == "socket" else 16),  # sockets: a channel or more a NIC
        threads=opts.socket_threads,
        socks_per_thread=opts.socks_per_thread,
        nics=nics,
    )
    if opts.nccl_fit is not None:
        stream = _fitted_stream(opts.nccl_fit)
        if stream:
            net = net.model_copy(update={"stream_Bps": stream})
    return NcclBackend(
        shapes=shapes,
        model=model,
        codec=codec,
        accelerator=opts.accelerator or (accelerator(hardware.accelerator) if hardware else None),
        net=net,
        fitted=opts.nccl_fit,
        fit_as_measured_bps=fit_as_measured_bps,
        **parallel,
    )


def fitted_hardware(fit: NcclFit | None) -> ClusterHardware | None:
    """The cluster a fit at NCCL's picks was made for (its logs' NICs, transport and accelerator), or None."""
    return next(iter(fit.tuned.values())).hardware if fit is not None and fit.tuned else None


def _fitted_stream(fit: NcclFit) -> float | None:
    """The fit's largest bus bandwidth: the transport's ceiling where the fit has no such collective."""
    buses = [s.bus_Bps for c in fit.collectives.values() for s in c.segments]
    return max(buses) if buses else None


def bottleneck(backend: Any, est: StepEstimate, scenario: Scenario, parts: dict | None = None) -> str:
    """What the step spends the most time on: compute, the codec, or waiting for the collectives (named by the link
    the backend says they wait on, :meth:`~netbench.model.backends.NcclBackend.waits_on`; ``parts``: a layout's step
    parts): a row at 98 % utilisation is compute-bound whatever its last 2 % waits for."""
    exposed = max(0.0, est.step_time_s - est.compute_time_s)
    codec = min(est.compression_time_s, exposed)
    waiting = exposed - codec
    if est.compute_time_s >= max(codec, waiting):
        return "compute"
    if codec >= waiting:
        return "codec"
    if not isinstance(backend, NcclBackend):
        return "network"
    return backend.waits_on(scenario, parts)


def _opening(planner: Planner, scheme: Scheme, scenario: Scenario) -> tuple[int, StepEstimate] | None:
    """The steps that open a run of ``scheme`` in phases that end (1-bit Adam's dense warm-up) and the step there;
    None where every phase lasts."""
    count = scheme.dense_steps(planner.shapes, scenario.machines)
    return (count, planner.step(scheme.dense_phase(), scenario)) if count else None


def answers(
    planner: Planner,
    schemes: list[Scheme],
    scenarios: list[Scenario],
    opts: GpuPlanOptions,
    rows: list[dict],
) -> dict:
    """Utilisation per row, the bandwidth per target, the token budget, and the figure's curves."""
    step = planner.step
    for row, (scheme, scenario) in zip(rows, [(s, sc) for s in schemes for sc in scenarios]):
        est = step(scheme, scenario)
        row["compute_utilization"] = est.compute_time_s / est.step_time_s if est.step_time_s > 0 else None
        if isinstance(planner.backend, NcclBackend | IdealBackend):
            row["codec_source"] = planner.backend.codec.source(scheme)
        if opts.tokens is not None and opts.tokens_per_step:
            row["token_budget"] = token_budget(
                est, opts.tokens, opts.tokens_per_step, _opening(planner, scheme, scenario)
            )
        parts = planner.backend.layout_parts(scheme, scenario) if hasattr(planner.backend, "layout_parts") else None
        row["bottleneck"] = bottleneck(planner.backend, est, scenario, parts)
        if parts is not None:
            row["parallel"] = parts
        if opts.accelerator is not None:
            row["memory"] = _memory(opts, planner, scheme, scenario).as_dict()
    out: dict[str, Any] = {}
    if opts.targets:
        out["bandwidth_for_utilization"] = [
            bandwidth_for(step, s, sc, t) for sc in scenarios for s in schemes for t in opts.targets
        ]
    if opts.figure is not None:
        lo, hi = BW_RANGE_BPS
        grid = log_grid(max(lo, 1e6), min(hi, 1e13), 43)
        out["curves"] = {s.name: curve(step, s, scenarios[0], grid) for s in schemes}
    return out


def _memory(opts: GpuPlanOptions, planner: Planner, scheme: Scheme, scenario: Scenario) -> MemoryFit:
    """One GPU's memory in ``scenario``: a whole replica, or its layout's slice and shards."""
    assert opts.accelerator is not None
    capacity = opts.accelerator.memory_bytes
    if opts.layout.plain or opts.backend == "gloo":
        return memory_fit(scheme, planner.shapes, planner.params, scenario.workers, capacity)
    groups = opts.layout.groups(scenario.workers, scenario.gpus_per_node)
    split = memory_split(opts.layout, groups)
    return memory_fit(scheme, planner.shapes, planner.params, groups.replicas, capacity, split)


def _layout_derived(planner: Planner, inputs: PlanInputs, scenarios: list[Scenario]) -> dict:
    """The derived answers of a parallel layout: the searches over bandwidth. No doubling search over node counts:
    a layout's replica spans whole nodes, so two nodes is no baseline; the node counts are the ones asked."""
    schemes = inputs.schemes
    return {
        "comm_equals_compute_bw": [planner.comm_equals_compute(s, sc) for sc in scenarios for s in schemes],
        "doubling_nodes": [],
        "crossover_bw": [planner.crossovers(a, b, sc) for sc in scenarios for a, b in combinations(schemes, 2)],
    }


def layout_doc(layout: Layout, wan: tuple[float, float] | None = None) -> dict:
    """The layout as the document states it."""
    between = {"sites": layout.sites, "wan_bps": wan[0], "wan_delay_s": wan[1]} if layout.sites and wan else {}
    return between | {
        "tp": layout.tp,
        "pp": layout.pp,
        "microbatches": layout.micro,
        "virtual_stages": layout.virtual_stages,
        "shard": layout.shard,
        "shard_nodes": (layout.shard_nodes or 1) if layout.shard == "hsdp" else None,
    }


def describe(opts: GpuPlanOptions, backend: Any, compute_how: str, model: ModelShape) -> dict:
    """What the JSON says about the backend and the compute term."""
    doc: dict[str, Any] = {
        "backend": backend.describe() if hasattr(backend, "describe") else {"name": opts.backend},
        "compute": {
            "how": compute_how,
            "accelerator": opts.accelerator.model_dump() if opts.accelerator else None,
            "mfu": opts.mfu,
            "tokens_per_step": opts.tokens_per_step,
            "seq_len": opts.seq_len,
            "layers": model.layers,
            "flops_per_token": flops_per_token(model, opts.seq_len),
        },
        "layout": layout_doc(opts.layout, opts.wan),
    }
    if opts.nccl_fit_path:
        doc["backend"]["nccl_calibration"] = opts.nccl_fit_path
    return doc


def intra_source(opts: GpuPlanOptions, request: PlanRequest) -> str:
    """Where each GPU's intra-node bandwidth comes from: --intra-bw shared by the node's GPUs (as ``run`` means it),
    else the accelerator's own link."""
    acc = opts.accelerator
    own = f"the {acc.label}'s {acc.intra_link}" if acc else ""
    intra = request.intra_bits_per_s
    if intra is None:
        return own or "a default of 100 GB/s a GPU"
    g = request.gpus_per_node
    given = f"--intra-bw {_rate4(intra * g)}" + (f" shared by the node's {g} GPUs" if g > 1 else "")
    faster = own and acc.intra_Bps * 8 > intra
    return given + (f"; leave it out for {own}, {acc.intra_Bps / 1e9:.3g} GB/s a GPU" if faster else "")


def links(backend: Any, scenario: Scenario, source: str) -> dict:
    """What carries the collectives of ``scenario``, for the header and ``--json``: each GPU's intra-node bandwidth
    and where it comes from (``source``), and the bus bandwidth across nodes and what sets it."""
    if not isinstance(backend, NcclBackend):
        return {}
    cluster = backend.cluster(scenario)
    doc = {"intra_node_Bps_per_gpu": cluster.intra_bytes_per_s, "intra_node_source": source}
    if cluster.nodes > 1:
        bus, why = net_limit(cluster.net)
        _, ring_bus, bound = ring_graph(cluster)
        if bound == "nvlink" and ring_bus < bus:
            why = f"NVLink as NCCL's ring over the NICs counts it (the NICs carry {bus / 1e9:.3g} GB/s)"
            bus = ring_bus
        doc |= {"net_bus_Bps": bus, "net_bus_limit": why, "tcp_window_bytes": tcp_window_bytes(cluster.net.tcp)}
    return doc


def figure_title(shapes_label: str, scenario: Scenario, backend: str) -> str:
    return (
        f"{shapes_label} on {scenario.workers} workers ({backend}), delay {format_time(scenario.delay_s)}, "
        f"compute {format_time(scenario.compute_s)} a step"
    )


@dataclass(frozen=True)
class GpuPlan:
    """A GPU backend's plan: the document, the figure's curves (where asked), and what its header says."""

    doc: dict[str, Any]
    curves: dict | None
    figure_title: str
    nic_from_fit: bool


def plan_gpu_cluster(
    request: PlanRequest, inputs: PlanInputs, profile: Calibration | None, *, derived: bool = True
) -> GpuPlan:
    """``backend`` nccl or ideal: the document (rows, derived answers unless ``derived`` is False, utilisation
    answers). ``profile``: the codec profile (None: the one measured on the accelerator, where netbench ships one)."""
    opts = request.gpu()
    shapes = shape_key(inputs.shapes)
    model = model_shape(shapes, opts.layers)
    if profile is None and opts.accelerator is not None:
        profile = measured_codec_profile(opts.accelerator.name)
    up, down = request.up_bps, request.down_bps
    bw_given = request.bw != PlanRequest.model_fields["bw"].default
    nic_from_fit = opts.nccl_fit is not None and not bw_given
    if nic_from_fit:
        # the log's NICs, as far as the fit shows them: its best bus bandwidth as their payload rate
        hardware = fitted_hardware(opts.nccl_fit)
        if hardware is not None:  # the NICs the logs were fitted for
            up = down = hardware.nic_bps
        else:
            up = down = (_fitted_stream(opts.nccl_fit) or up / 8) * 8 / WIRE_EFFICIENCY / (opts.nics or 1)
    layout = opts.layout
    if model.layers < layout.pp * layout.virtual_stages:
        raise PlanInputError(
            f"--pp: {layout.pp} stages x {layout.virtual_stages} virtual stages need as many layers; the model has "
            f"{model.layers} (--layers splits it into more)"
        )
    backend = build_backend(opts, shapes, model, profile, None if bw_given else min(up, down))
    g = request.gpus_per_node
    intra = request.intra_bits_per_s
    if intra is None and opts.accelerator is not None:
        intra = opts.accelerator.intra_Bps * 8
    compute_how = ""
    scenarios = []
    for n in request.node_counts:
        compute_s, compute_how = compute_seconds(opts, model, n * g, request.compute_ms)
        scenarios.append(cluster_scenario(n, up, down, request.delay, compute_s, request.tcp, None, g, intra))
    calib = profile or Calibration()
    planner = Planner(shapes, calib, backend)
    rows = [estimate_row(planner.step(s, sc), calib) for s in inputs.schemes for sc in scenarios]
    answered = {}
    if derived and layout.plain:
        answered["derived"] = planner.derived(inputs.schemes, scenarios)
    elif derived:  # a layout's replica spans whole nodes: two nodes are no baseline, it answers its own questions
        answered["derived"] = _layout_derived(planner, inputs, scenarios)
    extra = answers(planner, inputs.schemes, scenarios, opts, rows)
    doc = {
        "shapes": inputs.shapes_label,
        "params": model.params,
        **describe(opts, backend, compute_how, model),
        "links": links(backend, scenarios[0], intra_source(opts, request)),
        "rows": rows,
        **answered,
        **extra,
    }
    curves = doc.pop("curves", None)
    return GpuPlan(doc, curves, figure_title(inputs.shapes_label, scenarios[0], opts.backend), nic_from_fit)
