"""A sweep's figures (matplotlib, Agg): measured points against the model's lines.

* ``time_vs_bandwidth.png`` -- step time vs link rate, log-log, one panel per node count;
* ``bytes_per_step.png`` -- wire bytes per node per step by replicator, measured vs model;
* ``scaling_nodes.png`` -- how all-gather (dct) and all-reduce (full, random) traffic and
  communication time grow with the node count.

Model lines are evaluated from the sweep's own scenario and calibration, with each group's
measured local work, so a line passes through its points exactly when the model is right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from netbench.emulation.spec import MAX_RATE_BPS, MIN_RATE_BPS, ClusterSpec  # noqa: E402
from netbench.model.calibration import Calibration  # noqa: E402
from netbench.model.predict import predict, workload_shapes  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.reports.scenario import SweepScenario  # noqa: E402
from netbench.replicators.config import ReplicatorConfig  # noqa: E402
from netbench.units import format_rate  # noqa: E402

__all__ = ["make_figures"]

COLORS = {"full": "#1f77b4", "dct": "#d62728", "random": "#2ca02c", "striding": "#9467bd", "diloco": "#ff7f0e"}
COLLECTIVE = {"full": "all-reduce", "dct": "all-gather", "random": "all-reduce", "striding": "all-reduce", "diloco": "all-reduce"}


class _Model:
    """The model evaluated anywhere on the sweep's axes, for drawing lines."""

    def __init__(self, scenario: SweepScenario, calibration: Calibration) -> None:
        self.scenario = scenario
        self.calibration = calibration
        self.shapes = workload_shapes(scenario.workload, max(scenario.grid.nodes))

    def step(self, replicator: str, nodes: int, bw_bps: float, delay_ms: float, local_s: float):
        cluster = ClusterSpec(nodes=nodes, up={"rate_bps": bw_bps, "delay_s": delay_ms / 1e3}, down={"rate_bps": bw_bps})
        rep = ReplicatorConfig(name=replicator, **self.scenario.replicator)
        config = RunConfig(cluster=cluster, replicator=rep, workload=self.scenario.workload, capture=False)
        return predict(config, self.shapes, local_s, self.calibration)


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["step_time_s"].notna()]


def _label_rate(ax) -> None:
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: format_rate(v)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _label_seconds(ax) -> None:
    """Log y axis ticked at 1-2-5 steps in plain seconds (0.05, 0.1, 0.2 ...), not bare powers of ten."""
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def time_vs_bandwidth(frame: pd.DataFrame, model: _Model | None, path: Path) -> Path:
    """Step time vs bandwidth, log-log: markers measured, lines the model (one panel per node count)."""
    ok = _ok(frame)
    node_counts = sorted(ok["nodes"].unique())
    fig, axes = plt.subplots(1, len(node_counts), figsize=(5.2 * len(node_counts), 4.2), sharey=True, squeeze=False)
    lo, hi = ok["bw_bps"].min(), ok["bw_bps"].max()
    grid = np.geomspace(max(MIN_RATE_BPS, lo / 1.4), min(MAX_RATE_BPS, hi * 1.4), 40)
    for ax, nodes in zip(axes[0], node_counts):
        here = ok[ok["nodes"] == nodes]
        for (rep, delay_ms), group in here.groupby(["replicator", "delay_ms"], sort=False):
            color = COLORS.get(rep, "black")
            suffix = f", {delay_ms:g} ms" if ok["delay_ms"].nunique() > 1 else ""
            style = "-" if delay_ms == ok["delay_ms"].min() else "--"
            ax.plot(group["bw_bps"], group["step_time_s"], "o", color=color, ms=7, label=f"{rep}{suffix} measured")
            if model is not None:
                local = float(group["pred_local_time_s"].median())
                ys = [model.step(rep, int(nodes), b, delay_ms, local).step_time_s for b in grid]
                ax.plot(grid, ys, style, color=color, lw=1.6, alpha=0.8, label=f"{rep}{suffix} model")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _label_rate(ax)
        _label_seconds(ax)
        ax.set_title(f"{nodes} nodes")
        ax.set_xlabel("link rate (each direction)")
        ax.grid(True, which="both", alpha=0.25)
    axes[0][0].set_ylabel("time per step (s)")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    fig.suptitle("Time per step vs bandwidth: measured (points) and model (lines)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bytes_per_step(frame: pd.DataFrame, path: Path) -> Path:
    """Wire bytes each node sends per step, by replicator and node count: measured bars, model ticks."""
    ok = _ok(frame)
    groups = ok.groupby(["replicator", "nodes"], sort=False).agg(
        measured=("wire_tx_bytes_per_step", "median"), model=("pred_wire_tx_bytes_per_step", "median"),
        payload=("payload_bytes_per_step", "median")).reset_index()
    reps = list(dict.fromkeys(groups["replicator"]))
    node_counts = sorted(groups["nodes"].unique())
    width = 0.8 / len(node_counts)
    fig, ax = plt.subplots(figsize=(1.6 + 2.2 * len(reps), 4.2))
    for j, nodes in enumerate(node_counts):
        for i, rep in enumerate(reps):
            row = groups[(groups["replicator"] == rep) & (groups["nodes"] == nodes)]
            if row.empty:
                continue
            x = i - 0.4 + width * (j + 0.5)
            r = row.iloc[0]
            ax.bar(x, r["measured"], width * 0.9, color=COLORS.get(rep, "grey"), alpha=0.45 + 0.5 * j / max(1, len(node_counts) - 1))
            ax.plot([x - width * 0.45, x + width * 0.45], [r["model"]] * 2, color="black", lw=2)
            ax.text(x, r["measured"] * 1.15, f"{nodes}n\n{_short_bytes(r['measured'])}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(reps)), [f"{r}\n({COLLECTIVE.get(r, '')})" for r in reps])
    ax.set_yscale("log")
    ax.set_ylabel("wire bytes sent per node per step")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)
    ax.plot([], [], color="black", lw=2, label="model")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("Bytes per step (bars: measured, median over bandwidths)")
    ax.grid(True, axis="y", which="both", alpha=0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def scaling_nodes(frame: pd.DataFrame, model: _Model | None, path: Path) -> Path:
    """All-gather vs all-reduce: wire bytes per payload byte, and communication time, vs node count."""
    ok = _ok(frame)
    measured_nodes = sorted(ok["nodes"].unique())
    span = list(range(2, max(8, max(measured_nodes)) + 1))
    slowest = ok["bw_bps"].min()
    delay0 = ok["delay_ms"].min()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for rep, group in ok.groupby("replicator", sort=False):
        color = COLORS.get(rep, "black")
        label = f"{rep} ({COLLECTIVE.get(rep, '?')})"
        per = group.groupby("nodes").agg(wire=("wire_tx_bytes_per_step", "median"), payload=("payload_bytes_per_step", "median"))
        left.plot(per.index, per["wire"] / per["payload"], "o", color=color, ms=7, label=f"{label} measured")
        at = group[(group["bw_bps"] == slowest) & (group["delay_ms"] == delay0)]
        right.plot(at["nodes"], at["comm_time_s"], "o", color=color, ms=7, label=f"{label} measured")
        if model is not None:
            local = float(group["pred_local_time_s"].median())
            ests = [model.step(rep, n, slowest, delay0, local) for n in span]
            left.plot(span, [e.tx.total / e.payload_bytes_per_step for e in ests], "-", color=color, alpha=0.8, label=f"{label} model")
            right.plot(span, [e.comm_time_s for e in ests], "-", color=color, alpha=0.8, label=f"{label} model")
    left.set_xlabel("nodes")
    left.set_ylabel("wire bytes sent per payload byte handed")
    left.set_title("Traffic per node: all-gather grows with N, all-reduce stays < 2x")
    right.set_xlabel("nodes")
    right.set_ylabel("communication time per step (s)")
    right.set_yscale("log")
    _label_seconds(right)
    right.set_title(f"Communication time at {format_rate(slowest)}")
    for ax in (left, right):
        ax.set_xticks(span)
        ax.grid(True, which="both", alpha=0.25)
    left.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _model(doc: dict[str, Any], calibration: Calibration) -> _Model | None:
    try:
        return _Model(SweepScenario.model_validate(doc["scenario"]), calibration)
    except Exception:  # noqa: BLE001 - no scenario (or an unbuildable one): points only, no lines
        return None


def make_figures(frame: pd.DataFrame, doc: dict[str, Any], calibration: Calibration, folder: Path) -> list[Path]:
    """Every figure this sweep's points support (nothing when no point succeeded)."""
    if _ok(frame).empty:
        return []
    model = _model(doc, calibration) if "pred_local_time_s" in frame and frame["pred_local_time_s"].notna().any() else None
    figures = [time_vs_bandwidth(frame, model, folder / "time_vs_bandwidth.png"), bytes_per_step(frame, folder / "bytes_per_step.png")]
    if _ok(frame)["nodes"].nunique() > 1 or model is not None:
        figures.append(scaling_nodes(frame, model, folder / "scaling_nodes.png"))
    return figures
