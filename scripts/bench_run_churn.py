#!/usr/bin/env python3
"""`netbench run` through churn, measured against the model: one run folder's figures, each beside the model's.

Printed for RUN_DIR (a `netbench run` with member rows or ``--churn``):

* per membership segment: the nodes taking part, the measured step (the slowest node's; the mean per step for
  DiLoCo) and the model's for that many nodes, and their ratio (target: within 10 %);
* per heal: the bytes received against :func:`netbench.model.heal.heal_bytes` (target: within 5 %) and the time;
* the loss (first -> last), the steps run and lost, the status;
* the goodput (committed steps per wall second) against :mod:`netbench.model.goodput`: :func:`simulate` over the
  run's own leaves and joins, and, for a ``--churn``, the analytic :func:`goodput` for its MTBF (target: within
  10 %). Both take the model's step per member count from the segments, the lighthouse's heartbeat timeout as the
  quorum's wait after a leave, the heal's modelled time, the measured start of a joining worker, and the run's bound
  on a wait on peers (what a leave while the quorum re-forms costs);
* the progress kept (the steps the training holds at the end, since it last started afresh, per second) against the
  rules' over the run's changes.

    flock -x /tmp/nb-heavy.lock python3 -m netbench run -n 4 --bw 100mbit --delay 10ms -r diloco --sync-every 4 \\
        --schedule churn.csv --steps 160            # churn.csv: 6,n3,leave and 12,n3,join
    python3 scripts/bench_run_churn.py RUN_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.model.calibration import read_calibration  # noqa: E402
from netbench.model.goodput import goodput  # noqa: E402
from netbench.model.heal import heal_bytes, heal_time_s  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.orchestrator.prediction import workload_shapes  # noqa: E402
from netbench.orchestrator.run.churn_results import simulate_run  # noqa: E402
from netbench.orchestrator.run.schedule_results import segment_summary  # noqa: E402
from netbench.rundir.churn_figures import churn_figures  # noqa: E402
from netbench.rundir.restarts import restart_figures  # noqa: E402
from netbench.rundir.steps_schema import Col  # noqa: E402
from netbench.schedule.churn import parse_churn  # noqa: E402

# the steps.csv columns the figures read: a run that trained through churn has them, an ``exec`` run does not
TRAINED = (Col.WARMUP, Col.COMMITTED, Col.QUORUM_REPLICAS, Col.HEAL_BYTES, Col.HEAL_S)


def pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _figure(x: float | None, spec: str = ".4f") -> str:
    """A figure the run may lack (an ``exec`` run records no loss): "-" for it."""
    return "-" if x is None else format(x, spec)


def _ratio(measured: float | None, model: float | None) -> str:
    return pct(measured / model) if measured and model else "-"


def exchange_timeout(run_dir: Path, run_json: dict) -> float:
    """The run's bound on a torchft wait on peers, in the cluster's seconds: run.json's record, else (a run recorded
    without it) the first worker's start event divided by the dilation."""
    recorded = (run_json["cluster"].get("quorum") or {}).get("exchange_timeout_s")
    if recorded is not None:
        return float(recorded)
    with (run_dir / "workers" / "rank0.jsonl").open() as fh:
        start = json.loads(fh.readline())
    return float(start["quorum"]["exchange_timeout_s"]) / float(run_json.get("dilation") or 1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument(
        "--calibration", type=Path, help="price the segments again with this code and calibration (default: run.json's)"
    )
    args = parser.parse_args()
    run_json = json.loads((args.run_dir / "run.json").read_text())
    steps = pd.read_csv(args.run_dir / "steps.csv")
    lacking = [str(c) for c in TRAINED if c not in steps]
    if lacking:
        print(
            f"bench_run_churn: steps.csv has no {', '.join(lacking)}: not a `netbench run` that trained through "
            "churn (an exec run records no quorum)",
            file=sys.stderr,
        )
        return 2
    summary, config = run_json["summary"], RunConfig.model_validate(run_json["config"])
    if args.calibration is not None:
        calibration = read_calibration(args.calibration)
        summary["schedule_segments"] = segment_summary(config, steps, None, calibration, os.cpu_count(), None)
    rep: ReplicatorConfig = config.replicator
    shapes = workload_shapes(config.workload, config.cluster.nodes)
    print(f"{args.run_dir.name}: status {summary['status']} {summary.get('reason') or ''}")
    print(f"loss {_figure(summary.get('first_loss'))} -> {_figure(summary.get('final_loss'))}")
    measured = steps[~steps[Col.WARMUP]]
    lost, heals = _figure(summary.get("steps_lost"), "d"), _figure(summary.get("heals"), "d")
    print(f"steps run {len(measured)} (all nodes), lost {lost}, heals {heals}")

    print("segment  members  steady step  model step  steady/model  mean step  model mean  mean/model")
    for seg in summary.get("schedule_segments") or []:
        model = seg.get("predicted_step_time_s")
        steady, mean = seg.get("step_time_s"), seg.get("segment_step_time_s", seg.get("step_time_s"))
        mean_model = seg.get("predicted_segment_step_time_s", model)
        print(
            f"{seg['segment']:7d}  {seg['members']:7d}  {_s(steady):>11s}  {_s(model):>10s}  "
            f"{_ratio(steady, model):>12s}  {_s(mean):>9s}  {_s(mean_model):>10s}  {_ratio(mean, mean_model)}"
        )

    model_bytes = heal_bytes(rep, shapes)
    link = config.cluster.up
    priced = [seg["predicted_heal_s"] for seg in summary.get("schedule_segments") or [] if "predicted_heal_s" in seg]
    # the run's own pricing (its calibration's framing and message overhead), else the bare formula
    model_heal_s = priced[0] if priced else heal_time_s(rep, shapes, link.rate_bps, 2 * link.delay_s)
    heals = measured[measured[Col.HEAL_BYTES] > 0]
    for _, row in heals.iterrows():
        print(
            f"heal: rank {row[Col.RANK]} step {row[Col.STEP]}: {int(row[Col.HEAL_BYTES])} B (model {model_bytes} B, "
            f"{pct(row[Col.HEAL_BYTES] / model_bytes)}), {row[Col.HEAL_S]:.3f} s (model {model_heal_s:.3f} s)"
        )

    measured_goodput = churn_figures(measured).get("goodput_steps_per_s")  # this code's, in the cluster's seconds
    cluster = run_json["cluster"] | {"quorum": {"exchange_timeout_s": exchange_timeout(args.run_dir, run_json)}}
    dilation = float(run_json.get("dilation") or 1.0)
    replayed = simulate_run(config, steps, summary.get("schedule_segments") or [], cluster, dilation)
    if replayed is None or measured_goodput is None:
        print("no goodput comparison: no modelled segment or no committed step")
        return 0
    step_at, recovery, simulated = replayed
    print(f"a joining worker's start (join -> its first step): {recovery.restart_s:.2f} s")
    print(
        f"goodput {measured_goodput:.3f} steps/s; model over the run's changes {simulated.steps_per_s:.3f} "
        f"({pct(measured_goodput / simulated.steps_per_s)}; {simulated.heals} heals, {simulated.stuck} re-formations "
        f"waiting out the exchange timeout of {recovery.exchange_timeout_s:.2f} s)"
    )
    kept = restart_figures(steps)
    if kept.get("kept_steps_per_s"):
        print(
            f"progress kept {kept['kept_steps_per_s']:.3f} steps/s ({kept['kept_steps']:g} steps held at the end, "
            f"{kept['restarts']} restarts); model over the run's changes {simulated.kept_steps_per_s:.3f} "
            f"({pct(kept['kept_steps_per_s'] / simulated.kept_steps_per_s) if simulated.kept_steps else '-'}; "
            f"{simulated.kept_steps} steps held, {simulated.restarts} restarts)"
        )
    source = config.schedule.source if config.schedule is not None else ""
    found = re.search(r"mtbf=([\d.]+)s away=([\d.]+)s", source)
    if found:
        churn = parse_churn(f"{found.group(1)}s,away={found.group(2)}s")
        analytic = goodput(config.cluster.nodes, churn.mtbf_s, churn.away_s, step_at, recovery)
        vs = pct(measured_goodput / analytic.steps_per_s)
        print(f"analytic goodput for MTBF {churn.mtbf_s:g} s: {analytic.steps_per_s:.3f} ({vs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
