"""`netbench exec`: run any distributed program once per node on the emulated cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import typer
from rich.table import Table

from netbench.cli import cluster_options as copt
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, RUN, Settings, expand
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges
from netbench.cli.problems import report_problems
from netbench.cli.run_config import build_run_config, check_capture_room
from netbench.cli.schedule_option import read_schedule
from netbench.reports.terminal import make_console, print_summary
from netbench.rundir.layout import RunDir
from netbench.schedule.churn import CHURN
from netbench.units import format_bytes

console = make_console(stderr=True)


def nodes_table(nodes: list[dict], title: str) -> Table:
    """One row per node: exit code, wall and CPU time, bytes each way (counters and capture), retransmissions."""
    table = Table(
        title=title,
        caption="tx/rx: interface counters; cap: the capture's MTU frames; retrans: TCP segments sent again",
    )
    for column in ("node", "exit", "wall", "cpu", "tx", "rx", "tx cap", "rx cap", "retrans"):
        table.add_column(column, justify="right")

    def b(value) -> str:
        return "" if value is None else format_bytes(value)

    for n in nodes:
        exit_code = (
            ""
            if n.get("exit_code") is None
            else str(n["exit_code"]) + (f" ({n['stopped_by']})" if n.get("stopped_by") else "")
        )
        table.add_row(
            str(n["rank"]),
            exit_code,
            f"{n['wall_time_s']:.2f} s",
            "" if n.get("cpu_time_s") is None else f"{n['cpu_time_s']:.2f} s",
            b(n.get("wire_tx_bytes")),
            b(n.get("wire_rx_bytes")),
            b(n.get("capture_wire_tx_bytes")),
            b(n.get("capture_wire_rx_bytes")),
            "" if n.get("retransmissions") is None else str(n["retransmissions"]),
        )
    return table


@expand(network=copt.network_group("exec"))
def exec_command(
    command: list[str] | None = typer.Argument(
        None, metavar="-- COMMAND [ARGS...]", help="The program each node runs."
    ),
    network: Settings = FROM_FIELDS,
    timeout: float | None = RUN["timeout_s"].option("exec"),
    warmup: int = RUN["warmup_steps"].option("exec"),
    port: int = typer.Option(29500, "--master-port", help="MASTER_PORT (rank 0's rendezvous port)."),
    capture: bool = RUN["capture"].option(),
    pcap: bool = RUN["keep_pcap"].option(),
    trace: bool = RUN["trace"].option(),
    out: Path = RUN["out_dir"].option(),
    threads: int = RUN["threads"].option("exec"),
    schedule: Path | None = RUN["schedule"].option(),
    churn: str | None = option(CHURN, "exec"),
    as_json: bool = option(JSON, "exec"),
    torchft: bool = typer.Option(
        False,
        "--torchft",
        help="Each node a torchft replica group of one: a lighthouse in the switch's namespace (TORCHFT_LIGHTHOUSE), "
        "REPLICA_GROUP_ID (the rank), NUM_REPLICA_GROUPS, the group's store at MASTER_ADDR:MASTER_PORT with RANK=0 and "
        "WORLD_SIZE=1, and the node's address as its hostname.",
    ),
    schedule_clock: str = typer.Option(
        "step",
        "--schedule-clock",
        metavar="step|start|traffic",
        help="The schedule's time 0: rank 0's first measured step (step; netbench.step); for a program that records "
        "no steps, the programs' launch (start) or rank 0's first traffic past start-up chatter (traffic).",
    ),
) -> None:
    """Run COMMAND once per node inside its namespace, with RANK, WORLD_SIZE, MASTER_ADDR, ... set; measure every link.

    Exit status: the first failing node's; 124 when --timeout expired; 130 on Ctrl-C; 125 when
    netbench itself failed; 2 for bad input (checked before anything is built).
    """
    from netbench.orchestrator.exec.clocks import CLOCKS  # late: with the orchestrator, off the CLI's import
    from netbench.orchestrator.exec.execute import (  # late: keeps pandas, scapy off this module's import
        CommandError,
        ExecConfig,
        check_command,
        execute,
    )
    from netbench.orchestrator.exec.torchft_groups import check_torchft  # late: as the orchestrator

    argv = tuple(command or ())
    try:
        check_command(argv)
    except CommandError as exc:
        raise UserError(str(exc)) from None
    if timeout is not None and not 0 < timeout <= 86400:
        raise UserError(f"--timeout: must be in (0, 86400] seconds (got {timeout:g})")
    if not 1 <= port <= 65535:
        raise UserError(f"--master-port: must be 1-65535 (got {port})")
    if schedule_clock not in CLOCKS:
        raise UserError(f"--schedule-clock: one of {', '.join(CLOCKS)}")
    cluster = copt.cluster_spec(network)
    if torchft:
        try:
            check_torchft(cluster)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    link_schedule = read_schedule(schedule, churn=churn, cluster=cluster)
    if link_schedule is not None and any(c.compute_scale is not None for c in link_schedule.changes):
        raise UserError(
            "--schedule: compute_scale paces netbench run's workers; a program under exec sets its own speed"
        )
    run = build_run_config(
        cluster=cluster,
        warmup_steps=warmup,
        capture=capture,
        keep_pcap=pcap,
        trace=trace,
        out_dir=out,
        threads=threads,
        schedule=link_schedule,
    )
    check_capture_room([run])
    require_privileges()
    copt.check_engine(cluster)
    result = execute(
        ExecConfig(
            run=run,
            command=argv,
            timeout_s=timeout,
            master_port=port,
            torchft=torchft,
            schedule_clock=schedule_clock,
        ),
        echo=sys.stderr if as_json else sys.stdout,
    )
    if as_json:
        print(
            json.dumps(
                {
                    "status": result.status,
                    "exit_code": result.exit_code,
                    "reason": result.reason,
                    "wall_time_s": result.wall_time_s,
                    "run_id": result.run_id,
                    "run_dir": str(result.run_dir),
                    "nodes": result.nodes,
                    "summary": result.summary,
                },
                default=str,
            )
        )
    else:
        make_console().print(
            nodes_table(
                result.nodes,
                f"netbench exec {result.run_id}: {' '.join(argv)} ({result.status}, {result.wall_time_s:.1f} s)",
            )
        )
        if result.summary.get("steps_measured"):
            print_summary(result.summary, "netbench exec")
        console.print(f"results: {result.run_dir}")
    report_problems(
        SimpleNamespace(run_json=json.loads(RunDir(result.run_dir).run_json.read_text()), summary=result.summary)
    )
    if result.status != "ok":
        console.print(f"[red]exec failed:[/] {result.reason}")
    elif result.reason:
        console.print(f"[yellow]{result.reason}[/]")
    if result.exit_code:
        raise typer.Exit(result.exit_code)
