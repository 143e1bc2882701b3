"""A sweep's report: measured vs predicted per point, the model's error, and the figures.

Everything is rebuilt from the sweep folder (summary.csv, sweep.json; runs/ for per-step error
bars and loss curves where it is still there), so ``netbench report`` gives the same report after
the fact. The model's figures are the predictions stored with each point (summary.csv's ``pred_``
columns); ``--calibration`` has them made again first (:mod:`netbench.orchestrator.sweep.repredict`).
report.md and a self-contained report.html are written side by side.

Errors are relative to the measurement: (predicted - measured) / measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from netbench import safe_files, untrusted
from netbench.reports.escape import for_markdown, markdown_code, printable
from netbench.reports.steps import step_series, step_time_spread
from netbench.reports.target import (
    LOSS_KINDS,
    SMOOTH,
    TargetGroup,
    loss_curves,
    rate_text,
    step_time_functions,
    time_to_target,
)
from netbench.rundir.summary import Metric, compared_column, error_column, predicted_column, report_metrics
from netbench.rundir.sweepdir import NUMERIC, SweepDoc, read_summary, read_sweep_json, run_path, sweep_doc
from netbench.units import format_bytes, format_rate
from netbench.untrusted import BadInput

__all__ = ["Accuracy", "ReportResult", "accuracy", "generate_report", "TARGETS"]

# The done-when: median |step error| <= 10 %, every point within 25 %, wire bytes within 3 %.
TARGETS = {"step_median": 0.10, "step_max": 0.25, "wire_max": 0.03}


@dataclass(frozen=True)
class Accuracy:
    """The model's error over the points that measured and predicted successfully."""

    points: int
    step_median_abs: float | None
    step_max_abs: float | None
    step_worst: str
    wire_max_abs: float | None
    wire_worst: str
    forecast_median_abs: float | None = (
        None  # the forecast's (codec from calibration) median |error| over the same points
    )
    replayed: int = 0  # points judged by their replay error (the others by the forecast's)
    links_max_abs: float | None = None  # the largest per-link-direction byte error (topology runs)
    bottlenecks: tuple[int, int] = (0, 0)  # points whose measurement shows the model's bottleneck, of those judged
    unfaithful: int = 0  # points measured and predicted but left out: their emulation was not faithful

    def meets_targets(self) -> bool:
        return (
            self.points > 0
            and self.step_median_abs <= TARGETS["step_median"]
            and self.step_max_abs <= TARGETS["step_max"]
            and self.wire_max_abs <= TARGETS["wire_max"]
        )


@dataclass(frozen=True)
class ReportResult:
    markdown: Path
    figures: list[Path]
    accuracy: Accuracy
    html: Path | None = None
    target: list[TargetGroup] = field(default_factory=list)

    def target_lines(self) -> list[str]:
        """Time to the target loss per replicator and rate (measured / model), and where the order changes."""
        return [line for group in self.target for line in _target_text(group)]

    def accuracy_lines(self) -> list[str]:
        a = self.accuracy
        if not a.points:
            return [f"model accuracy: {_nothing_judged(a)}"]
        return [
            f"step time: median |error| {a.step_median_abs:.1%}, max |error| {a.step_max_abs:.1%} "
            f"({a.step_worst}) over {a.points} points",
            f"wire bytes (tx and rx): max |error| {a.wire_max_abs:.1%} ({a.wire_worst})",
        ]


def _num(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column]) if column in frame else pd.Series(float("nan"), index=frame.index)


def with_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with the figures the report holds against the model, and err_* (relative, signed) where it has an error
    column.

    New columns only; the measured ones stay as measured. ``compared_<key>`` is the measured figure the model is
    judged against: for wire bytes the capture's MTU frames where a point was captured (above 2.5gbit, offloads on,
    the interface counters count GSO super-packets with one set of headers; the capture the frames a real wire
    carries, which is what the model predicts), else the key itself; a metric made of ``parts`` (encode + decode)
    gets its sum, measured and predicted.
    """
    out = frame.copy()
    for m in report_metrics():
        if m.parts:
            if all(p in out for p in m.parts):
                out[m.key] = sum(_num(out, p) for p in m.parts)
            pred = [_num(out, predicted_column(p)) for p in m.parts]
            out[predicted_column(m.key)] = pred[0] + sum(p.fillna(0) for p in pred[1:])  # no decode predicted: none
        if m.key not in out:
            continue
        measured = _num(out, m.key)
        if m.captured and m.captured in out:
            measured = _num(out, m.captured).fillna(measured)
        out[compared_column(m.key)] = measured
        if predicted_column(m.key) in out:
            out[error_column(m.key)] = (_num(out, predicted_column(m.key)) - measured) / measured
    return out


def accuracy(frame: pd.DataFrame) -> Accuracy:
    """Median and max |error| of step time; max |error| of wire bytes (either direction)."""
    step_model = predicted_column("step_time_s")
    judged = step_model in frame and error_column("step_time_s") in frame
    ok = frame[(frame["status"] == "ok") & frame[error_column("step_time_s")].notna()] if judged else frame.iloc[0:0]
    measured = len(ok)
    if "fidelity_ok" in ok:  # a point whose emulation was not faithful measures the host, not the cluster
        ok = ok[ok["fidelity_ok"].astype(str).str.lower() != "false"]
    if ok.empty:
        return Accuracy(0, None, None, "", None, "", unfaithful=measured)
    forecast = ok[error_column("step_time_s")].abs()
    replay = _num(ok, "replay_error").abs()
    step = replay.fillna(forecast)  # the network model judged on what the network did, where the run has a replay
    wires = [ok[error_column(m.key)].abs() for m in report_metrics() if m.captured and error_column(m.key) in ok]
    wire = pd.concat(wires, axis=1).max(axis=1) if wires else pd.Series(float("nan"), index=ok.index)
    wire_known = wire.notna().any()  # nan (never met) where no point has both wire bytes measured and predicted
    return Accuracy(
        points=len(ok),
        step_median_abs=float(step.median()),
        step_max_abs=float(step.max()),
        step_worst=str(ok.loc[step.idxmax(), "label"]),
        wire_max_abs=float(wire.max()) if wire_known else float("nan"),
        wire_worst=str(ok.loc[wire.idxmax(), "label"]) if wire_known else "",
        forecast_median_abs=float(forecast.median()),
        replayed=int(replay.notna().sum()),
        links_max_abs=float(_num(ok, "link_bytes_max_error").max())
        if _num(ok, "link_bytes_max_error").notna().any()
        else None,
        bottlenecks=_agreeing(ok),
    )


def _agreeing(frame: pd.DataFrame) -> tuple[int, int]:
    """(points whose measurement shows the model's bottleneck, points where it could be told)."""
    if "bottleneck_agrees" not in frame:
        return 0, 0
    told = frame["bottleneck_agrees"].map(lambda v: {"true": True, "false": False}.get(str(v).lower()))
    return int((told == True).sum()), int(told.notna().sum())  # noqa: E712 - a column of True/False/None


def _pct(x: Any) -> str:
    return "" if pd.isna(x) else f"{x:+.1%}"


def _share(x: float | None) -> str:
    """An absolute error as a percentage, unsigned ("-" where none)."""
    return "-" if x is None or pd.isna(x) else f"{x:.1%}"


def _sec(x: Any) -> str:
    return "" if pd.isna(x) else f"{x:.3f}"


def _bytes(x: Any) -> str:
    return "" if pd.isna(x) else format_bytes(float(x))


def _heading(m: Metric, view: str) -> str:
    """A points-table column's heading: ``step meas. (s)``, ``step model (s)``, ``error``; a metric's only column is
    just its name.
    """
    suffix = f" ({m.unit})" if m.unit == "s" else ""
    if view == "error":
        return "error" if len(m.report) > 1 else f"{m.short} error"
    if sum(v != "error" for v in m.report) == 1:
        return f"{m.short}{suffix}"
    return f"{m.short} {'meas.' if view == 'measured' else 'model'}{suffix}"


def _cell(row: dict[str, Any], m: Metric, view: str) -> str:
    if view == "error":
        return _pct(row.get(error_column(m.key), float("nan")))
    column = compared_column(m.key) if view == "measured" else predicted_column(m.key)
    value = row.get(column, float("nan"))
    return _sec(value) if m.unit == "s" else _bytes(value) if m.unit == "B" else f"{value:.3g}"


NETWORK_COLUMNS = {
    "replay_error": "step err (replay)",
    "forecast_error": "step err (forecast)",
    "bottleneck_model": "bottleneck (model)",
    "bottleneck_measured": "bottleneck (measured)",
    "bottleneck_agrees": "agree",
    "link_bytes_max_error": "link bytes max err",
}


def _network_cells(r: dict[str, Any], keys: list[str]) -> str:
    """The model's errors and what sets the step, by the model and by the counters, for the points that have them."""
    cells = []
    for key in keys:
        value = r.get(key)
        text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else value
        cells.append(f"{text:+.1%}" if isinstance(text, float) else for_markdown(str(text)))
    return "".join(f" {c} |" for c in cells)


def _points_table(frame: pd.DataFrame) -> str:
    """One row per point: the report columns of the metrics table (rundir/summary.py), the model's errors and the
    bottleneck where the points have them, then whether the emulation was faithful."""
    columns = [(m, view) for m in report_metrics() for view in m.report]
    extra = [k for k in NETWORK_COLUMNS if k in frame and frame[k].notna().any()]
    rows = [
        "| point | "
        + " | ".join(_heading(m, view) for m, view in columns)
        + " |"
        + "".join(f" {NETWORK_COLUMNS[k]} |" for k in extra)
        + " faithful |",
        "|---|" + "---:|" * len(columns) + "---|" * len(extra) + "---|",
    ]
    for r in frame.to_dict("records"):
        if r["status"] != "ok":
            rows.append(
                f"| {for_markdown(r['label'])} | failed: {for_markdown(r.get('reason', ''))} |"
                + " |" * (len(columns) + len(extra))
            )
            continue
        faithful = {"true": "yes", "false": f"no: {for_markdown(r.get('fidelity_reasons', ''))}"}.get(
            str(r.get("fidelity_ok", "")).lower(), ""
        )
        rows.append(
            f"| {for_markdown(r['label'])} | "
            + " | ".join(_cell(r, m, view) for m, view in columns)
            + " |"
            + _network_cells(r, extra)
            + f" {faithful} |"
        )
    return "\n".join(rows)


def _header(doc: SweepDoc, frame: pd.DataFrame) -> list[str]:
    """The sweep's name, description, grid, workload and model constants: every text from sweep.json escaped."""
    scn, calib = doc.scenario, doc.calibration
    grid, work = scn.grid, scn.workload
    compute = f"{work.compute_ms:g} ms" if work.compute_ms is not None else "?"
    what = (
        f"shapes {markdown_code(work.shapes)}, compute {compute} (sleep)"
        if work.kind == "shapes"
        else markdown_code(work.kind)
    )
    params = frame["params"].dropna() if "params" in frame else pd.Series(dtype=float)

    def listed(values: list) -> str:
        return for_markdown(", ".join(map(str, values)))

    lines = [f"# Sweep {markdown_code(scn.name)}", ""]
    if scn.description:
        lines += [for_markdown(scn.description, limit=8000), ""]
    lines += [
        f"- grid: bw {listed(grid.bw)}; replicators {listed(grid.replicator)}; nodes {listed(grid.nodes)}; "
        f"delay {listed(grid.delay)}",
        f"- workload: {what}" + (f", {int(params.iloc[0]):,} parameters" if not params.empty else ""),
        f"- per point: {for_markdown(scn.steps)} measured steps after {for_markdown(scn.warmup)} warm-up; "
        "times are the slowest node's median (its mean for replicators that communicate periodically), bytes "
        "per node per step; wire bytes are the capture's MTU frames where captured",
        f"- model constants: {for_markdown(calib.source or 'defaults')} ({for_markdown(calib.path)}; "
        f"{for_markdown(calib.created or 'not measured')})",
        f"- generated {datetime.now(UTC).isoformat(timespec='seconds')}",
        "",
    ]
    return lines


def _nothing_judged(acc: Accuracy) -> str:
    """Why a report judges the model by no point: none both measured and predicted, or none of those faithful."""
    if acc.unfaithful:
        return (
            f"no faithful point: {acc.unfaithful} measured and predicted, none with a faithful emulation "
            "(each point's fidelity says why)"
        )
    return "no point both measured and predicted"


def _accuracy_section(acc: Accuracy) -> list[str]:
    if not acc.points:
        text = _nothing_judged(acc)
        return ["## Model accuracy", "", f"{text[0].upper()}{text[1:]}.", ""]

    def mark(ok: bool) -> str:
        return "meets" if ok else "**misses**"

    return [
        "## Model accuracy",
        "",
        "The model predicts communication (link rates, delays and sharing along each ring hop's path, framing, "
        "per-message overhead). Step-time errors are the replay's where a point has one: the model fed that "
        "point's own "
        "measured local work (compute, apply, encode, decode of its slowest node); the forecast predicts encode/decode "
        f"from the calibration instead, as a user would be told before a run ({acc.replayed} of {acc.points} "
        "points replayed).",
        "",
        "| metric | value | target | |",
        "|---|---:|---:|---|",
        f"| step time, median abs. error | {acc.step_median_abs:.1%} | <= {TARGETS['step_median']:.0%} | "
        f"{mark(acc.step_median_abs <= TARGETS['step_median'])} |",
        f"| step time, max abs. error | {acc.step_max_abs:.1%} ({for_markdown(acc.step_worst)}) | <= "
        f"{TARGETS['step_max']:.0%} | {mark(acc.step_max_abs <= TARGETS['step_max'])} |",
        f"| wire bytes tx/rx, max abs. error | {acc.wire_max_abs:.1%} ({for_markdown(acc.wire_worst)}) | <= "
        f"{TARGETS['wire_max']:.0%} | {mark(acc.wire_max_abs <= TARGETS['wire_max'])} |",
        f"| step time, forecast median abs. error | {_share(acc.forecast_median_abs)} | | |",
        *(
            [
                f"| bytes per link direction, max abs. error | {_share(acc.links_max_abs)} | <= "
                f"{TARGETS['wire_max']:.0%} | "
                f"{mark(acc.links_max_abs <= TARGETS['wire_max'])} |"
            ]
            if acc.links_max_abs is not None
            else []
        ),
        *(
            [
                f"| bottleneck named by the model shown by the measurement | {acc.bottlenecks[0]} of "
                f"{acc.bottlenecks[1]} | all | "
                f"{mark(acc.bottlenecks[0] == acc.bottlenecks[1])} |"
            ]
            if acc.bottlenecks[1]
            else []
        ),
        f"| points | {acc.points} | | |",
        "",
    ]


def _time(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g} s"


def _projected(group: TargetGroup, cross) -> str:
    inside = min(group.rates) <= cross.rate_bps <= max(group.rates)
    return "" if inside else " (projected: outside the measured rates)"


def _target_text(group: TargetGroup) -> list[str]:
    """Plain lines for the terminal: one per replicator, then the crossovers."""
    lines = [f"time to loss {group.target:.3f} ({group.nodes} nodes, {group.delay_ms:g} ms), measured / model:"]
    for rep, k in group.steps_needed.items():
        cells = [
            f"{format_rate(r)} {_time(group.measured_s.get((rep, r)))} / {_time(group.projected_s.get((rep, r)))}"
            for r in group.rates
        ]
        lines.append(f"  {rep:<9} {'never' if k is None else f'{k} steps':>9}: " + "; ".join(cells))
    lines += [
        f"  order changes at {rate_text(c.rate_bps)}{_projected(group, c)}: {c.describe()}" for c in group.crossovers
    ]
    if not group.crossovers:
        lines.append(f"  no change of order between {rate_text(group.span[0])} and {rate_text(group.span[1])}")
    return lines


def _target_section(groups: list[TargetGroup], figures: list[Path], given: bool) -> list[str]:
    if not groups:
        return []
    lines = [
        "## Time to target loss",
        "",
        f"Loss is the mean over nodes, a trailing mean over {SMOOTH} steps; wall-clock is the cumulative step "
        "time at the slowest "
        "node (warm-up steps included). *Measured*: when each run reached the target; *model*: the steps it "
        "took x the model's "
        "step time at that rate, the steps of a phase that opens the run (1-bit Adam's dense warm-up) at the model's "
        "step there (how the same training would go on a link the sweep did not measure). The target is "
        + (
            "given with `--target-loss`."
            if given
            else "the worst replicator's final loss (`--target-loss` sets another)."
        ),
        "",
    ]
    for group in groups:
        lines += [
            f"Target loss **{group.target:.3f}**, {group.nodes} nodes, {group.delay_ms:g} ms one-way:",
            "",
            "| replicator | steps to target | "
            + " | ".join(f"{format_rate(r)} measured | {format_rate(r)} model" for r in group.rates)
            + " |",
            "|---|---:|" + "---:|---:|" * len(group.rates),
        ]
        for rep, k in group.steps_needed.items():
            cells = " | ".join(
                f"{_time(group.measured_s.get((rep, r)))} | {_time(group.projected_s.get((rep, r)))}"
                for r in group.rates
            )
            lines.append(f"| {for_markdown(rep)} | {'never' if k is None else k} | {cells} |")
        lines.append("")
        lines += [
            f"- the order changes at **{rate_text(c.rate_bps)}**{_projected(group, c)}: {for_markdown(c.describe())}"
            for c in group.crossovers
        ] or [f"- the order stays the same from {rate_text(group.span[0])} to {rate_text(group.span[1])} (model)"]
        lines.append("")
    lines += [_figure(f) for f in figures] + [""]
    return lines


def _figure(path: Path) -> str:
    """A figure netbench drew into the folder, by its file name (a fixed name: nothing from the folder's files)."""
    return f"![{path.stem}]({path.name})"


def _time_to_target(
    frame: pd.DataFrame, doc: dict[str, Any], folder: Path, target_loss: float | None
) -> tuple[list[TargetGroup], list[Path]]:
    """Time-to-target groups and figures, for sweeps of a workload whose loss means something and whose runs/ remain."""
    from netbench.reports.target_figures import (  # late: keeps matplotlib off this module's import
        loss_vs_time,
        time_to_target_vs_rate,
    )  # late: keeps matplotlib off this module's import

    if sweep_doc(doc, folder).scenario.workload.kind not in LOSS_KINDS or frame.empty:
        return [], []
    curves = loss_curves(frame, folder)
    if not curves:
        return [], []
    groups = time_to_target(curves, step_time_functions(frame), target_loss)
    figures = []
    for group in groups:
        suffix = "" if len(groups) == 1 else f"_{group.nodes}n_{group.delay_ms:g}ms"
        figures.append(loss_vs_time(group, folder / f"loss_vs_time{suffix}.png"))
        figures.append(time_to_target_vs_rate(group, folder / f"time_to_target{suffix}.png"))
    return groups, figures


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as the figures and tables show it: every numeric column summary.csv has (empty where a summary lacks
    one), and labels, replicators and reasons on one line without control characters.
    """
    texts = [c for c in ("label", "replicator", "reason", "fidelity_reasons") if c in frame]
    missing = {c: float("nan") for c in NUMERIC if c not in frame}
    return frame.assign(**missing, **{c: frame[c].map(lambda text: printable(text, 2000)) for c in texts})


def _no_folder_where_a_file_goes(folder: Path) -> None:
    """BadInput where report.md, report.html or a figure's name (``*.png``) is a folder, before anything is drawn: a
    rename onto it would fail only after the figures before it were written."""
    for path in sorted([folder / "report.md", folder / "report.html", *folder.glob("*.png")]):
        if path.is_dir() and not path.is_symlink():
            raise BadInput(f"{untrusted.shown_path(path)}: a folder where the report writes a file")


def _read_every_run(frame: pd.DataFrame, folder: Path) -> None:
    """Every run's steps.csv read (and kept for the figures: read once per command) before anything is drawn, so a
    damaged one is refused before a figure is written."""
    for run_dir in frame["run_dir"] if "run_dir" in frame else ():
        path = run_path(folder, run_dir)
        step_time_spread(path)
        step_series(path)


def generate_report(folder: Path, target_loss: float | None = None) -> ReportResult:
    """Write report.md, report.html and the figures into ``folder`` from its summary.csv and sweep.json (and runs/).

    Every file is written under a fresh name and renamed into place (:mod:`netbench.safe_files`);
    report.html inlines only the figures drawn here. BadInput when the folder's files are not what
    a sweep writes.
    """
    from netbench.reports.figure_file import drawn_beside  # late: keeps matplotlib off this module's import
    from netbench.reports.plots import make_figures  # late: keeps matplotlib off this module's import
    from netbench.reports.timeline import (  # late: keeps matplotlib off this module's import
        TIMELINES,
        draw_timelines,
        sweep_section,
        with_traces,
    )  # late: keeps matplotlib off this module's import

    doc = read_sweep_json(folder)
    typed = sweep_doc(doc, folder)
    frame = with_errors(_shown(read_summary(folder)))
    _no_folder_where_a_file_goes(folder)
    _read_every_run(frame, folder)
    acc = accuracy(frame) if not frame.empty else Accuracy(0, None, None, "", None, "")
    # each point's median step: two thirds drawn in a second process while this one draws the sweep's figures, then
    # the rest; the timeline section then finds them drawn
    points = with_traces(frame, folder)[:TIMELINES]
    aside = drawn_beside(draw_timelines, folder, points[: 2 * len(points) // 3])
    try:
        figures = make_figures(frame, folder) if not frame.empty else []
        groups, target_figures = _time_to_target(frame, doc, folder, target_loss)
        here = draw_timelines(folder, points[2 * len(points) // 3 :])
    finally:
        drawn = aside()
    timelines, timeline_figures = sweep_section(frame, folder, drawn={**drawn, **here}) if not frame.empty else ([], [])
    lines = _header(typed, frame) + _accuracy_section(acc)
    lines += _target_section(groups, target_figures, target_loss is not None)
    lines += ["## Figures", ""] + [_figure(f) for f in figures] + [""]
    lines += timelines + ["## Points", "", _points_table(frame), ""]
    path = folder / "report.md"
    text = "\n".join(lines)
    safe_files.write_text(path, text)
    inlined = [f.name for f in figures + target_figures + timeline_figures]
    from netbench.reports.html import write_html  # late: markdown-it, kept off every command's start-up

    page = write_html(path, text, inlined, f"netbench sweep {printable(typed.scenario.name)}")
    return ReportResult(path, figures + target_figures, acc, page, groups)
