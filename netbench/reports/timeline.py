"""A run's timeline figure: the median step and the slowest, as a Gantt chart of the model, the ranks and the links.

Drawn from the run's trace.json (:mod:`netbench.trace.build`). Each panel is one step, its time
axis starting at rank 0's start of it: the model's predicted step on top, then each rank's
phases (compute, encode, communicate, wait, decode, apply; other: untimed) with its buckets'
collectives as thin bars below, then each link's throughput as a filled line scaled to the link's
peak. Times are divided by the run's time dilation k, so they read as the configuration reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from netbench.reports.figure_file import save  # noqa: E402
from netbench.rundir.sweepdir import run_path  # noqa: E402
from netbench.trace import events as ev  # noqa: E402
from netbench.trace.build import trace_path  # noqa: E402

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
MAX_TRACE_BYTES = 256 << 20  # a larger trace.json is not read


def load_trace(run_dir: Path) -> dict[str, Any] | None:
    """The run's trace, or None where it has none (or an unreadable one)."""
    path = trace_path(run_dir)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TRACE_BYTES:
            return None
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) else None


def _steps(events: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, Any]]]:
    """step -> rank -> that rank's step event, measured steps only."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "step" and not e.get("args", {}).get("warmup"):
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


def _rows(
    events: list[dict[str, Any]], step: int, t0: float, t1: float
) -> list[tuple[str, list[tuple[float, float, str]]]]:
    """Gantt rows of one step: (label, [(start, duration, phase)]) for the model and every rank."""
    rows = []
    model = [e for e in events if e.get("ph") == "X" and e["pid"] == ev.MODEL_PID and e["name"] != "step (model)"]
    if model:
        m0 = min(e["ts"] for e in model)
        rows.append(("model", [(e["ts"] - m0, e["dur"], e["name"]) for e in model]))
    ranks = sorted({e["pid"] for e in events if e.get("ph") == "X" and ev.RANK_PID <= e["pid"] < ev.LINKS_PID})
    for pid in ranks:
        mine = [e for e in events if e.get("pid") == pid and e.get("ph") == "X" and e["args"].get("step") == step]
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


def _links(events: list[dict[str, Any]], t0: float, t1: float) -> dict[str, list[tuple[float, float]]]:
    """Each link counter's samples inside [t0, t1] (and the one before, so the line starts at t0)."""
    tracks: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "C" and e.get("pid") == ev.LINKS_PID and "Mbit/s" in e.get("args", {}):
            tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["Mbit/s"]))
    out = {}
    for name, samples in sorted(tracks.items()):
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
    rows, links = _rows(events, step, t0, t1), _links(events, t0, t1)
    labels = [label for label, _ in rows] + list(links)
    scale = 1e-3 / k  # trace microseconds -> milliseconds of the configuration as reported
    for y, (label, bars) in enumerate(rows):
        if label.endswith("buckets"):  # one thin lane per bucket row of the trace: collectives in flight together
            lanes = 1 + max(int(name.split()[1]) for _, _, name in bars)
            for start, dur, name in bars:
                lane = int(name.split()[1])
                ax.broken_barh(
                    [(start * scale, dur * scale)],
                    (y - 0.4 + 0.8 * lane / lanes, 0.8 / lanes * 0.8),
                    facecolors=COLORS["collective"],
                    edgecolor="#7a2a2d",
                    linewidth=0.3,
                )
            continue
        for start, dur, name in bars:
            ax.broken_barh(
                [(start * scale, dur * scale)],
                (y - 0.4, 0.8),
                facecolors=COLORS.get(name, "#999999"),
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
    """Draw the run's median (and slowest) step into ``path``; None where the run has no usable trace."""
    doc = load_trace(run_dir)
    if doc is None:
        return None
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and isinstance(e.get("args", {}), dict)]
    chosen = median_and_slowest(events)
    if not chosen:
        return None
    k = float((doc.get("otherData") or {}).get("dilation") or 1.0)
    fig, axes = plt.subplots(1, len(chosen), figsize=(6.5 * len(chosen), 4.2), squeeze=False, sharey=False)
    for ax, (title, step) in zip(axes[0], chosen):
        _panel(ax, events, step, title, k)
    fig.legend(
        handles=[Patch(color=c, label=n) for n, c in COLORS.items() if n != "collective"]
        + [Patch(color=COLORS["collective"], label="bucket collective")],
        loc="lower center",
        ncol=8,
        fontsize=8,
        bbox_to_anchor=(0.5, -0.06),
    )
    fig.tight_layout()
    return save(fig, path)


def sweep_section(frame: pd.DataFrame, folder: Path, limit: int = 12) -> tuple[list[str], list[Path]]:
    """The sweep report's timelines: each point's trace.json, and the median and slowest step of the first ``limit``
    points; with the figures drawn (the only ones report.html may inline beside the sweep's own)."""
    from netbench.reports.escape import for_markdown

    lines = ["## Timelines", "", "Each point's trace.json opens in Perfetto (ui.perfetto.dev) or chrome://tracing.", ""]
    drawn: list[Path] = []
    for i, row in enumerate(frame.to_dict("records")):
        run_dir = run_path(folder, row.get("run_dir"))
        if run_dir is None or not trace_path(run_dir).is_file():
            continue
        label = for_markdown(str(row.get("label", i)))
        lines.append(f"- {label}: `{for_markdown(str(trace_path(run_dir).relative_to(folder)))}`")
        if len(drawn) < limit and (figure := timeline_figure(run_dir, folder / f"timeline_{i}.png")) is not None:
            lines += ["", f"![timeline of {label}]({figure.name})", ""]
            drawn.append(figure)
    return (lines + [""], drawn) if len(lines) > 4 else ([], [])
