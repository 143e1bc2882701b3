"""`netbench run`: real multi-node training over emulated links, with the bytes on the wire."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from netbench.cli import cluster_options as copt
from netbench.cli import run_options as ropt
from netbench.cli import sharding_options
from netbench.cli.errors import UserError
from netbench.cli.fields import (
    FROM_FIELDS,
    REPLICATOR,
    RUN,
    TRAINING_REPLICATOR_FIELDS,
    WORKLOAD,
    Settings,
    expand,
    group,
)
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges, require_torch
from netbench.cli.problems import report_problems
from netbench.cli.run_config import build_run_config, check_capture_room, dilation_factor, run_calibration
from netbench.cli.schedule_option import read_schedule
from netbench.model.calibration import CALIBRATION
from netbench.orchestrator.run.churn import check_churn
from netbench.orchestrator.run.dilation import DILATION
from netbench.reports.terminal import for_terminal, make_console, print_summary
from netbench.schedule.churn import CHURN

console = make_console(stderr=True)


@expand(
    network=copt.network_group("run"),
    rep_settings=group(REPLICATOR, *TRAINING_REPLICATOR_FIELDS),
    work_settings=group(WORKLOAD, "kind", "shapes", "compute_ms"),
)
def run(
    replicator: str = REPLICATOR["name"].option(),
    network: Settings = FROM_FIELDS,
    gpus_per_node: int = RUN["gpus_per_node"].option(),
    intra_bw: str | None = RUN["intra_bw_bps"].option(),
    shard_within: str = RUN["shard_within"].option(),
    shard: str = RUN["shard"].option(),
    compression: str | None = RUN["compression"].option(),
    steps: int = RUN["steps"].option(),
    warmup: int = RUN["warmup_steps"].option(),
    rep_settings: Settings = FROM_FIELDS,
    work_settings: Settings = FROM_FIELDS,
    timeout: float | None = RUN["timeout_s"].option(),
    capture: bool = RUN["capture"].option(),
    pcap: bool = RUN["keep_pcap"].option(),
    trace: bool = RUN["trace"].option(),
    out: Path = RUN["out_dir"].option(),
    threads: int = RUN["threads"].option(),
    schedule: Path | None = RUN["schedule"].option(),
    churn: str | None = option(CHURN, "run"),
    calibration: Path | None = option(CALIBRATION, "run"),
    dilation: str = option(DILATION, "run"),
    as_json: bool = option(JSON, "run"),
) -> None:
    """Train across an emulated cluster and measure time and bytes per step."""
    from netbench.orchestrator.run.runner import run as run_config  # late: keeps pandas, scapy off this module's import

    cluster = copt.cluster_spec(network)
    link_schedule = read_schedule(schedule, churn=churn, cluster=cluster)
    nodes = cluster.nodes
    rep, auto_bucket = ropt.replicator_from_options(replicator, rep_settings)
    work = ropt.build_workload_config(**work_settings)
    sharding_options.check_workers(nodes, gpus_per_node)
    sharding_options.check_emulated(shard_within)
    ropt.check_workload(work, nodes)
    config = build_run_config(
        cluster=cluster,
        replicator=rep,
        compression=compression,
        auto_bucket=auto_bucket,
        workload=work,
        steps=steps,
        warmup_steps=warmup,
        timeout_s=timeout,
        capture=capture,
        keep_pcap=pcap,
        trace=trace,
        out_dir=out,
        threads=threads,
        gpus_per_node=gpus_per_node,
        intra_bw_bps=sharding_options.intra_rate(intra_bw),
        shard_within=shard_within,
        shard=shard,
        schedule=link_schedule,
    )
    try:
        check_churn(config)  # nodes that leave and join: a replicator that trains through them
    except ValueError as exc:
        raise UserError(f"--schedule: {exc}") from None
    factor = dilation_factor(dilation)
    check_capture_room([config])
    require_privileges()
    require_torch("run")
    copt.check_engine(cluster)
    calib = run_calibration(
        calibration, replicators=(config.replicator,)
    )  # its line goes to stderr: --json's stdout stays one object
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=as_json,
    ) as bar:
        task = bar.add_task(f"{replicator} on {nodes} nodes at {network['bw']}", total=warmup + steps)
        result = run_config(
            config, progress=lambda done, total: bar.update(task, completed=done), calibration=calib, dilation=factor
        )
    if as_json:
        print(json.dumps(result.summary, default=str))
    else:
        print_summary(result.summary)
        from netbench.reports.schedule_figure import (  # late: keeps matplotlib, pandas off this module's import
            segment_lines,
        )  # late: keeps matplotlib, pandas off this module's import

        for line in segment_lines(result.summary):  # a link schedule's segments
            console.print(for_terminal(line))
        console.print(f"results: {result.run_dir}")
    report_problems(result)
    if result.status != "ok":
        console.print(f"[red]run failed:[/] {for_terminal(result.reason)}")
    elif result.reason:  # a signal during teardown: every step was measured
        console.print(f"[yellow]{result.reason}[/]")
    if (result.reason or "").startswith("interrupted"):
        raise typer.Exit(130)  # Ctrl-C, as a shell reports it
    if result.status != "ok":
        raise typer.Exit(1)
