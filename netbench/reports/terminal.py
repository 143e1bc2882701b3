"""A run's summary as a terminal table: the metrics table's rows, measured beside the model.

`netbench run`, `exec`, `worker` and `report RUN_DIR` all print this one table; its rows,
labels and units are :mod:`netbench.rundir.summary`'s, so it lists what summary.csv and
report.md list, under the same names. Every text that comes from a run (its id, replicator,
status, fidelity reasons, the model's source) is escaped for rich markup and stripped of control
characters (:mod:`netbench.reports.escape`): a ``[/]`` or an escape sequence prints as text.

Every command prints through :func:`make_console`: at a terminal, at its width; piped or redirected, rich would
assume 80 columns and wrap table cells (``11.04`` over `` s``) and cut labels, so there it has no width limit and
every line stays whole. It is also the one place text leaves for the terminal, so it holds the last line of defence
for text a command forgot to escape: every character it writes that is not rich's own styling passes one sanitizer
(control characters but newline and tab, and the bidirectional overrides, dropped), and a string whose markup does not
parse (a path holding ``[/x]``) prints as the text it is instead of raising.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from netbench.reports.escape import BIDI, for_terminal
from netbench.rundir.summary import Metric, terminal_metrics
from netbench.units import format_bytes, format_rate

__all__ = [
    "SafeConsole",
    "make_console",
    "summary_table",
    "summary_lines",
    "print_summary",
    "shown",
    "for_terminal",
]

UNWRAPPED_WIDTH = 100_000  # wider than any line netbench prints: piped, each line comes out whole


# what no text a console writes may hold: C0 and C1 controls but newline and tab, DEL, the bidirectional overrides
_DROPPED = dict.fromkeys([*(c for c in range(0x20) if c not in (0x09, 0x0A)), *range(0x7F, 0xA0), *map(ord, BIDI)])


class SafeConsole(Console):
    """A rich console whose output holds no control character it did not put there itself, and that prints a
    string whose markup does not parse as plain text."""

    def render_str(self, text: str, **options: Any) -> Text:
        try:
            return super().render_str(text, **options)
        except MarkupError:
            return super().render_str(text, **{**options, "markup": False})

    def _render_buffer(self, buffer: Any) -> str:
        clean = (seg if seg.control else Segment(seg.text.translate(_DROPPED), seg.style) for seg in buffer)
        return super()._render_buffer(clean)


def make_console(stderr: bool = False, **options: Any) -> Console:
    """A console for output meant for people (``options``: rich's): the terminal's width at a terminal; piped or
    redirected, no width limit, so that no table cell or line wraps. A width the user set (``COLUMNS``) wins."""
    stream = sys.stderr if stderr else sys.stdout
    unwrapped = not stream.isatty() and "COLUMNS" not in os.environ
    return SafeConsole(stderr=stderr, width=UNWRAPPED_WIDTH if unwrapped else None, **options)


def shown(value: float, unit: str) -> str:
    """One value as the terminal prints it: seconds to 0.1 ms, bytes in binary units, others to 3 figures."""
    if unit == "s":
        return f"{value:.4f} s"
    if unit == "B":
        return format_bytes(value)
    return f"{value:.3g}" if unit == "count" else f"{value:.3g}{unit}"  # a count is a bare number; x is a ratio


def _label(m: Metric) -> str:
    return f"  {m.label}" if m.part_of_step or m.nested else m.label


def _title(summary: dict[str, Any], command: str) -> str:
    workers = f" x {summary['gpus_per_node']} workers" if summary.get("gpus_per_node") else ""
    rate = format_rate(summary["bw_bps"]) if summary.get("bw_bps") else "link rate unknown"
    return (
        f"{for_terminal(command)} {for_terminal(summary['run_id'])}: {for_terminal(summary['replicator'])}, "
        f"{summary['nodes']} node{'' if summary['nodes'] == 1 else 's'}{workers}, "
        f"{rate}, delay {summary['delay_ms']:g} ms ({for_terminal(summary['status'])})"
    )


def _loss(value: float | None) -> str:
    """A step's loss, or "not a number" where every rank's was NaN (training that diverged still ends its run)."""
    return "not a number" if value is None else f"{value:.3f}"


def _rows(summary: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(label, measured, model) of every row the summary has; model None where the run has no prediction."""
    predicted = summary.get("predicted", {})
    rows: list[tuple[str, str, str | None]] = []

    def add(label: str, measured: str, model: str = "") -> None:
        rows.append((label, measured, model if predicted else None))

    for m in terminal_metrics():
        value = summary.get(m.key)
        if value is None:
            continue
        p = predicted.get(m.key) if predicted else None
        add(_label(m), shown(value, m.unit), "" if p is None else shown(p, m.unit))
    if summary.get("first_loss") is not None:
        add("loss (first -> last)", f"{_loss(summary['first_loss'])} -> {_loss(summary['final_loss'])}")
    fidelity = summary.get("fidelity")
    if fidelity is not None:
        dilated = f" (dilated x{fidelity['dilation']:.3g})" if fidelity.get("dilation", 1) != 1 else ""
        verdict = "yes" if fidelity["ok"] else "NO: " + for_terminal("; ".join(fidelity["reasons"]))
        add("faithful emulation", verdict + dilated)
    calib = predicted.get("calibration") if predicted else None
    if isinstance(calib, dict):
        add(
            "model constants",
            for_terminal(f"{calib.get('source')} on {calib.get('host') or 'this host'} ({calib.get('digest')})"),
        )
    return rows


def _caption(summary: dict[str, Any]) -> str:
    statistic = for_terminal(summary.get("statistic") or "median")
    return (
        f"measured: per-node {statistic} over the steps after warm-up; times at the slowest node, bytes the median node"
    )


def summary_table(summary: dict[str, Any], command: str = "netbench run") -> Table:
    """Median (mean, for periodic replicators) step time and its breakdown, bytes per step per node (payload vs
    wire).
    """
    statistic = for_terminal(summary.get("statistic") or "median")
    table = Table(caption=_caption(summary), title=_title(summary, command))
    table.add_column("metric")
    table.add_column(f"measured ({statistic})", justify="right")
    if summary.get("predicted"):
        table.add_column("model", justify="right")
    for label, measured, model in _rows(summary):
        table.add_row(*([label, measured] if model is None else [label, measured, model]))
    return table


def summary_lines(summary: dict[str, Any], command: str = "netbench run") -> list[str]:
    """The same rows as plain lines, ``label: measured (model M)``: what a pipe or a log gets, no cell to wrap."""
    lines = [_title(summary, command)]
    for label, measured, model in _rows(summary):
        lines.append(f"{label}: {measured}" + (f" (model {model})" if model else ""))
    return [*lines, _caption(summary)]


def print_summary(summary: dict[str, Any], command: str = "netbench run") -> None:
    """The summary on standard output: the table at a terminal, plain lines (:func:`summary_lines`) elsewhere."""
    out = make_console()
    if out.is_terminal:
        out.print(summary_table(summary, command))
        return
    for line in summary_lines(summary, command):
        out.print(line, highlight=False)
