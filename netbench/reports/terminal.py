"""A run's summary as a terminal table: the metrics table's rows, measured beside the model.

`netbench run`, `exec`, `worker` and `report RUN_DIR` all print this one table; its rows,
labels and units are :mod:`netbench.rundir.summary`'s, so it lists what summary.csv and
report.md list, under the same names. Every text that comes from a run (its id, replicator,
status, fidelity reasons, the model's source) is escaped for rich markup and stripped of control
characters (:mod:`netbench.reports.escape`): a ``[/]`` or an escape sequence prints as text.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from netbench.reports.escape import for_terminal
from netbench.rundir.summary import Metric, terminal_metrics
from netbench.units import format_bytes, format_rate

__all__ = ["summary_table", "shown", "for_terminal"]


def shown(value: float, unit: str) -> str:
    """One value as the terminal prints it: seconds to 0.1 ms, bytes in binary units, others to 3 figures."""
    return f"{value:.4f} s" if unit == "s" else format_bytes(value) if unit == "B" else f"{value:.3g}{unit}"


def _label(m: Metric) -> str:
    return f"  {m.label}" if m.part_of_step or m.nested else m.label


def _title(summary: dict[str, Any], command: str) -> str:
    workers = f" x {summary['gpus_per_node']} workers" if summary.get("gpus_per_node") else ""
    rate = format_rate(summary["bw_bps"]) if summary.get("bw_bps") else "link rate unknown"
    return (
        f"{for_terminal(command)} {for_terminal(summary['run_id'])}: {for_terminal(summary['replicator'])}, "
        f"{summary['nodes']} nodes{workers}, "
        f"{rate}, delay {summary['delay_ms']:g} ms ({for_terminal(summary['status'])})"
    )


def summary_table(summary: dict[str, Any], command: str = "netbench run") -> Table:
    """Median (mean, for periodic replicators) step time and its breakdown, bytes per step per node (payload vs
    wire).
    """
    statistic = for_terminal(summary.get("statistic") or "median")
    table = Table(
        caption=f"measured: per-node {statistic} over the steps after warm-up; "
        "times at the slowest node, bytes the median node",
        title=_title(summary, command),
    )
    table.add_column("metric")
    table.add_column(f"measured ({statistic})", justify="right")
    predicted = summary.get("predicted", {})
    if predicted:
        table.add_column("model", justify="right")
    for m in terminal_metrics():
        value = summary.get(m.key)
        if value is None:
            continue
        cells = [_label(m), shown(value, m.unit)]
        if predicted:
            p = predicted.get(m.key)
            cells.append("" if p is None else shown(p, m.unit))
        table.add_row(*cells)
    if summary.get("first_loss") is not None:
        row = ["loss (first -> last)", f"{summary['first_loss']:.3f} -> {summary['final_loss']:.3f}"]
        table.add_row(*(row + [""] if predicted else row))
    fidelity = summary.get("fidelity")
    if fidelity is not None:
        dilated = f" (dilated x{fidelity['dilation']:.3g})" if fidelity.get("dilation", 1) != 1 else ""
        row = [
            "faithful emulation",
            ("yes" if fidelity["ok"] else "NO: " + for_terminal("; ".join(fidelity["reasons"]))) + dilated,
        ]
        table.add_row(*(row + [""] if predicted else row))
    calib = predicted.get("calibration") if predicted else None
    if isinstance(calib, dict):
        row = [
            "model constants",
            for_terminal(f"{calib.get('source')} on {calib.get('host') or 'this host'} ({calib.get('digest')})"),
        ]
        table.add_row(*(row + [""]))
    return table
