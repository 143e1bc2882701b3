"""`netbench run`: real multi-node training over emulated links, with the bytes on the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from netbench.cli import cluster_options as copt
from netbench.cli import hybrid_options as hopt
from netbench.cli import run_options as ropt
from netbench.cli.fields import FROM_FIELDS, REPLICATOR, RUN, WORKLOAD, Settings, expand, group
from netbench.cli.privileges import require_privileges
from netbench.cli.problems import report_problems
from netbench.cli.run_config import build_run_config, dilation_factor, run_calibration
from netbench.units import format_bytes, format_rate

console = Console(stderr=True)


def _shown(value: float, unit: str) -> str:
    return f"{value:.4f} s" if unit == "s" else format_bytes(value) if unit == "B" else f"{value:.3g}{unit}"


def summary_table(summary: dict, command: str = "netbench run") -> Table:
    """Median (mean, for periodic replicators) step time and its breakdown, bytes per step per node (payload vs wire)."""
    table = Table(caption=f"measured: per-node {summary.get('statistic', 'median')} over the steps after warm-up; "
                          "times at the slowest node, bytes the median node", title=f"{command} {summary['run_id']}: {summary['replicator']}, {summary['nodes']} nodes"
                        f"{' x ' + str(summary['gpus_per_node']) + ' workers' if summary.get('gpus_per_node') else ''}, "
                        f"{format_rate(summary['bw_bps']) if summary.get('bw_bps') else 'link rate unknown'}, delay {summary['delay_ms']:g} ms ({summary['status']})")
    table.add_column("metric")
    table.add_column(f"measured ({summary.get('statistic', 'median')})", justify="right")
    predicted = summary.get("predicted", {})
    if predicted:
        table.add_column("model", justify="right")
    rows = [("step time", "step_time_s", "s"), ("  compute", "compute_time_s", "s"), ("  encode", "compress_time_s", "s"),
            ("  communicate", "comm_time_s", "s"), ("  communicate inside the node", "intra_comm_time_s", "s"), ("  decode", "decode_time_s", "s"), ("  apply", "apply_time_s", "s"),
            ("payload bytes/step/node", "payload_bytes_per_step", "B"), ("wire tx bytes/step/node", "wire_tx_bytes_per_step", "B"),
            ("wire rx bytes/step/node", "wire_rx_bytes_per_step", "B"), ("intra-node bytes/step/node", "intra_tx_bytes_per_step", "B"),
            ("captured tx bytes/step/node", "capture_wire_bytes_per_step", "B"),
            ("mean step time", "step_time_mean_s", "s"), ("slowdown vs model (mean step)", "slowdown_vs_model", "x"),
            ("retransmitted bytes/step/node", "retrans_bytes_per_step", "B"), ("retransmitted segments/step/node", "retrans_segs_per_step", "")]
    for label, key, unit in rows:
        value = summary.get(key)
        if value is None:
            continue
        cells = [label, _shown(value, unit)]
        if predicted:
            p = predicted.get(key)
            cells.append("" if p is None else _shown(p, unit))
        table.add_row(*cells)
    if summary.get("first_loss") is not None:
        row = ["loss (first -> last)", f"{summary['first_loss']:.3f} -> {summary['final_loss']:.3f}"]
        table.add_row(*(row + [""] if predicted else row))
    fidelity = summary.get("fidelity")
    if fidelity is not None:
        dilated = f" (dilated x{fidelity['dilation']:.3g})" if fidelity.get("dilation", 1) != 1 else ""
        row = ["faithful emulation", ("yes" if fidelity["ok"] else "NO: " + "; ".join(fidelity["reasons"])) + dilated]
        table.add_row(*(row + [""] if predicted else row))
    calib = predicted.get("calibration") if predicted else None
    if isinstance(calib, dict):
        row = ["model constants", f"{calib.get('source')} on {calib.get('host') or 'this host'} ({calib.get('digest')})"]
        table.add_row(*(row + [""]))
    return table


@expand(rep_settings=group(REPLICATOR, "topk", "chunk", "rate", "sync_every", "value_dtype", "index_dtype", "grad_dtype", "rank", "mu",
                  "params_every", "m1_every", "m2_every", "sign", "lr", "bucket_mb", "overlap_backward"),
        work_settings=group(WORKLOAD, "kind", "shapes", "compute_ms"))
def run(
    replicator: str = REPLICATOR["name"].option(),
    bw: str = copt.BwOpt,
    nodes: int = copt.NodesOpt,
    gpus_per_node: int = RUN["gpus_per_node"].option(),
    intra_bw: Optional[str] = RUN["intra_bw_bps"].option(),
    compression: Optional[str] = hopt.CompressionOpt,
    optimizer: str = REPLICATOR["optimizer"].option(),
    up: Optional[str] = copt.UpOpt,
    down: Optional[str] = copt.DownOpt,
    delay: str = copt.DelayOpt,
    jitter: str = copt.JitterOpt,
    loss: str = copt.LossOpt,
    offload: str = copt.OffloadOpt,
    engine: str = copt.EngineOpt,
    tcp_cc: Optional[str] = copt.TcpCcOpt,
    tcp_wmem_max: Optional[int] = copt.TcpWmemMaxOpt,
    no_slow_start_after_idle: bool = copt.NoSlowStartAfterIdleOpt,
    steps: int = RUN["steps"].option(),
    warmup: int = RUN["warmup_steps"].option(),
    rep_settings: Settings = FROM_FIELDS,
    work_settings: Settings = FROM_FIELDS,
    timeout: Optional[float] = RUN["timeout_s"].option(),
    capture: bool = RUN["capture"].option(),
    pcap: bool = RUN["keep_pcap"].option(),
    out: Path = RUN["out_dir"].option(),
    threads: int = RUN["threads"].option(),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="Model constants to predict with [default: this host's, measured once and cached]."),
    dilation: str = typer.Option("1", "--dilation", help="Time dilation k: links k times slower and longer, compute k times longer, "
                                 "times reported divided by k; auto: nodes / cores (many nodes on few cores)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
) -> None:
    """Train across an emulated cluster and measure time and bytes per step."""
    from netbench.orchestrator.runner import run as run_config

    cluster = copt.build_cluster_spec(nodes, bw, up, down, delay, jitter, loss, offload, engine,
                                   tcp_cc, tcp_wmem_max, no_slow_start_after_idle)
    bucket_mb = rep_settings.pop("bucket_mb")
    topk, rate = hopt.with_compression(compression, replicator, rep_settings["chunk"], rep_settings["topk"], rep_settings["rate"])
    rep = ropt.build_replicator_config(replicator, **{**rep_settings, "topk": topk, "rate": rate}, optimizer=optimizer)
    work = ropt.build_workload_config(**work_settings)
    hopt.check_workers(nodes, gpus_per_node)
    ropt.check_workload(work, nodes)
    rep = ropt.with_bucket_mb(rep, bucket_mb, min(cluster.up.rate_bps, cluster.down.rate_bps), cluster.expected_rtt_s(), work, nodes)
    config = build_run_config(cluster=cluster, replicator=rep, workload=work, steps=steps, warmup_steps=warmup, timeout_s=timeout,
                              capture=capture, keep_pcap=pcap, out_dir=out, threads=threads,
                              gpus_per_node=gpus_per_node, intra_bw_bps=hopt.intra_rate(intra_bw))
    factor = dilation_factor(dilation, nodes)
    require_privileges()
    copt.check_engine(cluster)
    calib = run_calibration(calibration, replicators=(rep,))  # its line goes to stderr: --json's stdout stays one object
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=as_json) as bar:
        task = bar.add_task(f"{replicator} on {nodes} nodes at {bw}", total=warmup + steps)
        result = run_config(config, progress=lambda done, total: bar.update(task, completed=done), calibration=calib, dilation=factor)
    if as_json:
        print(json.dumps(result.summary, default=str))
    else:
        Console().print(summary_table(result.summary))
        console.print(f"results: {result.run_dir}")
    report_problems(result)
    if result.status != "ok":
        console.print(f"[red]run failed:[/] {result.reason}")
    elif result.reason:  # a signal during teardown: every step was measured
        console.print(f"[yellow]{result.reason}[/]")
    if (result.reason or "").startswith("interrupted"):
        raise typer.Exit(130)  # Ctrl-C, as a shell reports it
    if result.status != "ok":
        raise typer.Exit(1)
