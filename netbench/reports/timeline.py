"""A run's timeline figure: the median step and the slowest, as a Gantt chart of the model, the ranks and the links.

Drawn from the run's trace.json (:mod:`netbench.trace.build`). Each panel is one step, its time
axis starting at rank 0's start of it: the model's predicted step on top, then each rank's
phases (compute, encode, communicate, wait, decode, apply; other: untimed) with its buckets'
collectives as thin bars below, then each link's throughput as a filled line scaled to the link's
peak. Times are divided by the run's time dilation k, so they read as the configuration reported.

trace.json is read as untrusted input (:mod:`netbench.untrusted`), and each event is kept only where its fields
have the types and ranges netbench writes (:func:`usable_events`): a crafted trace draws less, never fails.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from netbench import untrusted
from netbench.reports.drawing import Patch, plt
from netbench.reports.figure_file import save
from netbench.rundir.sweepdir import run_path
from netbench.trace import events as ev
from netbench.trace.build import trace_path

COLORS = {
    "compute": "#4c72b0",
    "encode": "#dd8452",
    "communicate": "#c44e52",
    "wait": "#bbbbbb",
    "decode": "#55a868",
    "apply": "#8172b3",
    "other": "#eeeeee",
    "collective": "#c44e52",
}
MAX_TIME_US = 1e15  # 30 years of microseconds: no trace netbench writes comes near
MAX_LANE = 10_000  # a rank's collectives in flight together (trace tids)
MAX_ROWS = 128  # ranks drawn in one panel; links likewise: a figure's size stays bounded
MAX_DILATION = 1000.0


def load_trace(run_dir: Path) -> dict[str, Any] | None:
    """The run's trace (its usable events, :func:`usable_events`, and its dilation k), or None where it has none;
    BadInput where trace.json is not a trace (a link, a FIFO, too large, not JSON of an object)."""
    path = trace_path(run_dir)
    doc = untrusted.read_json(path, untrusted.TRACE) if path.exists() or path.is_symlink() else None
    if doc is None:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise untrusted.BadInput(f"{untrusted.shown_path(path)}: not a trace (no traceEvents list)")
    other = doc.get("otherData")
    k = other.get("dilation") if isinstance(other, dict) else None
    usable_k = _number(k) is not None and 0 < k <= MAX_DILATION
    return {"events": usable_events(doc["traceEvents"]), "dilation": float(k) if usable_k else 1.0}


def _number(value: Any, low: float = -MAX_TIME_US, high: float = MAX_TIME_US) -> float | None:
    """``value`` as a float where it is a finite JSON number within [low, high] (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if low <= value <= high else None


def _whole(value: Any, low: int, high: int) -> int | None:
    return value if type(value) is int and low <= value <= high else None


def usable_events(raw: list[Any]) -> list[dict[str, Any]]:
    """The duration (X) and counter (C) events whose fields have the types and ranges netbench writes, normalised;
    the rest dropped: a steps's ``args.step`` a whole number, times finite, a counter's ``Mbit/s`` a number."""
    out = []
    for e in raw:
        if not isinstance(e, dict) or e.get("ph") not in ("X", "C"):
            continue
        pid, ts, args = _whole(e.get("pid"), 0, 1 << 20), _number(e.get("ts")), e.get("args", {})
        name, cat = e.get("name", ""), e.get("cat", "")
        if (
            pid is None
            or ts is None
            or not isinstance(args, dict)
            or not isinstance(name, str)
            or not isinstance(cat, str)
        ):
            continue
        clean = {"ph": e["ph"], "pid": pid, "ts": ts, "name": name, "cat": cat}
        if e["ph"] == "C":
            rate = _number(args.get("Mbit/s"), 0.0)
            if rate is not None:
                out.append({**clean, "args": {"Mbit/s": rate}})
            continue
        dur, tid = _number(e.get("dur"), 0.0), _whole(e.get("tid", 0), 0, MAX_LANE)
        step = _whole(args.get("step"), -(1 << 62), 1 << 62) if "step" in args else None
        if dur is None or tid is None or ("step" in args and step is None) or (cat == "step" and step is None):
            continue
        out.append({**clean, "dur": dur, "tid": tid, "args": {"step": step, "warmup": bool(args.get("warmup"))}})
    return out


def _steps(events: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, Any]]]:
    """step -> rank -> that rank's step event, measured steps only."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] == "step" and not e["args"]["warmup"]:
            out.setdefault(e["args"]["step"], {})[e["pid"] - ev.RANK_PID] = e
    return out


def median_and_slowest(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(title, step) of the median step and the slowest, by the slowest rank's step time."""
    steps = _steps(events)
    if not steps:
        return []
    by_time = sorted(steps, key=lambda s: max(e["dur"] for e in steps[s].values()))
    median, slowest = by_time[len(by_time) // 2], by_time[-1]
    return [("median step", median)] + ([("slowest step", slowest)] if slowest != median else [])


def step_rows(
    events: list[dict[str, Any]], step: int, t0: float, t1: float
) -> list[tuple[str, list[tuple[float, float, str]]]]:
    """Gantt rows of one step: (label, [(start, duration, phase)]) for the model and every rank."""
    rows = []
    model = [e for e in events if e["ph"] == "X" and e["pid"] == ev.MODEL_PID and e["name"] != "step (model)"]
    if model:
        m0 = min(e["ts"] for e in model)
        rows.append(("model", [(e["ts"] - m0, e["dur"], e["name"]) for e in model]))
    ranks = sorted({e["pid"] for e in events if e["ph"] == "X" and ev.RANK_PID <= e["pid"] < ev.LINKS_PID})
    for pid in ranks[:MAX_ROWS]:
        mine = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["args"]["step"] == step]
        rows.append(
            (
                f"rank {pid - ev.RANK_PID}",
                [(e["ts"] - t0, e["dur"], e["name"]) for e in mine if e["tid"] == 1 and e["cat"] != "step"],
            )
        )
        buckets = [(e["ts"] - t0, e["dur"], f"collective {e['tid'] - 2}") for e in mine if e["tid"] > 1]
        if buckets:
            rows.append((f"rank {pid - ev.RANK_PID} buckets", buckets))
    return rows


def link_samples(events: list[dict[str, Any]], t0: float, t1: float) -> dict[str, list[tuple[float, float]]]:
    """Each link counter's samples inside [t0, t1] (and the one before, so the line starts at t0)."""
    tracks: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "C" and e["pid"] == ev.LINKS_PID:
            tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["Mbit/s"]))
    out = {}
    for name, samples in sorted(tracks.items())[:MAX_ROWS]:
        samples.sort()
        before = [s for s in samples if s[0] <= t0][-1:]
        inside = [(max(t, t0) - t0, v) for t, v in before + [s for s in samples if t0 < s[0] <= t1]]
        if inside:
            out[name.replace(" (Mbit/s)", "")] = inside + [(t1 - t0, inside[-1][1])]
    return out


def _panel(ax, events: list[dict[str, Any]], step: int, title: str, k: float) -> None:
    ranks = _steps(events)[step]
    t0 = ranks[min(ranks)]["ts"]
    t1 = max(e["ts"] + e["dur"] for e in ranks.values())
    rows, links = step_rows(events, step, t0, t1), link_samples(events, t0, t1)
    labels = [label for label, _ in rows] + list(links)
    scale = 1e-3 / k  # trace microseconds -> milliseconds of the configuration as reported
    for y, (label, bars) in enumerate(rows):
        if label.endswith("buckets"):  # one thin lane per bucket row of the trace: collectives in flight together
            lanes = 1 + max(int(name.split()[1]) for _, _, name in bars)
            by_lane: dict[int, list[tuple[float, float]]] = {}
            for start, dur, name in bars:
                by_lane.setdefault(int(name.split()[1]), []).append((start * scale, dur * scale))
            for lane, spans in by_lane.items():  # one collection per lane: a figure of many bars draws fast
                ax.broken_barh(
                    spans,
                    (y - 0.4 + 0.8 * lane / lanes, 0.8 / lanes * 0.8),
                    facecolors=COLORS["collective"],
                    edgecolor="#7a2a2d",
                    linewidth=0.3,
                )
            continue
        if bars:  # one collection per row, each bar its phase's colour
            ax.broken_barh(
                [(start * scale, dur * scale) for start, dur, _ in bars],
                (y - 0.4, 0.8),
                facecolors=[COLORS.get(name, "#999999") for _, _, name in bars],
                edgecolor="white",
                linewidth=0.3,
            )
    for i, samples in enumerate(links.values()):
        y = len(rows) + i
        peak = max(v for _, v in samples) or 1.0
        xs = [t * scale for t, _ in samples]
        ys = [y + 0.4 - 0.8 * v / peak for _, v in samples]
        ax.fill_between(xs, ys, [y + 0.4] * len(xs), step="post", color="#4c72b0", alpha=0.5, linewidth=0)
        ax.text(xs[-1], y, f" {peak:.0f} Mbit/s", va="center", fontsize=7)  # the wall clock's rate, per 10 ms
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("ms from the step's start" + (f" (wall clock / k = {k:g})" if k != 1 else ""))
    ax.set_title(f"{title} ({step}): {(t1 - t0) * scale:.0f} ms", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def timeline_figure(run_dir: Path, path: Path) -> Path | None:
    """Draw the run's median (and slowest) step into ``path``; None where the run has no usable trace (BadInput where
    trace.json is not one)."""
    doc = load_trace(run_dir)
    if doc is None:
        return None
    events, k = doc["events"], doc["dilation"]
    chosen = median_and_slowest(events)
    if not chosen:
        return None
    fig, axes = plt.subplots(
        1, len(chosen), figsize=(6.5 * len(chosen), 4.5), squeeze=False, sharey=False, layout="constrained"
    )
    for ax, (title, step) in zip(axes[0], chosen):
        _panel(ax, events, step, title, k)
    fig.legend(
        handles=[Patch(color=c, label=n) for n, c in COLORS.items() if n != "collective"]
        + [Patch(color=COLORS["collective"], label="bucket collective")],
        loc="outside lower center",
        ncol=8,
        fontsize=8,
        frameon=False,
    )
    return save(fig, path)


Drawn = dict[int, "Path | str | None"]  # point index -> its figure, None (no usable trace), or why it was not drawn
TIMELINES = 12  # points whose median and slowest step the sweep report draws


def with_traces(frame: pd.DataFrame, folder: Path) -> list[tuple[int, Path]]:
    """(index in ``frame``, run directory) of every point with a trace.json."""
    found = []
    for i, row in enumerate(frame.to_dict("records")):
        run_dir = run_path(folder, row.get("run_dir"))
        if run_dir is not None and os.path.lexists(trace_path(run_dir)):
            found.append((i, run_dir))
    return found


def draw_timelines(folder: Path, points: list[tuple[int, Path]]) -> Drawn:
    """Each point's timeline figure as ``timeline_INDEX.png`` in ``folder``."""
    drawn: Drawn = {}
    for i, run_dir in points:
        try:
            drawn[i] = timeline_figure(run_dir, folder / f"timeline_{i}.png")
        except untrusted.BadInput as exc:
            drawn[i] = f"not drawn: {exc}"
    return drawn


def sweep_section(
    frame: pd.DataFrame, folder: Path, limit: int = TIMELINES, drawn: Drawn | None = None
) -> tuple[list[str], list[Path]]:
    """The sweep report's timelines: each point's trace.json, and the median and slowest step of the first ``limit``
    points; with the figures drawn (the only ones report.html may inline beside the sweep's own). ``drawn``: figures
    drawn already (by :func:`draw_timelines`, in another process); the rest are drawn here."""
    from netbench.reports.escape import for_markdown  # late: keeps rich off this module's import

    lines = ["## Timelines", "", "Each point's trace.json opens in Perfetto (ui.perfetto.dev) or chrome://tracing.", ""]
    drawn = dict(drawn or {})
    shown: list[Path] = []
    for i, run_dir in with_traces(frame, folder):
        label = for_markdown(str(frame.iloc[i].get("label", i)))
        lines.append(f"- {label}: `{for_markdown(str(trace_path(run_dir).relative_to(folder)))}`")
        if len(shown) >= limit:
            continue
        figure = drawn[i] if i in drawn else draw_timelines(folder, [(i, run_dir)])[i]
        if isinstance(figure, str):
            lines.append(f"  ({for_markdown(figure)})")
        elif figure is not None:
            lines += ["", f"![timeline of {label}]({figure.name})", ""]
            shown.append(figure)
    return (lines + [""], shown) if len(lines) > 4 else ([], [])
