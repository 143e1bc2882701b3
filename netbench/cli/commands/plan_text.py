"""``netbench plan``'s output for people: the tables, the derived answers, the utilisation answers and the figure.

Everything printed is read from the plan's document (:func:`netbench.planning.plan`), the same one ``--json``
prints; the figure draws its curves.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from netbench.cli.errors import UserError
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import spec
from netbench.model.calibration import Calibration, cost_key, scheme_of
from netbench.model.nccl import NCCL_RELEASE
from netbench.model.planner import BW_RANGE_BPS
from netbench.planning import PlanRequest, PlanResult
from netbench.planning.request import GpuPlanOptions
from netbench.reports.terminal import make_console
from netbench.safe_files import UnsafeOutput, write_bytes
from netbench.tcp import STOCK_LINUX, TcpSettings
from netbench.units import format_bytes, format_rate, format_rate_digits, format_time


def figure_bytes(curves: dict[str, list[tuple[float, float]]], title: str, suffix: str) -> bytes:
    """Utilisation against bandwidth, one line per replicator (the replicators' own colours)."""
    from netbench.reports.drawing import plt  # late: keeps matplotlib off this module's import

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for name, points in curves.items():
        xs = [bw / 1e9 for bw, _ in points]
        ys = [100 * u for _, u in points]
        ax.plot(xs, ys, label=name, color=spec(name).color or None, linewidth=1.8)
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth per node (Gbit/s)")
    ax.set_ylabel("compute utilization (%)")
    ax.set_ylim(0, 101)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix.lstrip("."))
    plt.close(fig)
    return buf.getvalue()


def write_figure(path: Path, curves: dict, title: str) -> None:
    try:
        write_bytes(path, figure_bytes(curves, title, path.suffix.lower()))
    except (OSError, UnsafeOutput) as exc:
        raise UserError(f"--figure: cannot write {str(path)!r}: {exc}") from None


_rate4 = format_rate_digits


def _duration(seconds: float) -> str:
    """Seconds to the largest unit that reads well (days for a training run, minutes for a slow step)."""
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * scale:
            return f"{seconds / scale:,.1f} {unit}"
    return format_time(seconds)


def _rate_Bps(n: float) -> str:
    """Bytes per second as the collectives' bus bandwidths are quoted (GB/s, MB/s below one GB/s)."""
    return f"{n / 1e9:.3g} GB/s" if n >= 1e9 else f"{n / 1e6:.3g} MB/s"


def _total_bytes(n: float) -> str:
    """A run's bytes in decimal units up to petabytes."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} B"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def print_gpu_table(doc: dict, console: Console) -> None:
    """One row per replicator and cluster: payload, communication alone, codec, compute, step, utilisation."""
    table = Table(show_header=True, header_style="bold")
    for col in (
        "replicator",
        "workers",
        "payload/step",
        "comm alone",
        "codec",
        "compute",
        "step",
        "util %",
        "bottleneck",
        "memory/GPU",
    ):
        table.add_column(col, justify="left" if col in ("replicator", "bottleneck") else "right", no_wrap=True)
    for r in doc["rows"]:
        codec = format_time(r["compression_time_s"])
        if r.get("codec_source", "").startswith("estimate"):
            codec += "~"
        table.add_row(
            r["replicator"],
            f"{r['machines']} x{r['gpus_per_node']}" if r["gpus_per_node"] > 1 else str(r["nodes"]),
            format_bytes(r["payload_bytes_per_step"]),
            _duration(r["comm_time_s"]),
            codec,
            _duration(r["compute_time_s"]),
            _duration(r["step_time_s"]),
            _pct(r.get("compute_utilization")),
            r.get("bottleneck", ""),
            memory_cell(r),
        )
    console.print(table)
    if any(r.get("codec_source", "").startswith("estimate") for r in doc["rows"]):
        console.print("~ codec time estimated from the replicator's declared memory traffic (no measured profile)")
    print_memory_note(doc, console)


def _gb(n: float) -> str:
    """Device memory in decimal GB, as accelerator datasheets state it."""
    return f"{n / 1e9:.3g} GB"


def memory_cell(row: dict) -> str:
    """A row's memory per accelerator, ``!`` where it does not fit."""
    memory = row.get("memory")
    if memory is None:
        return "-"
    return _gb(memory["bytes"]) + ("" if memory["fits"] else " !")


def print_memory_note(doc: dict, console: Console) -> None:
    """What the memory column counts, and which rows do not fit."""
    rows = [r for r in doc["rows"] if "memory" in r]
    if not rows:
        return
    capacity = _gb(rows[0]["memory"]["accelerator_bytes"])
    over = [f"{r['replicator']} @ {r['nodes']}" for r in rows if not r["memory"]["fits"]]
    if not over:
        verdict = f"every row fits the accelerator's {capacity}"
    elif len(over) == len(rows):
        verdict = f"! no row fits the accelerator's {capacity} (shard the model and its state: FSDP, ZeRO)"
    else:
        verdict = f"! over the accelerator's {capacity}: {', '.join(over)}"
    console.print(
        "memory/GPU: fp32 weights and gradients, optimizer and replicator state, collective buffers; activations "
        f"not counted (a floor); {verdict}",
        highlight=False,
    )


def print_gpu_derived(derived: dict, console: Console) -> None:
    """The derived answers of a GPU plan, rows sharing a reason grouped under it (a cluster's transport caps every
    replicator alike)."""
    console.print("[bold]bandwidth per node where communication = compute[/bold]")
    floors: dict[str, list[str]] = {}
    for d in derived["comm_equals_compute_bw"]:
        where = f"{d['replicator']} @ {d['nodes']}"
        if d["bw_bps"]:
            console.print(f"  {where:>20} workers: {_rate4(d['bw_bps'])}", highlight=False)
        elif "floor_cause" in d:
            floors.setdefault(d["floor_cause"], []).append(f"{where} ({format_time(d['comm_floor_s'])})")
        else:
            console.print(f"  {where:>20} workers: none: {d['reason']}", highlight=False)
    for cause, rows in floors.items():
        console.print(
            f"  none at any NIC rate: {cause}; communication alone stays at {', '.join(rows)}", highlight=False
        )
    doubling = derived["doubling_nodes"]
    if doubling:
        console.print(
            f"[bold]workers where step time doubles against two nodes ({doubling[0]['baseline_nodes']} workers), "
            "each step's compute held[/bold]"
        )
    for d in doubling:
        answer = str(d["nodes"]) if d["nodes"] else f"none: {d['reason']}"
        console.print(f"  {d['replicator']:>12} @ {_rate4(d['bw_bps'])}: {answer}", highlight=False)
    print_crossovers(derived, console, _rate4)


def print_crossovers(derived: dict, console: Console, rate: Callable[[float], str]) -> None:
    """The bandwidths where two replicators take equal step time, and how many pairs have none."""
    crossings = [d for d in derived["crossover_bw"] if d["crossovers"]]
    if derived["crossover_bw"]:
        console.print("[bold]crossover bandwidths (equal step time)[/bold]")
    for d in crossings:
        a, b = d["pair"]
        text = "; ".join(
            f"{rate(c['bw_bps'])} ({c['faster_below']} faster below, {c['faster_above']} above)"
            for c in d["crossovers"]
        )
        console.print(f"  {a} vs {b} @ {d['nodes']} workers: {text}", highlight=False)
    if len(crossings) < len(derived["crossover_bw"]):
        lo, hi = BW_RANGE_BPS
        console.print(
            f"  {len(derived['crossover_bw']) - len(crossings)} pair(s) without a crossover from {rate(lo)} to "
            f"{rate(hi)} (--json says which is faster)",
            highlight=False,
        )


def print_utilization(doc: dict, console: Console, opts: GpuPlanOptions) -> None:
    """Utilisation per row (when the table did not show it), the bandwidth per target and the token budget."""
    if not any("codec_source" in r for r in doc["rows"]):
        if doc.get("compute", {}).get("how"):
            console.print(f"compute: {doc['compute']['how']}", highlight=False)
        console.print("[bold]compute utilization[/bold]")
        for r in doc["rows"]:
            memory = f", memory/GPU {memory_cell(r)}" if "memory" in r else ""
            console.print(
                f"  {r['replicator']:>12} @ {r['nodes']:>6}: {_pct(r.get('compute_utilization'))} % "
                f"({r.get('bottleneck', '')}{memory})",
                highlight=False,
            )
        print_memory_note(doc, console)
    targets = doc.get("bandwidth_for_utilization")
    if targets:
        console.print("[bold]bandwidth per node for a compute utilization of[/bold]")
        by_key: dict[tuple[str, int], dict[float, str]] = {}
        for t in targets:
            text = _rate4(t["bw_bps"]) if t["bw_bps"] else "none"
            by_key.setdefault((t["replicator"], t["nodes"]), {})[t["target"]] = text
        header = "  ".join(f"{100 * t:>9g}%" for t in opts.targets)
        console.print(f"  {'':>22}{header}", highlight=False)
        for (name, nodes), cells in by_key.items():
            line = "  ".join(f"{cells.get(t, '-'):>10}" for t in opts.targets)
            console.print(f"  {name:>12} @ {nodes:>6}: {line}", highlight=False)
        ceilings = {
            f"{t['replicator']} @ {t['nodes']} {100 * t['max_utilization']:.1f} %": None
            for t in targets
            if "max_utilization" in t
        }
        if ceilings:
            console.print(f"  none: out of reach at any bandwidth; utilisation tops out at {', '.join(ceilings)}")
        for reason in dict.fromkeys(t["reason"] for t in targets if t["bw_bps"] is None and "max_utilization" not in t):
            console.print(f"  none: {reason}", highlight=False)
    budgets = [r for r in doc["rows"] if "token_budget" in r]
    if budgets:
        console.print(f"[bold]training {budgets[0]['token_budget']['tokens']:.3g} tokens[/bold]")
        for r in budgets:
            b = r["token_budget"]
            churn = r.get("churn", {})
            under = _budget_under_churn(churn)
            steps = f"{b['steps']:,} steps" + (f" ({b['dense_steps']:,} dense)" if b.get("dense_steps") else "")
            console.print(
                f"  {r['replicator']:>12} @ {r['nodes']:>6}: {steps}, wall {_duration(b['wall_s'])} "
                f"(compute {_duration(b['compute_s'])}), {_total_bytes(b['bytes_per_node'])} sent per worker{under}",
                highlight=False,
            )


def _budget_under_churn(churn: dict) -> str:
    """The token budget's wall time under churn, out of reach without a checkpoint, or nothing trains; "" without
    churn."""
    restarts_every = churn.get("token_budget_restart_every_s")
    if restarts_every is not None:
        return (
            "; under churn out of reach without a checkpoint: every node is away at once about every "
            f"{_duration(restarts_every)}, and the training starts afresh"
        )
    churned = churn.get("token_budget_wall_s")
    if churned is not None:
        return f"; under churn wall {_duration(churned)}"
    return "; under churn nothing trains" if "token_budget_wall_s" in churn else ""


def header_lines(doc: dict, opts: GpuPlanOptions) -> list[str]:
    backend = doc["backend"]
    lines = [f"compute: {doc['compute']['how']}"]
    if backend["name"] == "nccl":
        net, link = backend["net"], doc.get("links", {})
        nics = f", {net['nics']} NICs a node" if net.get("nics", 1) > 1 else ""
        how = f"NCCL {NCCL_RELEASE}'s tuning model, {net['transport']} transport{nics}, {net['channels']} channels" + (
            f" x {max(1, net['threads'] * net['socks_per_thread'])} socket(s) (a TCP window of "
            f"{link.get('tcp_window_bytes', 0) / 1e6:.3g} MB, at most {net['stream_Bps'] / 1e9:.3g} GB/s a socket)"
            if net["transport"] == "socket" and not backend.get("nccl_calibration")
            else ""
        )
        if backend.get("nccl_calibration"):
            if backend.get("fitted_at_nccls_picks"):
                how = (
                    f"{how}, at the efficiencies and latencies fitted to {backend['nccl_calibration']} "
                    f"({', '.join(backend['fitted_at_nccls_picks'])}, NCCL picking again at each node count)"
                )
            else:
                how = f"fitted from {backend['nccl_calibration']} (what the fit lacks: {how})"
            for kind in backend.get("fit_regimes", {}):
                how += f" (its {kind} holds two regimes, each size priced by its own: calibrate's output says which)"
        lines.append(f"collectives: {how}")
        if link:
            lines.append(f"intra-node: {_rate_Bps(link['intra_node_Bps_per_gpu'])} a GPU ({link['intra_node_source']})")
        if "net_bus_Bps" in link:
            lines.append(
                f"across nodes: {_rate_Bps(link['net_bus_Bps'])} of bus bandwidth, set by {link['net_bus_limit']}"
            )
    elif backend["name"] == "ideal":
        lines.append("collectives: the link alone (bus bytes over the bandwidth, no latency)")
    layout = doc.get("layout")
    if layout and (layout["tp"] > 1 or layout["pp"] > 1 or layout["shard"] != "none"):
        lines.append(layout_line(layout))
    return lines


def layout_line(layout: dict) -> str:
    """The parallel layout in one line."""
    parts = [f"tensor parallel {layout['tp']} inside a node"] if layout["tp"] > 1 else []
    if layout["pp"] > 1:
        chunks = f", {layout['virtual_stages']} chunks a GPU" if layout["virtual_stages"] > 1 else ""
        parts.append(f"{layout['pp']} pipeline stages (1F1B, {layout['microbatches']} micro-batches{chunks})")
    if layout.get("sites"):
        parts.append(
            f"hsdp: zero3 within each of {layout['sites']} sites, the replicator between them over WAN links of "
            f"{_rate4(layout['wan_bps'])}, {format_time(layout['wan_delay_s'])} one-way"
        )
    elif layout["shard"] == "hsdp":
        parts.append(f"hsdp: zero3 within {layout['shard_nodes']} node(s), the replicator between the groups")
    elif layout["shard"] != "none":
        parts.append(f"{layout['shard']} over the data-parallel GPUs")
    return "layout: " + "; ".join(parts)


def print_layout_parts(doc: dict, console: Console) -> None:
    """Where a layout's step goes, per row: compute, the pipeline's bubble, tensor-parallel and pipeline transfers,
    the sharding and the replicator's exposed time."""
    rows = [r for r in doc["rows"] if "parallel" in r]
    if rows:
        console.print("[bold]step per GPU: where it goes[/bold]")
    for r in rows:
        p = r["parallel"]
        console.print(
            f"  {r['replicator']:>12} @ {r['nodes']:>6}: compute {_duration(p['compute_s'])}, bubble "
            f"{_duration(p['bubble_s'])} ({p['bubble_fraction']:.1%}), tensor parallel "
            f"{_duration(p['tensor_parallel_s'])}, pipeline transfers {_duration(p['pipeline_transfer_s'])}, "
            f"sharding {_duration(p['shard_exposed_s'])} "
            f"exposed, replicator {_duration(p['replicator_exposed_s'])} exposed; data parallel {p['data_parallel']} "
            f"(shard group {p['shard_group']}, {p['replicas']} replica(s))",
            highlight=False,
        )


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


def _tcp_text(tcp: TcpSettings) -> str:
    return (
        f"{tcp.cc}, tcp_wmem max {format_bytes(tcp.tcp_wmem_max)}, tcp_rmem max {format_bytes(tcp.tcp_rmem_max)}, "
        f"slow start after idle {'on' if tcp.slow_start_after_idle else 'off'}, initial window {tcp.initcwnd}"
    )


def _console() -> Console:
    """Rich console; every line whole when stdout is not a terminal (pipes, logs)."""
    return make_console()


_rate_text = format_rate_digits  # derived answers are not round numbers


def _goodput_cell(row: dict) -> str:
    """Committed steps per second under churn and their share of the plain step rate; '-' where not priced."""
    churn = row.get("churn")
    if not churn or "steps_per_s" not in churn:
        return "-"
    return f"{churn['steps_per_s']:.3g}/s ({100 * churn['ratio']:.0f} %)"


def _run_cells(row: dict, seeded: bool) -> tuple[str, ...]:
    """One run of ``--for``'s length: its mean goodput and 10th-90th percentiles over the draws, and with ``--seed``
    that seed's; '-' where not priced."""
    run = row.get("churn", {}).get("run")
    if run is None:
        return ("-", "-") if seeded else ("-",)
    spread = f"{run['steps_per_s']:.3g}/s ({run['p10']:.3g}-{run['p90']:.3g})"
    return (spread, f"{run['seed_steps_per_s']:.3g}/s") if seeded else (spread,)


def _print_table(rows: list[dict], console: Console) -> None:
    table = Table(show_header=True, header_style="bold")
    churn = any("churn" in r for r in rows)
    runs = [r["churn"]["run"] for r in rows if "run" in r.get("churn", {})]
    seeded = any("seed" in run for run in runs)
    length = f"run of {format_time(runs[0]['for_s'])}" if runs else ""
    if runs and "steps" in runs[0]:
        length += f", {runs[0]['steps']} steps"
    run_columns = (length, *((f"seed {runs[0]['seed']}",) if seeded else ())) if runs else ()
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
        *(("goodput",) if churn else ()),
        *run_columns,
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
            *((_goodput_cell(r),) if churn else ()),
            *(_run_cells(r, seeded) if runs else ()),
        )
    console.print(table)


def print_churn(doc: dict, console: Console) -> None:
    """What the goodput column assumes, each replicator's heal, and why a row has none."""
    churn = doc.get("churn")
    if churn is None:
        return
    console.print(
        f"[bold]goodput under churn[/bold]: committed steps per second while each node leaves every "
        f"{format_time(churn['mtbf_s'])} on average and stays away {format_time(churn['away_s'])} (a leave fails "
        f"the window in flight and the next quorum waits {format_time(churn['quorum_wait_s'])}; a node back is "
        f"healed at the next quorum; every new quorum configures its process group before it trains; a node that "
        f"leaves while it asks for a quorum costs the exchange timeout; fewer than "
        f"{churn['min_members']} nodes train nothing)",
        highlight=False,
    )
    if "for_s" in churn:
        seed = f"; seed {churn['seed']}: the draw run --churn ...,seed={churn['seed']} makes" if "seed" in churn else ""
        length = f"run of {format_time(churn['for_s'])}"
        steps = ""
        if "steps" in churn:
            length += f", {churn['steps']} steps"
            steps = f", then every node present until {churn['steps']} steps commit"
        console.print(
            f"[bold]{length}[/bold]: one run whose churn lasts that long, every node present at its start{steps}, "
            f"its goodput's mean and 10th-90th percentiles over seeded draws of that length{seed}",
            highlight=False,
        )
    heals: dict[str, str] = {}
    for r in doc["rows"]:
        c = r.get("churn", {})
        if "heal_bytes" in c:
            restarts = c.get("restarts_per_s") or 0.0
            lost = (
                f"; every node holding the training gone, it starts afresh every {format_time(1 / restarts)}"
                if restarts > 0
                else ""
            )
            heals.setdefault(
                r["replicator"],
                f"{format_bytes(c['heal_bytes'])} in {format_time(c['heal_s'])}, a new quorum configured in "
                f"{format_time(c['reform_s'])}{lost}",
            )
        elif "reason" in c:
            heals.setdefault(r["replicator"], f"-: {c['reason']}")
    for name, text in heals.items():
        console.print(f"  {name:>12}: heal {text}" if not text.startswith("-") else f"  {name:>12}{text[1:]}",
                      highlight=False)  # fmt: skip


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


def _print_gpu_plan(result: PlanResult, request: PlanRequest) -> None:
    """``plan --backend nccl|ideal`` as tables: header, the GPU table, the derived and the utilisation answers."""
    doc, gpu = result.doc, request.gpu()
    first = doc["rows"][0]
    up, down = first["up_bps"], first["down_bps"]
    link = _rate4(up) if up == down else f"up {_rate4(up)} / down {_rate4(down)}"
    acc = f"{gpu.accelerator.label}" if gpu.accelerator else "no accelerator profile"
    tuned = doc["backend"].get("fitted_at_nccls_picks")
    nic_note = ""
    if result.nic_from_fit:
        nic_note = " (the logs' NICs" if tuned else " (the fit's best bus bandwidth"
        nic_note += "; --bw to plan another)"
    nics = doc["backend"].get("net", {}).get("nics", 1)
    link = f"{nics} x {link}" if nics > 1 else link
    lines = [
        f"{doc['shapes']}: {doc['params']:,} params in {doc['compute']['layers']} layers; {acc}, "
        f"{request.gpus_per_node} per node; NIC {link}{nic_note}, one-way delay {format_time(first['delay_s'])}",
        *header_lines(doc, gpu),
    ]
    console = _console()
    for i, line in enumerate(lines):
        console.print(f"[bold]{line}[/bold]" if i == 0 else line, highlight=False, markup=i == 0)
    print_gpu_table(doc, console)
    print_layout_parts(doc, console)
    print_gpu_derived(doc["derived"], console)
    print_utilization(doc, console, gpu)
    if doc.get("figure"):
        console.print(f"figure: {doc['figure']}", highlight=False)


def print_graph_plan(doc: dict[str, Any], header: str, console: Console) -> None:
    """``plan --topology``: the rows with what sets each step, the WAN answers, sharded within sites or not."""
    console.print(header, highlight=False)
    table = Table(show_header=True, header_style="bold")
    for col in ("replicator", "nodes", "layout", "wire tx/step", "comm", "compression", "step", "what sets the step"):
        table.add_column(col, justify="left" if col in ("replicator", "layout", "what sets the step") else "right")
    for r in doc["rows"]:
        table.add_row(
            r["replicator"],
            str(r["nodes"]),
            "sharded in sites" if r["layout"] == "sites" else "flat ring",
            format_bytes(r["wire_bytes_per_step"]["tx"]),
            format_time(r["comm_time_s"]),
            format_time(r["compression_time_s"]),
            format_time(r["step_time_s"]),
            r["bottleneck"]["text"],
        )
    console.print(table)
    console.print(
        "[bold]WAN rate where communication = compute[/bold] (slowest WAN direction, all WAN links scaled together)"
    )
    for d in doc["derived"]["wan_comm_equals_compute_bw"]:
        answer = _rate_text(d["wan_bps"]) if d["wan_bps"] else f"none: {d['reason']}"
        console.print(f"  {d['replicator']:>9} @ {d['nodes']} nodes: {answer}", highlight=False)
    if doc["derived"]["sites_vs_flat"]:
        console.print("[bold]replicating between sites (sharded within sites) vs one flat ring[/bold]")
    for d in doc["derived"]["sites_vs_flat"]:
        ratio = d["flat_step_s"] / d["sites_step_s"] if d["sites_step_s"] > 0 else math.inf
        verdict = f"sharded {ratio:.2f}x faster" if d["sites_faster"] else f"flat ring {1 / ratio:.2f}x faster"
        console.print(
            f"  {d['replicator']:>9} @ {d['nodes']} nodes: {format_time(d['sites_step_s'])} vs "
            f"{format_time(d['flat_step_s'])}: {verdict}",
            highlight=False,
        )


def print_plan(result: PlanResult, request: PlanRequest, calibration_path: Path | None) -> None:
    """The plan as tables and answers, for people."""
    if request.backend != "gloo":
        _print_gpu_plan(result, request)
        return
    doc, inputs, tcp = result.doc, result.inputs, request.tcp
    if inputs.graphs:
        header = (
            f"{inputs.shapes_label}: {doc['params']:,} params; topology {inputs.topology}, rank order "
            f"{request.rank_order}, compute {request.compute_ms:g}ms; TCP assumed: {_tcp_text(tcp)}"
        )
        print_graph_plan(doc, header, _console())
        return
    _print_gloo_plan(result, request, calibration_path)


def _print_gloo_plan(result: PlanResult, request: PlanRequest, calibration_path: Path | None) -> None:
    doc, calib, framing, tcp = result.doc, result.calibration, result.framing, request.tcp
    rows, configs, gpu = doc["rows"], [s.config for s in result.inputs.schemes], request.gpu()
    compute_how = doc.get("compute", {}).get("how", "")
    console = _console()
    up, down = request.up_bps, request.down_bps
    link = format_rate(up) if up == down else f"up {format_rate(up)} / down {format_rate(down)}"
    console.print(
        f"[bold]{doc['shapes']}[/bold]: {doc['params']:,} params; link {link}, delay {format_time(request.delay)}, "
        f"MTU {request.mtu} ({framing.mss}/{framing.frame_bytes} B per frame), {request.algorithm}, "
        + (
            f"compute {request.compute_ms:g}ms"
            if not compute_how or request.compute_ms > 0
            else "compute from the FLOPs (below)"
        )
    )
    console.print(
        f"TCP assumed: {_tcp_text(tcp)}"
        + (" (stock Linux; set --tcp-cc/--tcp-wmem-max/--no-slow-start-after-idle)" if tcp == STOCK_LINUX else "")
    )
    for line in _constants_lines(calib, calibration_path, configs):
        console.print(line, highlight=False, markup=False)  # cost keys hold brackets: name[topk=8]
    _print_table(rows, console)
    encoding = {c.name for c in configs if spec(c.name).encodes_with(c)}
    if any(not r["compression_calibrated"] and r["replicator"] in encoding for r in rows):
        console.print("* compression cost not calibrated for this replicator (taken as 0)")
    print_churn(doc, console)
    _print_derived(doc["derived"], console)
    if gpu.asked:
        print_utilization(doc, console, gpu)
