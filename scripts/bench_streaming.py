"""Streaming DiLoCo, SparseLoCo and quantized outer exchanges against the model, from a finished sweep folder.

Per point (summary.csv): the mean step against the model replayed with the run's own local work, and wire bytes
per step (interface counters, and the capture where it ran) against the model's. Per fragment sync (each run's
steps.csv): the bytes a node's interface and the capture counted from the step that started the exchange to the
step before the next one started (an overlapped exchange's bytes land in the steps after it starts), against the
model's bytes of that one exchange. The run's last window also gets what the node sent after the last step
(tail_tx_bytes: an overlapped exchange's rest, and a rank's last segments still queued when its step returned) less
the workers' closing barrier that the tail also holds (:func:`closing_barrier_bytes`: 342 bytes a node at 2 nodes,
2.2 % of a 15 kB SparseLoCo gather). Only windows wholly after the warm-up count. Nothing is run or written.

    python3 scripts/bench_streaming.py reports/streaming-fidelity

Per point with a trace (trace.json): when the ranks launched each outer sync's all-gather (the spread between the
first and the last rank), and how long it took from the last launch until every rank had it, beside the model's time
for one call: what a sync the ranks reach after free-running steps costs beyond a call in lockstep.

Targets: wire bytes within 2 % (per step and per fragment sync), step time within 10 % of the replay.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import pandas as pd

from netbench.model.calibration import Calibration
from netbench.model.framing import Framing
from netbench.model.network import GraphModel
from netbench.model.schemes import scheme_from_config
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import layout_of, workload_shapes
from netbench.rundir.reading import read_csv
from netbench.rundir.steps_schema import Col

BYTES_TARGET = 0.02
STEP_TARGET = 0.10


def exchange_bytes(config: RunConfig, calibration: Calibration) -> list[tuple[str, int, int, float, float]]:
    """(label, period, step of the period, one node's wire tx bytes of one call, the call's time in seconds) of each
    of the run's exchanges."""
    cluster = config.cluster
    shapes = workload_shapes(config.workload, cluster.nodes)
    graph = GraphModel(cluster.topology, cluster.placement)
    _, rings = graph.layout_rings(layout_of(config))
    framing = calibration.framing()
    from netbench.emulation.tcpsettings import expected_tcp_settings

    tcp = expected_tcp_settings(cluster.tcp)
    out = []
    for ex in scheme_from_config(config.replicator).exchanges(shapes, rings.peers):
        cost = rings.call_cost(ex, rings.prices(1.0), calibration.overhead(ex.collective), framing, tcp, 0.0, 0.0, 0.0)
        out.append((ex.label, ex.period, ex.step_of_period, cost.tx.total * ex.calls, cost.time_s * ex.calls))
    return out


def closing_barrier_bytes(framing: Framing, nodes: int) -> float:
    """One node's wire tx bytes of the barrier that ends a run (the worker's tail reading waits on it): gloo's
    dissemination barrier, ceil(log2 N) rounds, each a 0-byte message to rank + d and one from rank - d (a data op
    and a send-ready op out, a recv-ready op back; gloo/barrier.cc). Where both are the same peer (2d = N) each
    side's ops carry the other's ACKs; otherwise the ops draw pure ACKs as any message does."""
    total, d = 0.0, 1
    while d < nodes:
        flow = framing.flow(1, 0, piggyback=(2 * d) % nodes == 0)
        total += flow.forward.total + flow.reverse.total
        d <<= 1
    return total


def fragment_windows(
    steps: pd.DataFrame, warmup: int, exchanges, column: str, barrier_bytes: float = 0.0
) -> list[tuple[str, float, float]]:
    """(exchange label, measured bytes, model bytes) of every whole exchange window after the warm-up, every rank."""
    out = []
    for _, rank in steps.sort_values(Col.STEP).groupby(Col.RANK):
        starts = rank[rank[Col.PAYLOAD_BYTES] > 0][Col.STEP].tolist()
        last = int(rank[Col.STEP].max())
        for i, first in enumerate(starts):
            if first < warmup:
                continue
            end = starts[i + 1] - 1 if i + 1 < len(starts) else last
            window = rank[(rank[Col.STEP] >= first) & (rank[Col.STEP] <= end)]
            measured = float(window[column].sum())
            if end == last:  # the bytes still on the way when the last step ended, less the closing barrier
                tail = Col.TAIL_TX_BYTES if column == Col.TX_BYTES else None
                if tail is None or tail not in window or window[tail].isna().all():
                    continue
                measured += float(window[tail].fillna(0).sum()) - barrier_bytes
            at = first + 1  # 1-based, as the declaration counts steps
            started = [(label, b) for label, period, of, b, _ in exchanges if at % period == of]
            if started:
                out.append((" + ".join(label for label, _ in started), measured, sum(b for _, b in started)))
    return out


def sync_calls(run_dir: Path, warmup: int, dilation: float) -> list[tuple[float, float]]:
    """(seconds between the first and the last rank's launch, seconds from the last launch until the last rank's call
    ended) of every outer sync's collective after the warm-up, from the run's trace (none without one). The trace
    is in wall time; a dilated run's steps, and the model, are in emulated time: wall time over ``dilation``."""
    path = run_dir / "trace.json"
    if not path.exists():
        return []
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    calls: dict[int, list[tuple[float, float]]] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") == "X" and event.get("cat") == "collective":
            if args["step"] >= warmup:
                start, end = event["ts"] / 1e6 / dilation, (event["ts"] + event["dur"]) / 1e6 / dilation
                calls.setdefault(args["step"], []).append((start, end))
    out = []
    for spans in calls.values():
        if len(spans) > 1:
            last = max(start for start, _ in spans)
            out.append((last - min(start for start, _ in spans), max(end for _, end in spans) - last))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    folder: Path = args.folder
    summary = pd.read_csv(folder / "summary.csv")
    calibration = Calibration.model_validate(json.loads((folder / "calibration.json").read_text()))
    step_errors, byte_errors, window_errors = [], [], []
    sync_lines: list[str] = []
    print(f"{'point':44} {'step':>8} {'replay':>8} {'err':>7} {'tx/step':>9} {'model':>9} {'err':>6} {'capture':>7}")
    for _, row in summary[summary["status"] == "ok"].iterrows():
        step_err = row["replay_error"]
        tx_err = row["wire_tx_bytes_per_step"] / row["pred_wire_tx_bytes_per_step"] - 1
        cap = row.get("capture_wire_bytes_per_step", math.nan)
        cap_err = cap / row["pred_wire_tx_bytes_per_step"] - 1 if isinstance(cap, float) and cap == cap else math.nan
        step_errors.append((abs(step_err), row["label"]))
        byte_errors.append((max(abs(tx_err), 0 if math.isnan(cap_err) else abs(cap_err)), row["label"]))
        print(
            f"{row['label']:44} {row['step_time_s']:8.4f} {row['replay_step_time_s']:8.4f} {100 * step_err:+6.1f}% "
            f"{row['wire_tx_bytes_per_step']:9.0f} {row['pred_wire_tx_bytes_per_step']:9.0f} {100 * tx_err:+5.1f}% "
            f"{100 * cap_err:+6.1f}%"
        )
        run_dir = folder / row["run_dir"]
        run = json.loads((run_dir / "run.json").read_text())
        config = RunConfig.model_validate(run["config"])
        steps = read_csv(run_dir / "steps.csv")
        exchanges = exchange_bytes(config, calibration)
        barrier = closing_barrier_bytes(calibration.framing(), config.cluster.nodes)
        calls = sync_calls(run_dir, config.warmup_steps, float(run.get("dilation") or 1.0))
        if calls:
            model_s = statistics.median(t for *_, t in exchanges)
            skews, spans = zip(*calls)
            spread = f"launch spread {1e3 * statistics.median(skews):6.1f} ms (max {1e3 * max(skews):6.1f})"
            sync_lines.append(
                f"{row['label']:44} {spread}, call from the last launch {1e3 * statistics.median(spans):6.1f} ms, "
                f"model {1e3 * model_s:6.1f} ms"
            )
        for column, source in ((Col.TX_BYTES, "counters"), (Col.CAPTURE_TX_WIRE_BYTES, "capture")):
            if column not in steps or steps[column].isna().all():
                continue
            windows = fragment_windows(steps, config.warmup_steps, exchanges, column, barrier)
            for label, measured, model in windows:
                window_errors.append((measured / model - 1, f"{row['label']} {label} ({source})"))
    print()
    by_exchange: dict[str, list[float]] = {}
    for err, name in window_errors:
        by_exchange.setdefault(name, []).append(err)
    print(f"{'per exchange window (median over windows and ranks)':80} {'err':>7} {'windows':>7}")
    medians = []
    for name, errs in by_exchange.items():
        med = statistics.median(errs)
        medians.append((abs(med), name))
        print(f"{name:80} {100 * med:+6.2f}% {len(errs):7d}")
    print()
    if sync_lines:
        print("outer syncs (median over syncs after the warm-up; the model's call, lockstep or skewed as it expects):")
        print("\n".join(sync_lines))
        print()
    worst_step, worst_bytes = max(step_errors), max(byte_errors)
    worst_window = max(medians) if medians else (math.nan, "none")
    within = sum(e <= STEP_TARGET for e, _ in step_errors)
    print(
        f"step time vs replay: median |error| {100 * statistics.median(e for e, _ in step_errors):.1f} %, max "
        f"{100 * worst_step[0]:.1f} % ({worst_step[1]}); {within} of {len(step_errors)} within "
        f"{100 * STEP_TARGET:.0f} %"
    )
    print(f"wire bytes per step vs model: max |error| {100 * worst_bytes[0]:.2f} % ({worst_bytes[1]})")
    print(
        f"wire bytes per exchange window vs model: max |median error| {100 * worst_window[0]:.2f} % ({worst_window[1]})"
    )


if __name__ == "__main__":
    main()
