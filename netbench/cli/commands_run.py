"""`netbench run`: real multi-node training over emulated links, with the bytes on the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pydantic
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from netbench.cli import cluster_options as copt
from netbench.cli import hybrid_options as hopt
from netbench.cli import run_options as ropt
from netbench.cli.app import app
from netbench.cli.commands_net import _privileged
from netbench.cli.errors import UserError, one_line
from netbench.units import format_bytes, format_rate

console = Console(stderr=True)


def _config(**kw):
    from netbench.orchestrator.config import RunConfig

    try:
        return RunConfig(**kw)
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, {"steps": "--steps", "warmup_steps": "--warmup", "timeout_s": "--timeout", "out_dir": "--out", "threads": "--threads",
                                        "gpus_per_node": "--gpus-per-node", "intra_bw_bps": "--intra-bw"})) from None


def _shown(value: float, unit: str) -> str:
    return f"{value:.4f} s" if unit == "s" else format_bytes(value) if unit == "B" else f"{value:.3g}{unit}"


def report_problems(result) -> None:
    """Warnings (leftovers of earlier runs) and stalls, one line each, on stderr."""
    for warning in result.run_json.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}")
    stalls = result.summary.get("stalls") or []
    if stalls:
        listed = ", ".join(f"step {s['step']} took {s['seconds']:.1f} s" for s in stalls[:5]) + (", ..." if len(stalls) > 5 else "")
        console.print(f"[yellow]stalled:[/] {len(stalls)} step(s) ({listed}; a typical step took {stalls[0]['typical_s']:.2f} s)")


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


def dilation_factor(text: str, nodes: int) -> float:
    """``--dilation`` as a factor for ``nodes`` nodes on this host; bad input is a UserError."""
    from netbench.model.host import host_cpus
    from netbench.orchestrator.dilation import parse_dilation

    try:
        return parse_dilation(text, nodes, host_cpus())
    except ValueError as exc:
        raise UserError(f"--dilation: {exc}") from None


def run_calibration(explicit: Optional[Path], quiet: bool = False, replicators=()):
    """This host's calibration for a run or sweep, measured first (with a line on stderr) when the cache has none
    or lacks the encode/decode cost of ``replicators``' settings."""
    from netbench.model.calibration import CalibrationError
    from netbench.model.hostcache import host_calibration

    def told(path: Path) -> None:
        if not quiet:
            console.print(f"measuring this host's model constants once (a few seconds), cached in {path}")

    try:
        return host_calibration(explicit, on_measure=told, replicators=replicators)
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None


@app.command()
def run(
    replicator: str = ropt.ReplicatorOpt,
    bw: str = copt.BwOpt,
    nodes: int = copt.NodesOpt,
    gpus_per_node: int = hopt.GpusPerNodeOpt,
    intra_bw: Optional[str] = hopt.IntraBwOpt,
    compression: Optional[str] = hopt.CompressionOpt,
    optimizer: str = hopt.OptimizerOpt,
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
    steps: int = typer.Option(20, "--steps", help="Measured optimizer steps."),
    warmup: int = typer.Option(2, "--warmup", help="Warm-up steps left out of the summary."),
    topk: int = ropt.TopkOpt,
    chunk: int = ropt.ChunkOpt,
    rate: float = ropt.RateOpt,
    sync_every: int = ropt.SyncEveryOpt,
    value_dtype: str = ropt.ValueDtypeOpt,
    index_dtype: str = ropt.IndexDtypeOpt,
    grad_dtype: str = ropt.GradDtypeOpt,
    rank: float = ropt.RankOpt,
    mu: float = ropt.MuOpt,
    params_every: int = ropt.ParamsEveryOpt,
    m1_every: int = ropt.M1EveryOpt,
    m2_every: int = ropt.M2EveryOpt,
    sign: bool = ropt.SignOpt,
    lr: float = ropt.LrOpt,
    bucket_mb: str = ropt.BucketMbOpt,
    overlap_backward: bool = ropt.OverlapBackwardOpt,
    workload: str = ropt.WorkloadOpt,
    shapes: str = ropt.ShapesOpt,
    compute_ms: float = ropt.ComputeMsOpt,
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Collective timeout in seconds (a dead peer fails the run within it); "
                                            "default: 4x the model's slowest collective on these links, at least 30 s."),
    capture: bool = typer.Option(True, "--capture/--no-capture", help="Capture packet headers on every link."),
    pcap: bool = typer.Option(False, "--pcap", help="Keep the pcap files in the run directory."),
    out: Path = typer.Option(Path("reports/runs"), "--out", help="Parent directory of the run directory."),
    threads: int = typer.Option(1, "--threads", help="torch threads per worker."),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="Model constants to predict with [default: this host's, measured once and cached]."),
    dilation: str = typer.Option("1", "--dilation", help="Time dilation k: links k times slower and longer, compute k times longer, "
                                 "times reported divided by k; auto: nodes / cores (many nodes on few cores)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
) -> None:
    """Train across an emulated cluster and measure time and bytes per step."""
    from netbench.orchestrator.runner import run as run_config

    cluster = copt.build_cluster_spec(nodes, bw, up, down, delay, jitter, loss, offload, engine,
                                   tcp_cc, tcp_wmem_max, no_slow_start_after_idle)
    topk, rate = hopt.with_compression(compression, replicator, chunk, topk, rate)
    rep = ropt.build_replicator_config(replicator, topk=topk, chunk=chunk, rate=rate, sync_every=sync_every, value_dtype=value_dtype,
                                       index_dtype=index_dtype, grad_dtype=grad_dtype, sign=sign, lr=lr, rank=rank, mu=mu,
                                       params_every=params_every, m1_every=m1_every, m2_every=m2_every, optimizer=optimizer,
                                       overlap_backward=overlap_backward)
    work = ropt.build_workload_config(workload, shapes, compute_ms)
    hopt.check_workers(nodes, gpus_per_node)
    ropt.check_workload(work, nodes)
    rep = ropt.with_bucket_mb(rep, bucket_mb, min(cluster.up.rate_bps, cluster.down.rate_bps), cluster.expected_rtt_s(), work, nodes)
    config = _config(cluster=cluster, replicator=rep, workload=work, steps=steps, warmup_steps=warmup, timeout_s=timeout,
                     capture=capture, keep_pcap=pcap, out_dir=out, threads=threads,
                     gpus_per_node=gpus_per_node, intra_bw_bps=hopt.intra_rate(intra_bw))
    factor = dilation_factor(dilation, nodes)
    _privileged()
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
