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
  quorum's wait after a leave, the heal's modelled time, and the measured start of a joining worker.

    flock -x /tmp/nb-heavy.lock python3 -m netbench run -n 4 --bw 100mbit --delay 10ms -r diloco --sync-every 4 \\
        --schedule churn.csv --steps 160            # churn.csv: 6,n3,leave and 12,n3,join
    python3 scripts/bench_run_churn.py RUN_DIR
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.model.goodput import QUORUM_WAIT_S, Recovery, goodput, simulate  # noqa: E402
from netbench.model.heal import heal_bytes, heal_time_s  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.orchestrator.prediction import workload_shapes  # noqa: E402
from netbench.rundir.steps_schema import Col  # noqa: E402
from netbench.schedule.churn import parse_churn  # noqa: E402


def pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    run_json = json.loads((args.run_dir / "run.json").read_text())
    steps = pd.read_csv(args.run_dir / "steps.csv")
    summary, config = run_json["summary"], RunConfig.model_validate(run_json["config"])
    rep: ReplicatorConfig = config.replicator
    shapes = workload_shapes(config.workload, config.cluster.nodes)
    print(f"{args.run_dir.name}: status {summary['status']} {summary.get('reason') or ''}")
    print(f"loss {summary.get('first_loss'):.4f} -> {summary.get('final_loss'):.4f}")
    measured = steps[~steps[Col.WARMUP]]
    print(f"steps run {len(measured)} (all nodes), lost {summary.get('steps_lost')}, heals {summary.get('heals')}")

    step_of: dict[int, float] = {}
    print("segment  members  measured step  model step  measured/model")
    for seg in summary.get("schedule_segments") or []:
        model = seg.get("predicted_step_time_s")
        if model is not None:
            step_of[seg["members"]] = model
        ratio = f"{pct(seg['step_time_s'] / model)}" if model else "-"
        shown = f"{model:.3f} s" if model else "-"
        print(f"{seg['segment']:7d}  {seg['members']:7d}  {seg['step_time_s']:11.3f} s  {shown:>10s}  {ratio}")

    model_bytes = heal_bytes(rep, shapes)
    link = config.cluster.up
    model_heal_s = heal_time_s(rep, shapes, link.rate_bps, 2 * link.delay_s)
    heals = measured[measured[Col.HEAL_BYTES] > 0]
    for _, row in heals.iterrows():
        print(
            f"heal: rank {row[Col.RANK]} step {row[Col.STEP]}: {int(row[Col.HEAL_BYTES])} B (model {model_bytes} B, "
            f"{pct(row[Col.HEAL_BYTES] / model_bytes)}), {row[Col.HEAL_S]:.3f} s (model {model_heal_s:.3f} s)"
        )

    applied = run_json["cluster"].get("schedule", {}).get("applied", [])
    joins = [float(a["wall_time"]) for a in applied if "joined" in a["what"]]
    restarts = []
    for at in joins:
        after = steps[steps[Col.T_START] > at]
        if not after.empty:
            restarts.append(float(after[Col.T_START].min() - at))
    restart_s = median(restarts) if restarts else 0.0

    measured_goodput = summary.get("goodput_steps_per_s")
    if not step_of or measured_goodput is None:
        print("no goodput comparison: no modelled segment or no committed step")
        return 0
    counts = sorted(step_of)

    def step_at(members: int) -> tuple[float, float]:
        nearest = min(counts, key=lambda m: abs(m - members))
        step = step_of[nearest]
        return step, step * (1 if rep.name == "full" else 1 / 3)

    period = rep.sync_every if rep.name == "diloco" else 1
    recovery = Recovery(period=period, heal_s=model_heal_s, quorum_wait_s=QUORUM_WAIT_S, restart_s=restart_s)
    names = [n.name for n in config.cluster.topology.nodes]
    changes = config.schedule.changes if config.schedule is not None else []
    horizon = float(measured[Col.T_END].max() - measured[Col.T_START].min())
    simulated = simulate(changes, names, horizon, step_at, recovery)
    print(f"a joining worker's start (join -> its first step): {restart_s:.2f} s")
    print(
        f"goodput {measured_goodput:.3f} steps/s; model over the run's changes {simulated.steps_per_s:.3f} "
        f"({pct(measured_goodput / simulated.steps_per_s)})"
    )
    source = config.schedule.source if config.schedule is not None else ""
    found = re.search(r"mtbf=([\d.]+)s away=([\d.]+)s", source)
    if found:
        churn = parse_churn(f"{found.group(1)}s,away={found.group(2)}s")
        analytic = goodput(len(names), churn.mtbf_s, churn.away_s, step_at, recovery)
        vs = pct(measured_goodput / analytic.steps_per_s)
        print(f"analytic goodput for MTBF {churn.mtbf_s:g} s: {analytic.steps_per_s:.3f} ({vs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
