"""``netbench calibrate --from-nccl-tests LOG``: NCCL's latency and bandwidth terms fitted to the user's own cluster.

Each log is read (:mod:`netbench.model.nccl_tests`: bounded, checked, one-line errors), fitted per collective, the
fit's terms and its residual per size printed, and the fit written atomically to ``--out`` for
``netbench plan --backend nccl --nccl-calibration FILE``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from netbench.cli.errors import UserError
from netbench.model.accelerators import accelerator
from netbench.model.nccl_fit import (
    DEFAULT_MIN_SIZE,
    ClusterHardware,
    NcclFitError,
    TunedFit,
    fit_tuned,
    segment_warnings,
)
from netbench.model.nccl_tests import COLLECTIVES, NcclFit, NcclTestsError, NcclTestsLog, fit_logs, read_log
from netbench.reports.terminal import make_console
from netbench.safe_files import UnsafeOutput, check_folder, make_folder, write_text
from netbench.units import format_bytes, format_time, parse_rate

__all__ = ["calibrate_from_nccl_tests", "checked_output", "cluster_hardware", "MAX_LOGS"]

MAX_LOGS = 32


def checked_output(out: Path) -> Path:
    """``--out`` as a file to write: not a directory, in a folder nobody else can redirect (one line, exit 2)."""
    if out.exists() and out.is_dir():
        raise UserError(f"--out: {str(out)!r} is a directory")
    try:
        check_folder(out.parent)
    except UnsafeOutput as exc:
        raise UserError(f"--out: {exc}") from None
    return out


def cluster_hardware(
    accelerator_name: str | None, nics: int | None, nic_bw: str | None, transport: str
) -> ClusterHardware | None:
    """The logs' cluster as --accelerator, --nics, --nic-bw and --transport describe it (None: neither of the first
    and third given); one line naming the option otherwise."""
    if accelerator_name is None and nic_bw is None:
        return None
    if accelerator_name is None or nic_bw is None:
        raise UserError("--accelerator and --nic-bw: give both to fit the logs at NCCL's picks (or neither)")
    try:
        acc = accelerator(accelerator_name).name
    except ValueError as exc:
        raise UserError(f"--accelerator: {exc}") from None
    try:
        rate = parse_rate(nic_bw)
    except ValueError as exc:
        raise UserError(f"--nic-bw: {exc}") from None
    if nics is not None and not 1 <= nics <= 64:
        raise UserError(f"--nics: must be between 1 and 64 NICs a node, got {nics}")
    if transport.strip().lower() not in ("socket", "rdma"):
        raise UserError(f"--transport: choose from socket, rdma, got {transport!r}")
    if not 1e6 <= rate <= 1e13:
        raise UserError(f"--nic-bw: {nic_bw!r} is outside 1mbit-10tbit")
    return ClusterHardware(accelerator=acc, nics=nics or 1, nic_bps=rate, transport=transport.strip().lower())


def tuned_with_checks(log: NcclTestsLog, fit: NcclFit, hardware: ClusterHardware) -> TunedFit:
    """``log`` fitted at NCCL's picks, warned of the bus-bandwidth fit's segments the hardware cannot carry."""
    tuned = fit_tuned(log, hardware)
    plain = fit.collectives[log.collective]
    buses = [seg.bus_Bps for seg in plain.segments]
    extra = segment_warnings(log.source, log.collective, log.ranks, tuned.nodes, buses, hardware)
    return tuned.model_copy(update={"warnings": (*tuned.warnings, *extra)})


def print_tuned(tuned: TunedFit, console: Console) -> None:
    """A fit at NCCL's picks: its terms, what it left at NCCL's model, its warnings, the pick and residual per size."""
    eff = ", ".join(f"{k} {v:.3g}" for k, v in tuned.efficiencies.items()) or "none"
    lat = ", ".join(f"{k} x{v:.3g}" for k, v in tuned.latency_scales.items()) or "none"
    console.print(
        f"[bold]{tuned.collective}[/bold] at NCCL's picks on {tuned.nodes} nodes of {tuned.gpus_per_node} "
        f"({tuned.hardware.describe()}): efficiencies {eff}; latency scales {lat}",
        highlight=False,
    )
    if tuned.unfitted():
        hint = "; a run on three or more nodes, or NCCL_ALGO=Ring, fits the NICs" if "nic" in tuned.unfitted() else ""
        console.print(
            f"  left at NCCL's model (no size of the log exercised them): {', '.join(tuned.unfitted())}{hint}",
            highlight=False,
        )
    for warning in tuned.warnings:
        console.print(f"  [yellow]{warning}[/yellow]", highlight=False)
    table = Table(show_header=True, header_style="bold")
    table.add_column("size", justify="right")
    table.add_column("NCCL's pick")
    table.add_column("fit vs log", justify="right")
    for (size, pick), (_, residual) in zip(tuned.picks, tuned.residuals):
        table.add_row(format_bytes(size), pick, f"{100 * residual:+.1f} %")
    console.print(table)
    console.print(
        f"  fitted on sizes of {format_bytes(DEFAULT_MIN_SIZE)} and above (below them NCCL cuts channels and chunks "
        "per size, which its tuner's line leaves out)",
        highlight=False,
    )


def print_fit(fit: NcclFit, console: Console) -> None:
    """Per collective: the fitted lines, then the residual at every size of the log."""
    for kind, c in fit.collectives.items():
        nodes = f" on {c.nodes} nodes" if c.nodes else ""
        console.print(f"[bold]{kind}[/bold]: {c.ranks} ranks{nodes} ({c.source})", highlight=False)
        for s in c.segments:
            upto = "and above" if s is c.segments[-1] else f"up to {format_bytes(s.upto_bytes)}"
            console.print(
                f"  {upto:>16}: latency {format_time(s.latency_s)}, bus bandwidth {s.bus_Bps / 1e9:.3g} GB/s",
                highlight=False,
            )
        table = Table(show_header=True, header_style="bold")
        table.add_column("size", justify="right")
        table.add_column("fit vs log", justify="right")
        for size, residual in c.residuals:
            table.add_row(format_bytes(size), f"{100 * residual:+.1f} %")
        console.print(table)
        worst = max(((abs(r), s) for s, r in c.residuals if s >= 16e6), default=None)
        if worst:
            console.print(f"  largest residual at 16 MB and above: {100 * worst[0]:.1f} % ({format_bytes(worst[1])})")
        if c.regimes:
            console.print(f"  {c.regimes}", highlight=False)


def calibrate_from_nccl_tests(
    logs: list[Path], collective: str | None, out: Path | None, json_out: bool, hardware: ClusterHardware | None = None
) -> None:
    if len(logs) > MAX_LOGS:
        raise UserError(f"--from-nccl-tests: at most {MAX_LOGS} logs, got {len(logs)}")
    if collective is not None and collective.strip().lower() not in COLLECTIVES:
        raise UserError(f"--collective: choose from {', '.join(COLLECTIVES)}, got {collective!r}")
    if out is None:
        raise UserError("--out: name the file the fit is written to (it is what plan --nccl-calibration reads)")
    target = checked_output(out)
    try:
        parsed = [read_log(path, collective.strip().lower() if collective else None) for path in logs]
        fit = fit_logs(parsed)
        if hardware is not None:
            fit = fit.model_copy(
                update={"tuned": {log.collective: tuned_with_checks(log, fit, hardware) for log in parsed}}
            )
    except (NcclTestsError, NcclFitError) as exc:
        raise UserError(f"--from-nccl-tests: {exc}") from None
    try:
        make_folder(target.parent)
        write_text(target, fit.model_dump_json(indent=2) + "\n")
    except (OSError, UnsafeOutput) as exc:
        raise UserError(f"--out: cannot write {str(target)!r}: {exc}") from None
    if json_out:
        print(json.dumps(fit.model_dump(), indent=2))
    else:
        console = make_console()
        print_fit(fit, console)
        for tuned in fit.tuned.values():
            print_tuned(tuned, console)
    print(f"saved {target}", file=sys.stderr)
