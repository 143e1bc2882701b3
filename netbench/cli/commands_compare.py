"""`netbench compare BASELINE CURRENT`: time and bytes per step, point by point, with an exit code CI can gate on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from netbench.cli.errors import UserError


def compare(
    baseline: Path = typer.Argument(..., help="Sweep folder (summary.csv) or run directory (run.json) to compare against."),
    current: Path = typer.Argument(..., help="Sweep folder or run directory measured now."),
    max_slowdown: str = typer.Option("10%", "--max-slowdown", help="Step time may grow this much beyond its noise (10% or 0.1)."),
    max_bytes_growth: str = typer.Option("3%", "--max-bytes-growth", help="Wire bytes per step may grow this much beyond its noise."),
    time_advisory: bool = typer.Option(False, "--time-advisory", help="Report step-time regressions without failing on them (shared, noisy machines); bytes still fail."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON instead of a table."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Also write a markdown summary (for a CI job's summary page) to this file."),
) -> None:
    """Match points by configuration; exit 1 when one regresses beyond its threshold and noise, 0 otherwise, 2 on bad input."""
    from netbench.reports.compare import HEADERS, CompareError, compare as run_compare, load_side, parse_fraction, table_rows
    from netbench.reports.compare import to_json, to_markdown, workload_mismatch, workload_of

    try:
        slowdown = parse_fraction(max_slowdown, "--max-slowdown")
        growth = parse_fraction(max_bytes_growth, "--max-bytes-growth")
        if markdown is not None and not markdown.parent.is_dir():
            raise CompareError(f"--markdown: folder {str(markdown.parent)!r} does not exist")
        base, cur = load_side(baseline), load_side(current)
    except CompareError as exc:
        raise UserError(str(exc)) from None
    if differs := workload_mismatch(workload_of(baseline), workload_of(current)):
        raise UserError(f"nothing to compare: the workloads differ ({differs})")
    result = run_compare(base, cur, slowdown, growth, time_advisory)
    if not result.rows:
        raise UserError(f"nothing to compare: no point of {current} matches one of {baseline} "
                        f"({len(base)} vs {len(cur)} points by replicator, nodes, rate and delay)")
    if markdown is not None:
        markdown.write_text(to_markdown(result, str(baseline), str(current)))
    if as_json:
        print(json.dumps(to_json(result), indent=2))
    else:
        table = Table(title=f"{baseline} -> {current}", title_style="bold")
        for i, name in enumerate(HEADERS):
            table.add_column(name, justify="left" if i in (0, len(HEADERS) - 1) else "right")
        for cells in table_rows(result):
            style = "red" if cells[-1] not in ("ok",) else None
            table.add_row(*cells, style=style)
        console = Console(width=max(140, Console().width))
        console.print(table)
        for note in result.notes:
            console.print(f"note: {note}")
        if result.only_base or result.only_cur:
            console.print(f"unmatched (not compared): {_few(result.only_base)} only in baseline; {_few(result.only_cur)} only in current")
        print(result.verdict())
    sys.stdout.flush()
    raise typer.Exit(result.exit_code())


def _few(labels: list[str], shown: int = 4) -> str:
    """``3 (a, b, c)`` or ``57 (a, b, c, d, ...)``: a count with the first few names."""
    if not labels:
        return "0"
    more = ", ..." if len(labels) > shown else ""
    return f"{len(labels)} ({', '.join(labels[:shown])}{more})"
