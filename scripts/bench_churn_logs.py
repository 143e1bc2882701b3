#!/usr/bin/env python3
"""What a `full` or DiLoCo run through random churn lost, by mechanism, from its workers' and lighthouse's logs, beside
what the goodput rules (:func:`netbench.model.goodput.simulate`) charge over the run's own changes.

Per run folder, in the cluster's seconds (wall time over the run's dilation):

* the time missing: the rules' committed steps over the run's changes less the run's, at the rules' rate;
* the waits each worker logged as an exception (``workers/rankN.log``), each from the worker's last timestamped line
  before it to its first after it, the waits of one kind on several workers that overlap counted once: a process
  group's configuration that waits out the exchange timeout (the rules price these: their count beside), a receive
  that waits out the timeout, a store client that waits on a store whose node left, gloo's connect to a peer gone, a
  heal that fails on the node healed (the rules' failed heals beside);
* the restarts: the rules' (every node that held the training gone, the nodes back train afresh without a heal)
  beside the run's, the joined workers whose first committed step came without a heal (each restart holds one or
  more), and the heals that succeeded: the rules' beside the run's quorums that healed;
* from ``workers/lighthouse.log``: after each leave of a member of the quorum in force, how long until the next
  quorum without it formed (median, and how many over 1.5 s), and the re-formations that waited over 1.5 s from their
  first member's request, their excess over the lighthouse's wait W in all, and by what held each: a node back that
  asked first (within 0.5 s of its join: it waits for the others' next quorum, which the rules price), else the
  logged worker wait that overlaps it most, else none logged.

With ``--fit N``, also a flat longer wait (W + c for every quorum) fitted to the first N runs' goodput (least
squares, c in steps of 0.1 s up to 4 s), and every run's error with it.

    PYTHONPATH=$PWD python3 scripts/bench_churn_logs.py --calibration reports/ci/calibration.json RUN_DIR ...
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from bench_churn_runs import StoredRun  # the script's own folder is on the path

from netbench.model.calibration import read_calibration
from netbench.model.goodput import QUORUM_WAIT_S, simulate
from netbench.rundir.churn_figures import churn_figures, span_s
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps

# the waits a worker logs as "got exception ...", by what ended them
WAITS = {
    "configure waits out T": r"pg configure: wait timeout",
    "receive waits out T": r"waiting for work.*Timed out waiting",
    "store client waits on a store gone": r"pg configure: (The client socket has timed out|the quorum's store)",
    "gloo connect to a peer gone": r"pg configure: Gloo connectFullMesh failed",
    "heal fails on the node healed": r"got exception in recovery",
}
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+) ")
LONG_S = 1.5  # a re-formation this much after its leave waited on more than the lighthouse's W


def wall(stamp: str) -> float:
    return datetime.fromisoformat(stamp[:23]).replace(tzinfo=UTC).timestamp()


def merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping spans as one."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def logged_waits(folder: Path, cluster_s) -> dict[str, list[tuple[float, float]]]:
    """Each kind of wait's spans over all workers, merged."""
    spans: dict[str, list[tuple[float, float]]] = {kind: [] for kind in WAITS}
    for log in sorted((folder / "workers").glob("rank*.log")):
        last, pending = None, []
        for line in log.open(errors="replace"):
            stamped = STAMP.match(line)
            if stamped:
                now = wall(stamped.group(1))
                for kind, start in pending:
                    spans[kind].append((cluster_s(start), cluster_s(now)))
                last, pending = now, []
            elif "got exception" in line and last is not None:
                kind = next((k for k, pattern in WAITS.items() if re.search(pattern, line)), None)
                if kind is not None:
                    pending.append((kind, last))
    return {kind: merged(found) for kind, found in spans.items()}


def fresh_commit_times(steps: pd.DataFrame, applied: list[dict]) -> list[float]:
    """When each worker started by a join first committed a step without a heal before it (its quorum held nobody
    ahead of it: the training started afresh), in the schedule's time, in order."""
    rows = measured_steps(steps)
    times = []
    for change in applied:
        if not change["what"].endswith("joined"):
            continue
        node, at = change["what"].split()[0], change["time_s"]
        later = [c["time_s"] for c in applied if c["time_s"] > at and c["what"] == f"{node} left"]
        mine = rows[
            (rows[Col.RANK] == int(node.removeprefix("n")))
            & (rows[Col.SCHEDULE_ELAPSED_S] >= at)
            & (rows[Col.SCHEDULE_ELAPSED_S] < min(later, default=float("inf")))
        ]
        committed = mine[mine[Col.COMMITTED].astype(bool)]
        healed = mine[mine[Col.HEAL_BYTES].fillna(0) > 0]
        if not committed.empty and (healed.empty or healed.index.min() > committed.index.min()):
            times.append(float(committed[Col.SCHEDULE_ELAPSED_S].iloc[0]))
    return sorted(times)


def fresh_commits(steps: pd.DataFrame, applied: list[dict]) -> tuple[int, int]:
    """Of the workers started by a join, how many first committed a step without a heal (:func:`fresh_commit_times`),
    and how many quorums healed (heals within 1 s counted once)."""
    rows = measured_steps(steps)
    fresh = len(fresh_commit_times(steps, applied))
    heal_times = sorted(rows.loc[rows[Col.HEAL_BYTES].fillna(0) > 0, Col.SCHEDULE_ELAPSED_S])
    healing = sum(1 for i, t in enumerate(heal_times) if i == 0 or t - heal_times[i - 1] > 1.0)
    return fresh, healing


def quorums(folder: Path, cluster_s) -> tuple[list[tuple[float, set[str]]], list[tuple[float, float, str | None]]]:
    """The lighthouse's quorums (when, who) and, for each re-formed one, its wait: from its first member's request
    to the quorum, and that member."""
    formed, waits, asked, bumped = [], [], {}, None
    for line in (folder / "workers" / "lighthouse.log").open(errors="replace"):
        found = re.match(r"(\S+) \[INFO\] \[torchft::lighthouse\] - (.*)", line)
        if not found:
            continue
        at, message = cluster_s(wall(found.group(1))), found.group(2)
        if request := re.match(r"Received quorum request for replica netbench_node_(\d+)", message):
            asked["n" + request.group(1)] = at
        elif bump := re.match(r"Detected quorum change, bumping quorum_id to (\d+)", message):
            bumped = int(bump.group(1))
        elif quorum := re.match(r"Quorum! Quorum \{ quorum_id: (\d+)", message):
            members = {"n" + n for n in re.findall(r'replica_id: "netbench_node_(\d+)', message)}
            formed.append((at, members))
            if bumped == int(quorum.group(1)):
                first = min((n for n in members if n in asked), key=asked.get, default=None)
                waits.append((asked[first] if first else at, at, first))
            bumped, asked = None, {}
    return formed, waits


def held_by(
    reformed: list[tuple[float, float, str | None]],
    waits: dict[str, list[tuple[float, float]]],
    joins: dict[str, list[float]],
) -> dict[str, tuple[int, float]]:
    """Each re-formation that waited over ``LONG_S``, its time over W by what held it: its first asker a node back
    within 0.5 s (a node back waits for the others' next quorum: a heal in progress, or their step), else the kind
    of logged worker wait that overlaps its wait most, else "no worker wait logged"; per kind, how many and how
    long."""
    out: dict[str, tuple[int, float]] = {}
    for a, b, first in reformed:
        if b - a <= LONG_S:
            continue
        overlap = {kind: sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans) for kind, spans in waits.items()}
        if first is not None and any(0 <= a - j <= 0.5 for j in joins.get(first, [])):
            kind = "a node back asked first"
        elif max(overlap.values(), default=0.0) > 0:
            kind = max(overlap, key=overlap.get)
        else:
            kind = "no worker wait logged"
        n, total = out.get(kind, (0, 0.0))
        out[kind] = (n + 1, total + b - a - QUORUM_WAIT_S)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--calibration", type=Path, required=True)
    parser.add_argument("--fit", type=int, default=0, help="fit a longer quorum wait to the first N runs")
    args = parser.parse_args()
    calibration = read_calibration(args.calibration)
    replays = []  # (run, its goodput, what prices it again with another wait)
    for given in args.runs:
        stored = StoredRun.read(given)
        folder, config, steps, dilation = stored.folder, stored.config, stored.steps, stored.dilation
        applied = stored.run_json["cluster"]["schedule"]["applied"]
        first = applied[0]

        def cluster_s(at: float, first: dict = first, dilation: float = dilation) -> float:
            return first["time_s"] + (at - first["wall_time"]) / dilation

        measured = measured_steps(steps)
        span = span_s(measured)
        goodput = churn_figures(measured)["goodput_steps_per_s"]
        step_at, recovery, rules = stored.rules(calibration)
        names = [n.name for n in config.cluster.topology.nodes]

        def again(extra: float, c=config, n=names, s=span, a=step_at, r=recovery) -> float:
            return simulate(c.schedule.changes, n, s, a, replace(r, quorum_wait_s=r.quorum_wait_s + extra)).steps_per_s

        replays.append((folder.name, goodput, again))
        missing = (rules.committed_steps - goodput * span) / rules.steps_per_s
        print(
            f"{folder.name} ({config.replicator.name}): {span:.0f} s, {len(applied)} changes; measured {goodput:.3f}, "
            f"rules over its changes {rules.steps_per_s:.3f} ({100 * (rules.steps_per_s / goodput - 1):+.1f} %); "
            f"time missing {missing:.1f} s"
        )
        waits = logged_waits(folder, cluster_s)
        priced = {
            "configure waits out T": f"; rules {rules.stuck} ({rules.stuck * recovery.exchange_timeout_s:.0f} s)",
            "heal fails on the node healed": f"; rules {rules.failed_heals}",
        }
        for kind, spans in waits.items():
            print(f"  {kind}: {len(spans)}, {sum(b - a for a, b in spans):.1f} s{priced.get(kind, '')}")
        fresh, healing = fresh_commits(steps, applied)
        print(
            f"  restarts: rules {rules.restarts}; the run's joined workers first committing without a heal {fresh}; "
            f"heals that succeeded: rules {rules.heals - rules.failed_heals}, the run's quorums that healed {healing}"
        )
        formed, reformed = quorums(folder, cluster_s)
        after = []
        for change in applied:
            node, left_at = change["what"].split()[0], cluster_s(change["wall_time"])
            before = [members for at, members in formed if at <= left_at]
            if not change["what"].endswith("left") or not before or node not in before[-1]:
                continue
            later = [at for at, members in formed if at > left_at and node not in members]
            if later:
                after.append(later[0] - left_at)
        long = [b - a for a, b, _ in reformed if b - a > LONG_S]
        print(
            f"  leaves of a member: {len(after)}, next quorum after a median {statistics.median(after):.2f} s, "
            f"{sum(w > LONG_S for w in after)} over {LONG_S:g} s; re-formations waiting over {LONG_S:g} s from "
            f"their first request: {len(long)}, {sum(long) - QUORUM_WAIT_S * len(long):.1f} s over W"
        )
        joins: dict[str, list[float]] = {}
        for change in applied:
            if change["what"].endswith("joined"):
                joins.setdefault(change["what"].split()[0], []).append(cluster_s(change["wall_time"]))
        held = held_by(reformed, waits, joins)
        print(
            "  those re-formations' time over W, by what held them: "
            + "; ".join(f"{kind} {n}, {s_:.1f} s" for kind, (n, s_) in held.items())
        )

    if args.fit:
        fitted = min(
            (round(0.1 * i, 1) for i in range(41)),
            key=lambda c: sum((again(c) / goodput - 1) ** 2 for _, goodput, again in replays[: args.fit]),
        )
        print(f"W + {fitted:g} s, fitted to the first {args.fit} runs:")
        for name, goodput, again in replays:
            print(
                f"  {name}: {100 * (again(0.0) / goodput - 1):+.1f} % -> {100 * (again(fitted) / goodput - 1):+.1f} %"
            )


if __name__ == "__main__":
    main()
