#!/usr/bin/env python3
"""The times a run's training was lost and started afresh, three ways, beside the goodput rules' count.

Per run folder:

* recorded: the run's own record (steps.csv's ``restart_quorum``, aggregated by :mod:`netbench.rundir.restarts`);
  "-" for a run recorded before the column existed;
* the lighthouse: the same rule (:func:`netbench.worker.quorum_watch.started_afresh`) over ``workers/lighthouse.log``'s
  quorums, each member's step as the lighthouse logged it: a quorum whose furthest member is at step 0 after the
  training committed (a quorum past step 0 since the last restart); the furthest step reached before each;
* the heuristic: the joined workers whose first committed step came without a heal, grouped within 5 s of the
  cluster's time;
* the rules: :func:`netbench.model.goodput.simulate` over the run's own leaves and joins (``restarts``), priced again
  with this code and ``--calibration``.

    PYTHONPATH=$PWD python3 scripts/bench_churn_restarts.py --calibration reports/ci/calibration.json RUN_DIR ...
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd
from bench_churn_logs import fresh_commit_times  # the script's own folder is on the path
from bench_churn_runs import StoredRun

from netbench.model.calibration import read_calibration
from netbench.rundir.restarts import training_restarts
from netbench.rundir.steps_schema import Col
from netbench.worker.quorum_watch import started_afresh

GROUP_S = 5.0  # the heuristic's heal-less first commits this close are one restart
QUORUM = re.compile(r"\[torchft::lighthouse\] - Quorum! Quorum \{ quorum_id: (\d+)")
MEMBER = re.compile(r'replica_id: "netbench_node_(\d+)[^}]*?step: (\d+)')


def lighthouse_restarts(folder: Path) -> list[tuple[int, int]]:
    """(quorum id, the furthest step the lost training had reached) for each restart in the lighthouse's log."""
    found: list[tuple[int, int]] = []
    reached, first = 0, True  # the furthest step since the training last started; the run's first quorum
    for line in (folder / "workers" / "lighthouse.log").open(errors="replace"):
        quorum = QUORUM.search(line)
        if quorum is None:
            continue
        furthest = max((int(step) for _, step in MEMBER.findall(line)), default=0)
        if started_afresh(furthest, not first) and reached > 0:
            found.append((int(quorum.group(1)), reached))
            reached = 0
        reached, first = max(reached, furthest), False
    return found


def heuristic(steps: pd.DataFrame, applied: list[dict]) -> int:
    """Joined workers' first committed steps without a heal before them, grouped within ``GROUP_S``."""
    times = fresh_commit_times(steps, applied)
    return sum(1 for i, t in enumerate(times) if i == 0 or t - times[i - 1] > GROUP_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--calibration", type=Path, required=True)
    args = parser.parse_args()
    calibration = read_calibration(args.calibration)
    for given in args.runs:
        stored = StoredRun.read(given)
        folder, config, steps = stored.folder, stored.config, stored.steps
        applied = stored.run_json["cluster"]["schedule"]["applied"]
        recorded = training_restarts(steps) if Col.RESTART_QUORUM in steps else None
        rules = stored.rules(calibration)[2]
        logged = lighthouse_restarts(folder)
        shown = "-"
        if recorded is not None:
            lost = sum(r["committed_steps_lost"] for r in recorded)
            quorums = ", ".join("+".join(str(q) for q in r["quorums"]) for r in recorded) or "none"
            shown = f"{len(recorded)} ({lost:.0f} committed steps lost; quorums {quorums})"
        print(
            f"{given} ({config.replicator.name}): recorded {shown}; lighthouse {len(logged)} (quorums "
            f"{', '.join(f'{q} after step {s}' for q, s in logged) or 'none'}); heuristic {heuristic(steps, applied)}; "
            f"rules {rules.restarts}"
        )


if __name__ == "__main__":
    main()
