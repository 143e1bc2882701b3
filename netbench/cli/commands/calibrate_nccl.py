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
from netbench.model.nccl_tests import COLLECTIVES, NcclFit, NcclTestsError, fit_logs, read_log
from netbench.reports.terminal import make_console
from netbench.safe_files import UnsafeOutput, check_folder, make_folder, write_text
from netbench.units import format_bytes, format_time

__all__ = ["calibrate_from_nccl_tests", "checked_output", "MAX_LOGS"]

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


def calibrate_from_nccl_tests(logs: list[Path], collective: str | None, out: Path | None, json_out: bool) -> None:
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
    except NcclTestsError as exc:
        raise UserError(f"--from-nccl-tests: {exc}") from None
    try:
        make_folder(target.parent)
        write_text(target, fit.model_dump_json(indent=2) + "\n")
    except (OSError, UnsafeOutput) as exc:
        raise UserError(f"--out: cannot write {str(target)!r}: {exc}") from None
    if json_out:
        print(json.dumps(fit.model_dump(), indent=2))
    else:
        print_fit(fit, make_console())
    print(f"saved {target}", file=sys.stderr)
