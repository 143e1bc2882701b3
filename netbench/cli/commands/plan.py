"""``netbench plan`` (the analytic model's answers) and ``netbench calibrate`` (this host's constants).

Every input is validated before anything is computed or measured; a bad value is one line naming
the option and what it accepts, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import pydantic
import typer
from rich.console import Console
from rich.table import Table

from netbench.calibrate.hostcache import host_calibration
from netbench.cli.commands.plan_gpu import (
    GpuCluster,
    answers,
    compute_seconds,
    figure_title,
    parse_gpu_options,
    plan_gpu_cluster,
    print_crossovers,
    print_gpu_derived,
    print_gpu_table,
    print_utilization,
    write_figure,
)
from netbench.cli.commands.plan_output import plan_on_graphs, print_plan
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, REPLICATOR, RUN, WORKLOAD, Settings, expand, group
from netbench.cli.options import option
from netbench.cli.replicator_choice import REPLICATOR_OPTION_NAMES, parse_schemes, scheme_settings
from netbench.cli.run_options import bucket_choice
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import spec
from netbench.declarations.spec import SettingError
from netbench.emulation.spec import NETWORK
from netbench.emulation.tcpsettings import TCP
from netbench.model.backends import BACKEND_SETTINGS
from netbench.model.calibration import (
    CALIBRATION,
    Calibration,
    CalibrationError,
    cost_key,
    scheme_of,
)
from netbench.model.collectives import ALGORITHM, ALGORITHMS
from netbench.model.compute import COMPUTE_SETTINGS, model_shape
from netbench.model.framing import FRAMING_SETTINGS
from netbench.model.network import GraphModel
from netbench.model.planner import BW_RANGE_BPS, Planner
from netbench.model.rows import estimate_row
from netbench.model.schemes import (
    PLAN_SETTING_FIELDS,
    SchemeUnavailable,
)
from netbench.model.shapes_from_count import synthetic_shapes
from netbench.model.steptime import MAX_PLANNED_NODES, Scenario
from netbench.model.utilization import UTILIZATION_SETTINGS
from netbench.orchestrator.run.resolve import auto_bucket_mb
from netbench.reports.terminal import JSON, make_console
from netbench.shapes import MAX_PARAMS, ParamShape, ShapeError, check_param_count, resolve_shapes, total_params
from netbench.tcp import STOCK_LINUX, TcpSettings
from netbench.topology import DirectionSpec, PlacementError, Topology, TopologyError, parse_rank_order, place
from netbench.topology.graph import MIN_NODES
from netbench.topology.options import PRESETS, refuse_untaken, topology_from_options
from netbench.topology.presets import DEFAULT_PRESET, TOPOLOGY
from netbench.units import (
    UnitError,
    format_bytes,
    format_rate,
    format_rate_digits,
    format_time,
    parse_rate,
    parse_time,
)
from netbench.validation import one_line

MAX_PLANNED_DELAY_S = 10.0  # plan's --delay bound (an emulated link's is emulation.spec.MAX_EMULATED_DELAY_S)
# plan's range of --nodes (machines; the same option as run's): a model is not bounded by this host
PLANNED_NODES = f"; one or a comma list, {MIN_NODES}-{MAX_PLANNED_NODES} workers in all (a topology file sets its own)"


# ----------------------------------------------------------------------------- input parsing


def _rate(option: str, text: str) -> float:
    try:
        bps = parse_rate(text)
    except UnitError as exc:
        raise UserError(f"{option}: {exc}") from None
    lo, hi = BW_RANGE_BPS
    if not lo <= bps <= hi:
        raise UserError(f"{option}: must be between {format_rate(lo)} and {format_rate(hi)}, got {text!r}")
    return bps


def _delay(text: str) -> float:
    try:
        seconds = parse_time(text)
    except UnitError as exc:
        raise UserError(f"--delay: {exc}") from None
    if not 0 <= seconds <= MAX_PLANNED_DELAY_S:
        raise UserError(f"--delay: must be between 0ms and {MAX_PLANNED_DELAY_S:g}s, got {text!r}")
    return seconds


def _nodes(text: str) -> list[int]:
    counts = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        try:
            value = float(item)
        except ValueError:
            raise UserError(
                f"--nodes: expected whole numbers between {MIN_NODES} and {MAX_PLANNED_NODES} (e.g. 2,4,8), "
                f"got {item!r}"
            ) from None
        if value != int(value) or not MIN_NODES <= value <= MAX_PLANNED_NODES:
            raise UserError(f"--nodes: must be whole numbers between {MIN_NODES} and {MAX_PLANNED_NODES}, got {item!r}")
        counts.append(int(value))
    if not counts:
        raise UserError(f"--nodes: expected whole numbers between {MIN_NODES} and {MAX_PLANNED_NODES}, got {text!r}")
    return list(dict.fromkeys(counts))


def _shapes(shapes: str | None, params: str | None, layers: int | None = None) -> tuple[list[ParamShape], str]:
    """The shape list and its label; ``--params`` with ``--layers`` names that many layers (``layers.N.``)."""
    if shapes and params:
        raise UserError("--shapes and --params are exclusive: give a shapes preset/file or a parameter count")
    if params:
        try:
            count = float(params)
        except ValueError:
            raise UserError(
                f"--params: expected a parameter count between 1 and {MAX_PARAMS:.0e} (e.g. 1.5e9), got {params!r}"
            ) from None
        try:
            count = check_param_count(round(count) if math.isfinite(count) else count, "--params")
            shape_list = synthetic_shapes(count, min(layers, count) if layers else None)
        except ShapeError as exc:
            raise UserError(str(exc)) from None
        in_layers = f" in {layers} layers" if layers else ""
        return shape_list, f"--params {params} (synthetic {shape_list[0].shape[-1]}-wide matrices{in_layers})"
    spec = shapes or "gpt2-small:blocks=2"
    try:
        return resolve_shapes(spec), spec
    except ShapeError as exc:
        raise UserError(f"--shapes: {exc}") from None


def _calibration(path: Path | None, quiet: bool = False, replicators=()) -> tuple[Calibration, Path]:
    """``--calibration`` as given, else this host's cached calibration (measured first when there is none)."""

    def told(target: Path) -> None:
        if not quiet:
            print(f"measuring this host's model constants once (a few seconds), cached in {target}", file=sys.stderr)

    try:
        found = host_calibration(path, on_measure=told, replicators=replicators)
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None
    if found.origin == "defaults" and not quiet:
        print(
            "torch is not installed, so this host's constants cannot be measured: the model uses its defaults "
            "(pass --calibration FILE to use constants measured on a host with torch)",
            file=sys.stderr,
        )
    return found.calibration, found.path


def _constants_lines(calib: Calibration, path: Path, configs: list[ReplicatorConfig]) -> list[str]:
    """Which model constants are measured (and on which host) and which are defaults, for ``plan``."""
    schemes = [cost_key(c) for c in configs]
    where = f"measured on {calib.host or '?'} {calib.created}" if calib.source == "measured" else "defaults"
    lines = [f"model constants: {where} ({path})"]
    if calib.source == "measured":
        lines.append(
            f"  measured: per-message overhead {format_time(calib.overhead('all_reduce'))} (all_reduce), "
            f"{format_time(calib.overhead('all_gather'))} (all_gather); encode/decode of "
            + (", ".join(s for s in schemes if calib.measured(s)) or "none of these settings")
        )
    missing = [cost_key(c) for c in configs if not calib.measured(cost_key(c)) and spec(c.name).encodes_with(c)]
    fallback = [s for s in missing if calib.measured(scheme_of(s))]
    missing = [s for s in missing if s not in fallback]
    if fallback:
        lines.append(
            "  encode/decode of "
            + ", ".join(fallback)
            + ": not measured with these settings; the default settings' cost is used"
        )
    lines.append(
        "  defaults: ACK frames per segment "
        + f"{calib.acks_per_segment:g}"
        + (f"; encode/decode of {', '.join(missing)} taken as 0" if missing else "")
        + ("; per-message overhead 0" if calib.source != "measured" else "")
    )
    return lines


KNOWN_CC = ("cubic", "reno", "bbr")  # what the model distinguishes: bbr paces, the others are window-based


def _tcp(cc: str, wmem_max: int, no_slow_start_after_idle: bool) -> TcpSettings:
    """The TCP settings plan assumes for the nodes; one line naming the option when one is wrong."""
    name = cc.strip().lower()
    if name not in KNOWN_CC:
        raise UserError(f"--tcp-cc: choose from {', '.join(KNOWN_CC)}, got {cc!r}")
    if not 65536 <= wmem_max <= 1 << 30:
        raise UserError(f"--tcp-wmem-max: must be between 65536 and {1 << 30} bytes, got {wmem_max}")
    buffers = (
        {} if wmem_max == STOCK_LINUX.tcp_wmem_max else {"tcp_wmem_max": wmem_max, "tcp_rmem_max": wmem_max}
    )  # as `run --tcp-wmem-max`
    return STOCK_LINUX.model_copy(update={"cc": name, "slow_start_after_idle": not no_slow_start_after_idle, **buffers})


def _tcp_text(tcp: TcpSettings) -> str:
    return (
        f"{tcp.cc}, tcp_wmem max {format_bytes(tcp.tcp_wmem_max)}, tcp_rmem max {format_bytes(tcp.tcp_rmem_max)}, "
        f"slow start after idle {'on' if tcp.slow_start_after_idle else 'off'}, initial window {tcp.initcwnd}"
    )


def _with_buckets(
    schemes: list, text: str, rate_bps: float, rtt_s: float, shapes, machines: int, concurrent: bool = True
) -> list:
    """Schemes with ``--bucket-mb`` applied: a number, or auto from the link and each scheme's payload, by the rule a
    run resolves it with (:func:`netbench.orchestrator.run.resolve.auto_bucket_mb`; ``concurrent``: the buckets
    travel at once, one worker per node)."""

    auto, value = bucket_choice(text)
    if not auto and not (math.isfinite(value) and 0 <= value <= 4096):
        raise UserError(f"--bucket-mb: must be between 0 and 4096, got {text}")
    out = []
    for scheme in schemes:
        if auto:
            try:
                value = auto_bucket_mb(scheme.config, shapes, rate_bps, rtt_s, machines, concurrent=concurrent)
            except ValueError:
                value = 0.0  # the payload formula rejects these shapes: reported later as an input error
        out.append(dataclasses.replace(scheme, config=scheme.config.model_copy(update={"bucket_mb": value})))
    return out


def _graphs(
    kind: str,
    node_counts: list[int],
    up_bps: float,
    down_bps: float,
    delay_s: float,
    sites: int | None,
    racks: int | None,
    wan_bw: str | None,
    wan_delay: str | None,
    oversubscription: float | None,
) -> list[Topology]:
    """The network graph per node count (one for a file), or [] for the star; every problem is one line."""
    try:
        up = DirectionSpec(rate_bps=up_bps, delay_s=delay_s)
        down = DirectionSpec(rate_bps=down_bps)
    except pydantic.ValidationError as exc:
        if kind == "star" and not any(v is not None for v in (sites, racks, wan_bw, wan_delay, oversubscription)):
            return []
        raise UserError(
            one_line(exc, {"rate_bps": "--bw", "delay_s": "--delay"}) + " (on a --topology, links are emulated ones)"
        ) from None
    given = {"sites": sites, "racks": racks, "wan_bw": wan_bw, "wan_delay": wan_delay}
    try:
        if refuse_untaken(kind, **given, oversubscription=oversubscription) is PRESETS["star"]:
            return []  # every node alike: the model's closed form, at any node count
        built = [
            topology_from_options(kind, n, up, down, sites, racks, wan_bw, wan_delay, oversubscription)
            for n in (node_counts if kind in PRESETS else node_counts[:1])
        ]
    except TopologyError as exc:
        raise UserError(str(exc) if str(exc).startswith("--") else f"--topology: {exc}") from None
    return built


def _placed_graphs(
    graphs: list[Topology],
    rank_order: str,
    star_only: bool,  # sharded nodes or another algorithm than the ring: the star model only
) -> list[GraphModel]:
    """:func:`_graphs` with their ranks placed ([] for the star), checked before anything is computed or measured."""
    if not graphs:
        if rank_order != "topology":
            raise UserError(
                "--rank-order: places ranks on a --topology of sites or racks; the star's nodes are all alike"
            )
        return []
    if star_only:
        raise UserError(
            "--topology: a network graph is modelled with gloo's ring and one accelerator per node "
            "(leave out --gpus-per-node and --algorithm)"
        )
    try:
        order = parse_rank_order(rank_order)
        return [GraphModel(g, place(g, order)) for g in graphs]
    except PlacementError as exc:
        raise UserError(str(exc)) from None


# ----------------------------------------------------------------------------- output


def _console() -> Console:
    """Rich console; every line whole when stdout is not a terminal (pipes, logs)."""
    return make_console()


_rate_text = format_rate_digits  # derived answers are not round numbers


def _print_table(rows: list[dict], console: Console) -> None:
    table = Table(show_header=True, header_style="bold")
    for col in (
        "replicator",
        "nodes",
        "payload/step",
        "wire tx/step",
        "wire rx/step",
        "comm",
        "compression",
        "step",
        "comm %",
    ):
        table.add_column(col, justify="left" if col == "replicator" else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            r["replicator"] + ("" if r["compression_calibrated"] or not spec(r["replicator"]).encodes else "*"),
            str(r["machines"]) + (f" x{r['gpus_per_node']} = {r['nodes']} workers" if r["gpus_per_node"] > 1 else ""),
            format_bytes(r["payload_bytes_per_step"]),
            format_bytes(r["wire_bytes_per_step"]["tx"]),
            format_bytes(r["wire_bytes_per_step"]["rx"]),
            format_time(r["comm_time_s"]),
            format_time(r["compression_time_s"]),
            format_time(r["step_time_s"]),
            f"{100 * r['comm_fraction']:.1f}",
        )
    console.print(table)


def _print_derived(derived: dict, console: Console) -> None:
    console.print("[bold]bandwidth where communication = compute[/bold]")
    for d in derived["comm_equals_compute_bw"]:
        answer = _rate_text(d["bw_bps"]) if d["bw_bps"] else f"none: {d['reason']}"
        console.print(f"  {d['replicator']:>9} @ {d['nodes']} workers: {answer}")
    console.print("[bold]worker count where step time doubles (vs two nodes)[/bold]")
    for d in derived["doubling_nodes"]:
        answer = f"{d['nodes']}" if d["nodes"] else f"none: {d['reason']}"
        if d["baseline_nodes"] != 2:
            answer += f" (baseline {d['baseline_nodes']} workers: two nodes of accelerators)"
        console.print(f"  {d['replicator']:>9} @ {_rate_text(d['bw_bps'])}: {answer}")

    print_crossovers(derived, console, _rate_text)


# ----------------------------------------------------------------------------- plan


def _checkparse_schemes(schemes: list, shape_list: list[ParamShape], world: int) -> None:
    """A payload formula that rejects these shapes is an input error (one line, exit 2), before anything is priced."""
    for scheme in schemes:
        try:
            scheme.exchanges(shape_list, world)
        except SchemeUnavailable as exc:
            raise UserError(f"--replicator: {exc}") from None
        except SettingError as exc:  # a setting these shapes rule out (fragments that do not divide the layers)
            raise UserError(
                f"{REPLICATOR_OPTION_NAMES.get(exc.field, exc.field)}: {exc} [replicator {scheme.name}]"
            ) from None
        except ValueError as exc:
            raise UserError(f"--replicator {scheme.name}: {exc}") from None


@expand(
    rep_settings=group(REPLICATOR, *(f for f in PLAN_SETTING_FIELDS if f != "bucket_mb"))  # --bucket-mb: its own
)
def plan(
    shapes: str | None = WORKLOAD["shapes"].option("plan"),
    params: str | None = typer.Option(
        None, "--params", help="parameter count instead of --shapes, e.g. 1.5e9 (synthetic square matrices)"
    ),
    nodes: str | None = option(NETWORK["nodes"], "plan", note=PLANNED_NODES, optional=True),
    bw: str = option(NETWORK["bw"], "plan"),
    up: str | None = option(NETWORK["up"], "plan"),
    down: str | None = option(NETWORK["down"], "plan"),
    delay: str = option(NETWORK["delay"], "plan"),
    replicator: str = REPLICATOR["name"].option("plan"),
    rep_settings: Settings = FROM_FIELDS,
    compute_ms: float = WORKLOAD["compute_ms"].option("plan"),
    gpus_per_node: int = RUN["gpus_per_node"].option(),
    intra_bw: str | None = RUN["intra_bw_bps"].option(
        note="; needed with gloo and --gpus-per-node > 1. With --backend nccl each GPU gets 1/G of it (800gbit over 8 "
        "GPUs: 12.5 GB/s a GPU); leave it out for the accelerator's own NVLink or PCIe per GPU"
    ),
    algorithm: str = option(ALGORITHM, "plan"),
    mtu: int = option(FRAMING_SETTINGS["mtu"], "plan"),
    acks_per_segment: float | None = option(FRAMING_SETTINGS["acks_per_segment"], "plan"),
    calibration: Path | None = option(CALIBRATION, "plan"),
    tcp_cc: str = option(TCP["tcp_cc"], "plan"),
    tcp_wmem_max: int = option(TCP["tcp_wmem_max"], "plan"),
    no_slow_start_after_idle: bool = option(TCP["no_slow_start_after_idle"], "plan"),
    bucket_mb: str = REPLICATOR["bucket_mb"].option(),
    topology: str | None = option(TOPOLOGY["topology"], "plan"),
    sites: int | None = option(TOPOLOGY["sites"], "plan"),
    racks: int | None = option(TOPOLOGY["racks"], "plan"),
    wan_bw: str | None = option(TOPOLOGY["wan_bw"], "plan"),
    wan_delay: str | None = option(TOPOLOGY["wan_delay"], "plan"),
    oversubscription: float | None = option(TOPOLOGY["oversubscription"], "plan"),
    rank_order: str = option(TOPOLOGY["rank_order"], "plan"),
    backend: str = option(BACKEND_SETTINGS["backend"], "plan"),
    accelerator_name: str | None = option(COMPUTE_SETTINGS["accelerator_name"], "plan"),
    mfu: float = option(COMPUTE_SETTINGS["mfu"], "plan"),
    batch: int | None = option(COMPUTE_SETTINGS["batch"], "plan"),
    seq_len: int = option(COMPUTE_SETTINGS["seq_len"], "plan"),
    tokens_per_step: str | None = option(COMPUTE_SETTINGS["tokens_per_step"], "plan"),
    layers: int | None = option(COMPUTE_SETTINGS["layers"], "plan"),
    target_utilization: str | None = option(UTILIZATION_SETTINGS["target_utilization"], "plan"),
    tokens: str | None = option(UTILIZATION_SETTINGS["tokens"], "plan"),
    figure: Path | None = option(UTILIZATION_SETTINGS["figure"], "plan"),
    transport: str = option(BACKEND_SETTINGS["transport"], "plan"),
    channels: int | None = option(BACKEND_SETTINGS["channels"], "plan"),
    socket_threads: int = option(BACKEND_SETTINGS["socket_threads"], "plan"),
    socks_per_thread: int = option(BACKEND_SETTINGS["socks_per_thread"], "plan"),
    nccl_calibration: Path | None = option(BACKEND_SETTINGS["nccl_calibration"], "plan"),
    json_out: bool = option(JSON, "plan"),
) -> None:
    """Predict payload, wire bytes, communication and step time per replicator and node count (or network graph)."""

    gpu = parse_gpu_options(
        backend,
        accelerator_name,
        mfu,
        batch,
        seq_len,
        tokens_per_step,
        layers,
        target_utilization,
        tokens,
        figure,
        transport,
        channels,
        socket_threads,
        socks_per_thread,
        nccl_calibration,
    )
    shape_list, shapes_label = _shapes(shapes, params, gpu.layers)
    topology = topology or DEFAULT_PRESET
    node_counts = _nodes(nodes or "2")  # machines; each runs gpus_per_node workers
    if nodes is not None and topology not in PRESETS:
        raise UserError(f"--nodes: a topology file sets the node count ({topology!r}); leave --nodes out")
    base = _rate("--bw", bw)
    up_bps = _rate("--up", up) if up else base
    down_bps = _rate("--down", down) if down else base
    delay_s = _delay(delay)
    if not (math.isfinite(compute_ms) and 0 <= compute_ms <= 1e7):
        raise UserError(f"--compute-ms: must be between 0 and 1e7, got {compute_ms:g}")
    if gpus_per_node < 1 or gpus_per_node > MAX_PLANNED_NODES // 2:
        raise UserError(f"--gpus-per-node: must be between 1 and {MAX_PLANNED_NODES // 2}, got {gpus_per_node}")
    intra_node_bps = _rate("--intra-bw", intra_bw) if intra_bw else None
    if gpus_per_node > 1 and intra_node_bps is None and gpu.backend == "gloo":
        raise UserError("--intra-bw: needed with --gpus-per-node > 1 (the node's fast intra-node link, e.g. 800gbit)")
    intra_bps = intra_node_bps / gpus_per_node if intra_node_bps else None  # one worker's share, as a run's model
    too_many = [n for n in node_counts if n * gpus_per_node > MAX_PLANNED_NODES]
    if too_many:
        n = too_many[0]
        raise UserError(
            f"--gpus-per-node: {n} nodes x {gpus_per_node} = {n * gpus_per_node} workers; "
            f"the model plans at most {MAX_PLANNED_NODES}"
        )
    algo = algorithm.strip().lower().replace("-", "_")
    if algo not in ALGORITHMS:
        raise UserError(f"--algorithm: choose from ring, tree, halving-doubling, got {algorithm!r}")
    graphs = _graphs(
        topology, node_counts, up_bps, down_bps, delay_s, sites, racks, wan_bw, wan_delay, oversubscription
    )
    models = _placed_graphs(graphs, rank_order, gpus_per_node > 1 or algo != "ring")
    if gpu.asked and models:
        raise UserError(
            "--topology: the GPU backends and the utilisation answers plan a flat cluster (leave out --topology, or "
            "--backend, --accelerator, --target-utilization, --tokens and --figure)"
        )
    tcp = _tcp(tcp_cc, tcp_wmem_max, no_slow_start_after_idle)
    settings = scheme_settings(**rep_settings)
    link = (
        models[0].ring_link() if models else (min(up_bps, down_bps), 2 * delay_s)
    )  # a graph's ring bottleneck, else the star's link
    schemes = _with_buckets(
        parse_schemes(replicator, settings),
        bucket_mb,
        *link,
        shape_list,
        models[0].topology.node_count if models else node_counts[0],
        concurrent=gpus_per_node == 1,
    )
    _checkparse_schemes(schemes, shape_list, max(2, models[0].topology.node_count if models else node_counts[0]))
    if gpu.backend != "gloo":
        cluster = GpuCluster(node_counts, up_bps, down_bps, delay_s, gpus_per_node, intra_bps, tcp, bw != "100mbit")
        doc, lines = plan_gpu_cluster(gpu, shape_list, shapes_label, schemes, cluster, compute_ms, calibration)
        if json_out:
            print(json.dumps(doc, indent=2))
            return
        _print_gpu_plan(doc, lines, gpu)
        return
    # the "measuring" line goes to stderr, so --json's stdout stays clean; non-default settings get their own
    # encode/decode cost
    calib, calib_path = _calibration(calibration, replicators=[s.config for s in schemes])
    try:
        framing = calib.framing(mtu=mtu, **({} if acks_per_segment is None else {"acks_per_segment": acks_per_segment}))
    except pydantic.ValidationError as exc:
        raise UserError(
            one_line(exc, {"mtu": "--mtu", "acks_per_segment": "--acks-per-segment"}, options=True)
        ) from None
    compute_how, compute_s = "", {n: compute_ms / 1e3 for n in node_counts}
    if gpu.asked:
        shape_model = model_shape(shape_list, gpu.layers)
        for n in node_counts:
            compute_s[n], compute_how = compute_seconds(gpu, shape_model, n * gpus_per_node, compute_ms)
    scenarios = [
        Scenario(
            nodes=n * gpus_per_node,
            up_bps=up_bps,
            down_bps=down_bps,
            delay_s=delay_s,
            compute_s=compute_s[n],
            gpus_per_node=gpus_per_node,
            intra_bps=intra_bps,
            algorithm=algo,
            framing=framing,
            tcp=tcp,
        )
        for n in node_counts
    ]
    planner = Planner(shape_list, calib)
    if models:
        doc = plan_on_graphs(models, schemes, shape_list, scenarios[0], calib)
        header = (
            f"{shapes_label}: {total_params(shape_list):,} params; topology {topology}, rank order {rank_order}, "
            f"compute {compute_ms:g}ms; TCP assumed: {_tcp_text(tcp)}"
        )
        doc = {
            "shapes": shapes_label,
            "params": total_params(shape_list),
            "topology": topology,
            "rank_order": rank_order,
            "graphs": [m.topology.model_dump() for m in models],
            "tcp": tcp.model_dump(),
            **doc,
        }
        print_plan(doc, header, _console(), json_out)
        return
    rows = [estimate_row(planner.step(s, sc), calib) for s in schemes for sc in scenarios]
    derived = planner.derived(schemes, scenarios)
    extra: dict = {}
    if gpu.asked:
        extra = {"compute": {"how": compute_how}} | answers(planner, schemes, scenarios, gpu, rows)
        if gpu.figure is not None:
            write_figure(gpu.figure, extra.pop("curves"), figure_title(shapes_label, scenarios[0], "gloo"))
            extra["figure"] = str(gpu.figure)
    if json_out:
        doc = {
            "shapes": shapes_label,
            "params": total_params(shape_list),
            "calibration": {
                "source": calib.source,
                "path": str(calib_path),
                "created": calib.created,
                "host": calib.host,
                "digest": calib.digest(),
                "measured": [cost_key(s.config) for s in schemes if calib.measured(cost_key(s.config))],
            },
            "tcp": tcp.model_dump(),
            "framing": framing.model_dump()
            | {"mss": framing.mss, "frame_bytes": framing.frame_bytes, "efficiency": framing.efficiency()},
            "rows": rows,
            "derived": derived,
            **extra,
        }
        print(json.dumps(doc, indent=2))
        return
    console = _console()
    link = format_rate(up_bps) if up_bps == down_bps else f"up {format_rate(up_bps)} / down {format_rate(down_bps)}"
    console.print(
        f"[bold]{shapes_label}[/bold]: {total_params(shape_list):,} params; link {link}, delay {format_time(delay_s)}, "
        f"MTU {mtu} ({framing.mss}/{framing.frame_bytes} B per frame), {algo}, "
        + (f"compute {compute_ms:g}ms" if not compute_how or compute_ms > 0 else "compute from the FLOPs (below)")
    )
    console.print(
        f"TCP assumed: {_tcp_text(tcp)}"
        + (" (stock Linux; set --tcp-cc/--tcp-wmem-max/--no-slow-start-after-idle)" if tcp == STOCK_LINUX else "")
    )
    for line in _constants_lines(calib, calib_path, [s.config for s in schemes]):
        console.print(line, highlight=False, markup=False)  # cost keys hold brackets: name[topk=8]
    _print_table(rows, console)
    encoding = {s.name for s in schemes if spec(s.name).encodes_with(s.config)}
    if any(not r["compression_calibrated"] and r["replicator"] in encoding for r in rows):
        console.print("* compression cost not calibrated for this replicator (taken as 0)")
    _print_derived(derived, console)
    if gpu.asked:
        print_utilization({"rows": rows, **extra}, console, gpu)


def _print_gpu_plan(doc: dict, lines: list[str], gpu: Any) -> None:
    """``plan --backend nccl|ideal`` as tables: header, the GPU table, the derived and the utilisation answers."""

    console = _console()
    for i, line in enumerate(lines):
        console.print(f"[bold]{line}[/bold]" if i == 0 else line, highlight=False, markup=i == 0)
    print_gpu_table(doc, console)
    print_gpu_derived(doc["derived"], console)
    print_utilization(doc, console, gpu)
    if doc.get("figure"):
        console.print(f"figure: {doc['figure']}", highlight=False)


# ----------------------------------------------------------------------------- calibrate
