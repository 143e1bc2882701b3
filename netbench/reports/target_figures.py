"""Figures of time to a target loss: loss vs wall-clock per rate, and time to target along the rate axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netbench.reports.drawing import Line2D, plt
from netbench.reports.figure_file import save
from netbench.reports.plots import label_rate, label_seconds
from netbench.reports.style import color
from netbench.reports.target import TargetGroup, rate_text
from netbench.topology.link import MAX_RATE_BPS, MIN_RATE_BPS
from netbench.units import format_rate

__all__ = ["loss_vs_time", "time_to_target_vs_rate"]


def _where(group: TargetGroup) -> str:
    return f"{group.nodes} nodes" + (f", {group.delay_ms:g} ms one-way" if group.delay_ms else "")


def loss_vs_time(group: TargetGroup, path: Path) -> Path:
    """One panel per measured rate: each replicator's loss vs wall-clock, measured (solid) and projected (dashed)."""
    n = len(group.rates)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n + 0.6, 3.8), sharey=True, squeeze=False, layout="constrained")
    reps = list(group.steps_needed)
    for ax, rate in zip(axes[0], group.rates):
        for rep in reps:
            c = color(rep)
            for curve in (x for x in group.curves if x.replicator == rep and x.bw_bps == rate):
                ax.plot(curve.elapsed_s, curve.loss, "-", color=c, lw=1.6)
                if rep in group.pricing:
                    projected = [group.pricing[rep].seconds(k, rate) for k in range(1, len(curve.loss) + 1)]
                    ax.plot(projected, curve.loss, "--", color=c, lw=1.2, alpha=0.8)
        ax.axhline(group.target, color="#555", ls=":", lw=1)
        ax.set_xscale("log")
        label_seconds(ax, "x")
        ax.set_title(f"{format_rate(rate)}", fontsize=10)
        ax.set_xlabel("wall-clock (s)")
        ax.grid(True, which="both", alpha=0.25)
    axes[0][0].set_ylabel("training loss (trailing mean)")
    fig.suptitle(
        f"Loss vs wall-clock, {_where(group)}: solid measured, dashed the model's time for the steps", fontsize=11
    )
    handles = [Line2D([], [], color=color(r), lw=2, label=r) for r in reps]
    handles += [
        Line2D([], [], color="#444", ls="-", label="measured"),
        Line2D([], [], color="#444", ls="--", label="projected (model)"),
        Line2D([], [], color="#555", ls=":", label=f"target loss {group.target:.3g}"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    return save(fig, path)


def time_to_target_vs_rate(group: TargetGroup, path: Path) -> Path:
    """Time to the target loss along the rate axis: the model's projection (lines) and measured runs (points)."""
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    lo, hi = group.span
    grid = np.geomspace(max(MIN_RATE_BPS, lo), min(MAX_RATE_BPS, hi), 80)
    for rep, k in group.steps_needed.items():
        c = color(rep)
        if k and rep in group.pricing:
            ax.plot(
                grid,
                [group.pricing[rep].seconds(k, r) for r in grid],
                "-",
                color=c,
                lw=1.6,
                label=f"{rep}: {k} steps, model",
            )
        pts = [(rate, group.measured_s.get((rep, rate))) for rate in group.rates]
        pts = [(r, t) for r, t in pts if t is not None]
        if pts:
            ax.plot(*zip(*pts), "o", color=c, ms=7, label=f"{rep} measured")
    for cross in group.crossovers:
        ax.axvline(cross.rate_bps, color="#777", ls=":", lw=1)
        swapped = cross.describe().split(" (")[0]
        ax.annotate(
            f"{rate_text(cross.rate_bps)}: {swapped}",
            (cross.rate_bps, 0.98),
            xycoords=("data", "axes fraction"),
            xytext=(-4, 0),
            textcoords="offset points",
            rotation=90,
            ha="right",
            va="top",
            fontsize=8,
            color="#444",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_rate(ax)
    label_seconds(ax)
    ax.set_xlabel("link rate (each direction)")
    ax.set_ylabel(f"time to loss {group.target:.3g} (s)")
    ax.set_title(f"Time to target loss vs link rate, {_where(group)}", fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    return save(fig, path)
