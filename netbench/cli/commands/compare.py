"""`netbench compare BASELINE CURRENT`: time and bytes per step, point by point, with an exit code CI can gate on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from netbench.cli.errors import UserError
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.reports.benchmark_json import benchmark_entries
from netbench.reports.terminal import make_console
from netbench.safe_files import UnsafeOutput, check_folder, write_text

if TYPE_CHECKING:
    from netbench.reports.compare import Comparison


def compare(
    baseline: Path = typer.Argument(
        ..., help="Sweep folder (summary.csv) or run directory (run.json) to compare against."
    ),
    current: Path = typer.Argument(..., help="Sweep folder or run directory measured now."),
    max_slowdown: str = typer.Option(
        "10%", "--max-slowdown", help="Step time may grow this much beyond its noise (10% or 0.1)."
    ),
    max_bytes_growth: str = typer.Option(
        "3%", "--max-bytes-growth", help="Wire bytes per step may grow this much beyond its noise."
    ),
    time_advisory: bool = typer.Option(
        False,
        "--time-advisory",
        help="Report step-time regressions without failing on them (shared, noisy machines); bytes still fail.",
    ),
    as_json: bool = option(JSON, "compare"),
    markdown: Path | None = typer.Option(
        None,
        "--markdown",
        help="Also write a markdown summary (for a CI job's summary page) to this file, replacing it.",
    ),
    benchmark_json: Path | None = typer.Option(
        None,
        "--benchmark-json",
        help="Also write CURRENT's step time and wire bytes per point for github-action-benchmark "
        "(customSmallerIsBetter) to this file, replacing it.",
    ),
) -> None:
    """Match points by configuration; exit 1 when CURRENT is broken or a point regresses beyond its threshold and noise,
    0 otherwise, 2 on bad input or when nothing is comparable."""
    from netbench.orchestrator.sweep.scenario import (  # late: keeps networkx, numpy, psutil, pyroute2 off
        recorded_grid_points,
    )  # late: keeps networkx, numpy, psutil, pyroute2 off this module's import
    from netbench.reports.compare import (  # late: keeps networkx, numpy, pandas off this module's import
        CompareError,
        load_side,
        parse_fraction,
        to_json,
        to_markdown,
    )
    from netbench.reports.compare import (  # late: keeps networkx, numpy, pandas off this module's import
        compare as run_compare,
    )

    try:
        slowdown = parse_fraction(max_slowdown, "--max-slowdown")
        growth = parse_fraction(max_bytes_growth, "--max-bytes-growth")
        for option, path in (("--markdown", markdown), ("--benchmark-json", benchmark_json)):
            if path is not None:
                _check_output_folder(option, path)
        base, cur = load_side(baseline, recorded_grid_points), load_side(current, recorded_grid_points)
    except CompareError as exc:
        raise UserError(str(exc)) from None
    result = run_compare(base, cur, slowdown, growth, time_advisory)
    code = result.exit_code()
    if code == 2:
        raise UserError(result.verdict())
    if markdown is not None:
        _write_output("--markdown", markdown, to_markdown(result, str(baseline), str(current)))
    if benchmark_json is not None:
        _write_output(
            "--benchmark-json", benchmark_json, json.dumps(benchmark_entries(cur.points.values()), indent=2) + "\n"
        )
    if as_json:
        print(json.dumps(to_json(result), indent=2))
    else:
        _print(result, str(baseline), str(current))
    sys.stdout.flush()
    raise typer.Exit(code)


def _check_output_folder(option: str, path: Path) -> None:
    """Refuse, before anything is read, an output folder another user could plant a link in."""

    if not path.parent.is_dir():
        raise UserError(f"{option}: folder {_shown(path.parent)!r} does not exist")
    try:
        check_folder(path.parent)
    except UnsafeOutput as exc:
        raise UserError(f"{option}: {_shown(exc)}") from None


def _write_output(option: str, path: Path, text: str) -> None:
    """Replace the file (a fresh name renamed into place: never written through a link planted at its name)."""

    try:
        write_text(path, text)
    except OSError as exc:
        raise UserError(f"{option}: cannot write {_shown(path)!r}: {exc.strerror}") from None


def _shown(value: object) -> str:
    from netbench.reports.compare_inputs import (  # late: keeps networkx, numpy, pandas off this module's import
        clean_text,
    )  # late: keeps networkx, numpy, pandas off this module's import

    return clean_text(value, 300)


def _print(result: Comparison, baseline: str, current: str) -> None:
    """The table, then one line per note and per problem, then the verdict (the last line)."""
    from netbench.reports.compare import (  # late: keeps networkx, numpy, pandas off this module's import
        HEADERS,
        table_rows,
    )  # late: keeps networkx, numpy, pandas off this module's import

    console = make_console(markup=False, emoji=False, highlight=False)  # every text is literal
    if result.rows:
        table = Table(title=f"{_shown(baseline)} -> {_shown(current)}", title_style="bold")
        for i, name in enumerate(HEADERS):
            table.add_column(name, justify="left" if i in (0, len(HEADERS) - 1) else "right")
        for cells in table_rows(result):
            table.add_row(*cells, style="red" if cells[-1] != "ok" else None)
        console.print(table)
    for note in result.notes:
        print(f"note: {note}")
    if result.only_base or result.only_cur:
        print(
            f"unmatched (not compared): {_few(result.only_base)} only in baseline; {_few(result.only_cur)} "
            "only in current"
        )
    for problem in result.problems:
        print(problem.line())
    print(result.verdict())


def _few(labels: list[str], shown: int = 4) -> str:
    """``3 (a, b, c)`` or ``57 (a, b, c, d, ...)``: a count with the first few names."""
    if not labels:
        return "0"
    more = ", ..." if len(labels) > shown else ""
    return f"{len(labels)} ({', '.join(labels[:shown])}{more})"
