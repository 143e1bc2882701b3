"""A sweep's figures (matplotlib, Agg): measured points against the model's lines, made to be read.

* ``time_vs_bandwidth.png`` -- step time vs link rate, log-log, one panel per replicator (shared
  axes); marker = node count, line style = delay, bars = the middle half of the steps;
* ``measured_vs_predicted.png`` -- one point per run against the y = x line and a +-10 % band;
* ``step_breakdown.png`` -- each point's step split into compute, encode, communicate, decode, apply;
* ``bytes_per_step.png`` -- wire bytes per node per step by replicator, measured vs model;
* ``scaling_nodes.png`` -- how all-gather and all-reduce traffic and communication time grow with N.

Colours are the replicator's everywhere (style.py). Model lines join the predictions stored with
each point (summary.csv's ``pred_`` columns, made from the point's own measured local work), so a
line passes through its points exactly when the model is right. Error bars need the runs' steps.csv (runs/); a
folder without them (committed reports) draws points only.

A figure's size does not grow with the sweep: panels are one per replicator, the step breakdown draws at most
MAX_BARS bars (points grouped, their medians, beyond that), legends at most MAX_LEGEND entries, and the bytes
figure at most MAX_NODE_COUNTS node counts.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from netbench.reports.drawing import Line2D, Patch, matplotlib, plt
from netbench.reports.figure_file import save
from netbench.reports.steps import step_time_spread
from netbench.reports.style import collective, color, delay_style, node_marker
from netbench.reports.target import STEP_MODEL, loggable
from netbench.rundir.summary import compared_column, predicted_column, step_parts
from netbench.rundir.sweepdir import run_path
from netbench.topology.link import MAX_RATE_BPS, MIN_RATE_BPS
from netbench.units import format_rate

__all__ = ["make_figures", "with_step_spread", "label_rate", "label_seconds", "save", "MAX_BARS"]

MAX_BARS = 60  # bars of the step breakdown
MAX_LEGEND = 12  # entries of a legend
MAX_NODE_COUNTS = 8  # node counts side by side in the bytes figure


def _predicted(frame: pd.DataFrame, column: str) -> pd.Series:
    """A stored prediction per point (NaN where the point has none, or the summary lacks the column)."""
    return pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(np.nan, index=frame.index)


def has_predictions(frame: pd.DataFrame) -> bool:
    """Whether any successful point carries the model's step time."""
    return bool(_predicted(_ok(frame), STEP_MODEL).notna().any())


WIRE_TX = "wire_tx_bytes_per_step"


def _wire_tx(frame: pd.DataFrame) -> str:
    """The column of each point's wire bytes sent: the capture's MTU frames where captured (report.with_errors), else
    the counters'.
    """
    return compared_column(WIRE_TX) if compared_column(WIRE_TX) in frame else WIRE_TX


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["step_time_s"].notna()]


def with_step_spread(frame: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """Add step_q1_s / step_q3_s (quartiles of per-step time at the slowest node) where runs/ still holds the steps."""

    out = frame.copy()
    q1, q3 = [], []
    for run_dir in out["run_dir"] if "run_dir" in out else [""] * len(out):
        s = step_time_spread(run_path(folder, run_dir))
        q1.append(s.q1 if s else math.nan)
        q3.append(s.q3 if s else math.nan)
    return out.assign(step_q1_s=q1, step_q3_s=q3)


def label_rate(ax) -> None:
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: format_rate(v)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def label_seconds(ax, axis: str = "y") -> None:
    """Log axis ticked at 1-2-5 steps in plain seconds (0.05, 0.1, 0.2 ...), not bare powers of ten."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _yerr(group: pd.DataFrame) -> np.ndarray | None:
    """Asymmetric error bars from the per-step quartiles (None when no point of the group has steps)."""
    if "step_q1_s" not in group or group["step_q1_s"].isna().all():
        return None
    y = group["step_time_s"].to_numpy(float)
    lo = np.clip(y - group["step_q1_s"].to_numpy(float), 0, None)
    hi = np.clip(group["step_q3_s"].to_numpy(float) - y, 0, None)
    return np.nan_to_num(np.vstack([lo, hi]))


def _panels(n: int, width: float = 3.6, height: float = 3.0, **kw):
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols + 0.6, height * rows + 1.0), squeeze=False, layout="constrained", **kw
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _bottom_labels(axes: list, label: str) -> None:
    """x label and tick labels on every panel with no panel below it (shared axes hide them elsewhere)."""
    cols = min(len(axes), 4)
    for i, ax in enumerate(axes):
        if i + cols >= len(axes):
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel(label)


def _node_handles(node_counts: list[int]) -> list:
    """One legend entry per node marker: its node counts (markers repeat after len(NODE_MARKERS) counts)."""
    by_marker: dict[str, list[int]] = {}
    for n in node_counts:
        by_marker.setdefault(node_marker(n, node_counts), []).append(n)
    return [
        Line2D([], [], ls="", marker=m, color="#444", label=_few_counts(counts) + " nodes")
        for m, counts in by_marker.items()
    ]


def _few_counts(counts: list[int], shown: int = 3) -> str:
    return ", ".join(map(str, counts[:shown])) + (f" (+{len(counts) - shown} more)" if len(counts) > shown else "")


def _bounded(handles: list) -> list:
    """At most MAX_LEGEND entries: the rest named by their number."""
    if len(handles) <= MAX_LEGEND:
        return handles
    rest = Line2D([], [], ls="", label=f"... and {len(handles) - MAX_LEGEND + 1} more")
    return handles[: MAX_LEGEND - 1] + [rest]


def _key_handles(node_counts: list[int], delays: list[float], model: bool, errorbars: bool) -> list:
    """Legend entries that explain the encoding shared by all panels (colour is named by each panel's title)."""
    handles = _node_handles(node_counts)
    for d in delays[:4]:
        filled = d == delays[0]
        what = ("filled" if filled else "hollow") + (f", model {'solid' if filled else 'dashed'}" if model else "")
        handles.append(
            Line2D(
                [],
                [],
                ls=delay_style(d, delays) if model else "",
                marker="o",
                color="#444",
                mfc="#444" if filled else "white",
                label=f"{d:g} ms one-way ({what})",
            )
        )
    if len(delays) > 4:
        handles.append(Line2D([], [], ls="", label=f"... {len(delays) - 4} more delays (line styles repeat)"))
    if errorbars:
        handles.append(Line2D([], [], ls="", marker="|", ms=12, color="#444", label="bar: middle half of the steps"))
    return _bounded(handles)


def time_vs_bandwidth(frame: pd.DataFrame, path: Path) -> Path:
    """Step time vs link rate, log-log, one panel per replicator with shared axes."""
    ok = _ok(frame)
    model = has_predictions(frame)
    reps = list(dict.fromkeys(ok["replicator"]))
    node_counts = sorted(int(n) for n in ok["nodes"].unique())
    delays = sorted(float(d) for d in ok["delay_ms"].unique())
    fig, axes = _panels(len(reps), sharex=True, sharey=True)
    lo, hi = ok["bw_bps"].min(), ok["bw_bps"].max()
    span = (max(MIN_RATE_BPS, lo / 1.4), min(MAX_RATE_BPS, hi * 1.4))
    for ax, rep in zip(axes, reps):
        c = color(rep)
        for (nodes, delay_ms), group in ok[ok["replicator"] == rep].groupby(["nodes", "delay_ms"]):
            group = group.sort_values("bw_bps")
            marker = node_marker(int(nodes), node_counts)
            filled = delay_ms == delays[0]
            ax.errorbar(
                group["bw_bps"],
                group["step_time_s"],
                yerr=_yerr(group),
                fmt=marker,
                color=c,
                ms=6,
                mfc=c if filled else "white",
                capsize=3,
                zorder=3,
            )
            predicted = group.assign(model=_predicted(group, STEP_MODEL)).dropna(subset=["model"])
            ax.plot(
                predicted["bw_bps"],
                predicted["model"],
                delay_style(delay_ms, delays),
                color=c,
                lw=1.4,
                alpha=0.75,
                marker="_" if len(predicted) == 1 else None,
                ms=14,
            )
        ax.set_title(f"{rep} ({collective(rep)})", color=c, fontsize=10)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*span)
        label_rate(ax)
        label_seconds(ax)
        ax.grid(True, which="both", alpha=0.25)
    _bottom_labels(axes, "link rate (each direction)")
    fig.supylabel("time per step (s)")
    fig.suptitle("Time per step vs link rate: points measured, lines the model", fontsize=11)
    bars = "step_q1_s" in ok and bool(ok["step_q1_s"].notna().any())
    fig.legend(
        handles=_key_handles(node_counts, delays, model, bars),
        loc="outside lower center",
        ncols=5,
        fontsize=8,
        frameon=False,
    )
    return save(fig, path)


def measured_vs_predicted(frame: pd.DataFrame, path: Path) -> Path:
    """One point per run: measured step time against the model's, with y = x and a +-10 % band (log axes: a point
    the model gave a zero step has no place on them and is left out)."""
    ok = _ok(frame)
    ok = ok[loggable(ok[STEP_MODEL])] if STEP_MODEL in ok else ok.iloc[0:0]  # summary.csv's reader: measured > 0
    node_counts = sorted(int(n) for n in ok["nodes"].unique()) or [2]
    fig, ax = plt.subplots(figsize=(6.4, 5.0), layout="constrained")
    values = pd.concat([ok["step_time_s"], ok[STEP_MODEL]]) if not ok.empty else pd.Series([0.01, 1.0])
    lo, hi = float(values.min()) / 1.5, float(values.max()) * 1.5
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line * 0.9, line * 1.1, color="#cccccc", alpha=0.6, lw=0, label="+-10 % of the model")
    ax.plot(line, line, "-", color="#555", lw=1, label="measured = model")
    markers = ok["nodes"].map(lambda n: node_marker(int(n), node_counts))
    for (rep, marker), group in ok.groupby([ok["replicator"], markers], sort=False):
        ax.errorbar(
            group[STEP_MODEL],
            group["step_time_s"],
            yerr=_yerr(group),
            fmt=marker,
            color=color(rep),
            ms=6,
            capsize=2,
            alpha=0.9,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    label_seconds(ax, "x")
    label_seconds(ax, "y")
    ax.set_xlabel("model's step time (s)")
    ax.set_ylabel("measured step time (s)")
    ax.set_title("Measured vs predicted step time, one point per run", fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    reps = list(dict.fromkeys(ok["replicator"]))
    handles = ax.get_legend_handles_labels()[0] + [Patch(color=color(r), label=r) for r in reps]
    fig.legend(
        handles=_bounded(handles + _node_handles(node_counts)), loc="outside right upper", fontsize=8, frameon=False
    )
    return save(fig, path)


# one colour per part of the step, in the metrics table's order (compute, encode, communicate, decode, apply)
PART_COLORS = ("#bdbdbd", "#fdb462", "#80b1d3", "#b3de69", "#fb8072")
PARTS = tuple((m.key, m.label, c) for m, c in zip(step_parts(), PART_COLORS, strict=True))


def _breakdown_rows(ok: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The bars: one per point, or, beyond MAX_BARS points, one per group of points (replicator, nodes and rate; or
    coarser) with the group's median step and parts; and what a bar is."""
    if len(ok) <= MAX_BARS:
        return ok, "each point"
    parts = [column for column, _, _ in PARTS if column in ok]
    numbers = ok.assign(**{c: pd.to_numeric(ok[c], errors="coerce") for c in parts})
    for keys in (["replicator", "nodes", "bw_bps"], ["replicator", "nodes"], ["replicator"]):
        groups = numbers.groupby(keys, sort=False)
        if groups.ngroups <= MAX_BARS:
            rows = groups[["step_time_s", *parts]].median().reset_index()
            counts = groups.size().to_numpy()
            rows["label"] = [
                " ".join(
                    format_rate(v) if k == "bw_bps" else f"{v}n" if k == "nodes" else str(v) for k, v in zip(keys, r)
                )
                + f" ({n} points)"
                for r, n in zip(rows[keys].itertuples(index=False), counts)
            ]
            return rows, "the median of each " + ", ".join(k.removesuffix("_bps") for k in keys)
    rows = numbers[["replicator", "step_time_s", *parts]].head(MAX_BARS)  # more replicators than bars: the first
    return rows.assign(label=numbers["label"].head(MAX_BARS)), f"the first {MAX_BARS} points"


def step_breakdown(frame: pd.DataFrame, path: Path) -> Path:
    """Each point's step as a stacked bar of its parts, as shares of the step (the total is written beside it); at
    most MAX_BARS bars (points grouped beyond that)."""
    rows, what = _breakdown_rows(_ok(frame))
    ok = rows.iloc[::-1]  # first point at the top
    labels = ok["label"].tolist()
    fig, ax = plt.subplots(figsize=(8.0, 1.4 + 0.24 * len(ok)), layout="constrained")
    y = np.arange(len(ok))
    step = ok["step_time_s"].to_numpy(float)
    left = np.zeros(len(ok))
    for column, name, c in PARTS:
        part = (
            pd.to_numeric(ok[column], errors="coerce").fillna(0).to_numpy(float) if column in ok else np.zeros(len(ok))
        )
        share = part / step
        ax.barh(y, share, left=left, color=c, height=0.75, label=name)
        left += share
    rest = np.clip(1 - left, 0, None)
    ax.barh(
        y,
        rest,
        left=left,
        color="white",
        edgecolor="#999",
        hatch="///",
        height=0.75,
        lw=0.4,
        label="other (waits, bookkeeping)",
    )
    end = np.maximum(left + rest, 1.0)
    for yi, x, total in zip(y, end, step):
        ax.text(x + 0.01, yi, f"{total:.3g} s", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_ylim(-0.6, len(ok) - 0.4)
    for tick, rep in zip(ax.get_yticklabels(), ok["replicator"]):
        tick.set_color(color(rep))
    ax.set_xlim(0, max(1.15, float(end.max()) + 0.15))
    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.set_xlabel("share of the step (slowest node's median of each part; total step time at the right)")
    ax.set_title("Where each step's time goes" + ("" if what == "each point" else f" ({what})"), fontsize=11)
    fig.legend(loc="outside upper center", ncols=6, fontsize=8, frameon=False)
    ax.grid(True, axis="x", alpha=0.25)
    return save(fig, path)


def bytes_per_step(frame: pd.DataFrame, path: Path) -> Path:
    """Wire bytes each node sends per step, by replicator and node count: measured bars, model ticks."""
    ok = _ok(frame)
    groups = (
        ok.groupby(["replicator", "nodes"], sort=False)
        .agg(measured=(_wire_tx(ok), "median"), model=(predicted_column(WIRE_TX), "median"))
        .reset_index()
    )
    reps = list(dict.fromkeys(groups["replicator"]))
    every = sorted(groups["nodes"].unique())
    node_counts = [every[round(i)] for i in np.linspace(0, len(every) - 1, min(len(every), MAX_NODE_COUNTS))]
    width = 0.8 / len(node_counts)
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(reps), 4.4), layout="constrained")
    for j, nodes in enumerate(node_counts):
        for i, rep in enumerate(reps):
            row = groups[(groups["replicator"] == rep) & (groups["nodes"] == nodes)]
            if row.empty:
                continue
            x = i - 0.4 + width * (j + 0.5)
            r = row.iloc[0]
            ax.bar(
                x,
                r["measured"],
                width * 0.9,
                color=color(rep),
                alpha=0.45 + 0.5 * j / (len(node_counts) - 1) if len(node_counts) > 1 else 0.9,
            )
            if pd.notna(r["model"]):
                ax.plot([x - width * 0.45, x + width * 0.45], [r["model"]] * 2, color="black", lw=2)
            ax.text(
                x,
                r["measured"] * 1.15,
                f"{nodes}n\n{_short_bytes(r['measured'])}",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks(range(len(reps)), [f"{r}\n({collective(r)})" for r in reps], fontsize=8)
    for tick, rep in zip(ax.get_xticklabels(), reps):
        tick.set_color(color(rep))
    ax.set_yscale("log")
    ax.set_ylabel("wire bytes sent per node per step")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)
    shown = "" if len(node_counts) == len(every) else f"; {len(node_counts)} of {len(every)} node counts"
    ax.set_title(f"Bytes per step: bars measured (median over rates), ticks the model{shown}", fontsize=11)
    shades = [
        Patch(color="#888", alpha=0.45, label="fewest nodes (lighter)"),
        Patch(color="#888", alpha=0.95, label="most nodes (darker)"),
    ]
    fig.legend(
        handles=[Line2D([], [], color="black", lw=2, label="model")] + (shades if len(node_counts) > 1 else []),
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    ax.grid(True, axis="y", which="both", alpha=0.25)
    return save(fig, path)


def _short_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def scaling_nodes(frame: pd.DataFrame, path: Path) -> Path:
    """All-gather vs all-reduce: wire bytes per payload byte, and communication time, vs node count."""
    ok = _ok(frame)
    model = has_predictions(frame)
    measured_nodes = sorted(ok["nodes"].unique())
    span = list(range(2, max(8, max(measured_nodes)) + 1))
    slowest = ok["bw_bps"].min()
    delay0 = ok["delay_ms"].min()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    for rep, group in ok.groupby("replicator", sort=False):
        c = color(rep)
        per = group.groupby("nodes").agg(wire=(_wire_tx(group), "median"), payload=("payload_bytes_per_step", "median"))
        per = per[per["payload"] > 0]
        left.plot(per.index, per["wire"] / per["payload"], "o", color=c, ms=7, label=f"{rep} ({collective(rep)})")
        at = group[(group["bw_bps"] == slowest) & (group["delay_ms"] == delay0)]
        right.plot(at["nodes"], at["comm_time_s"], "o", color=c, ms=7)
        if model:
            tx, payload = (
                _predicted(group, predicted_column(WIRE_TX)),
                _predicted(group, predicted_column("payload_bytes_per_step")),
            )
            ratio = (tx / payload.where(payload > 0)).groupby(group["nodes"]).median().dropna()
            left.plot(ratio.index, ratio, "-", color=c, alpha=0.8)
            comm = _predicted(at, predicted_column("comm_time_s")).groupby(at["nodes"]).median().dropna()
            right.plot(comm.index, comm, "-", color=c, alpha=0.8)
    left.set_ylabel("wire bytes sent per payload byte handed")
    left.set_title("Traffic per node: all-gather grows with N, all-reduce stays < 2x", fontsize=10)
    right.set_ylabel("communication time per step (s)")
    right.set_yscale("log")
    label_seconds(right)
    right.set_title(f"Communication time at {format_rate(slowest)}, {delay0:g} ms", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("nodes")
        if len(span) <= 16:
            ax.set_xticks(span)
        else:
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(12, integer=True))
        ax.grid(True, which="both", alpha=0.25)
    handles, labels = left.get_legend_handles_labels()
    if model:
        handles.append(Line2D([], [], color="#444", label="model (line)"))
    fig.legend(handles=_bounded(handles), loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return save(fig, path)


def make_figures(frame: pd.DataFrame, folder: Path) -> list[Path]:
    """Every figure this sweep's points support (nothing when no point succeeded)."""
    if _ok(frame).empty:
        return []
    frame = with_step_spread(frame, folder)
    figures = [time_vs_bandwidth(frame, folder / "time_vs_bandwidth.png")]
    if STEP_MODEL in frame and frame[STEP_MODEL].notna().any():
        figures.append(measured_vs_predicted(frame, folder / "measured_vs_predicted.png"))
    figures += [
        step_breakdown(frame, folder / "step_breakdown.png"),
        bytes_per_step(frame, folder / "bytes_per_step.png"),
    ]
    if _ok(frame)["nodes"].nunique() > 1 or has_predictions(frame):
        figures.append(scaling_nodes(frame, folder / "scaling_nodes.png"))
    return figures
