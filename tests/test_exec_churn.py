"""A program under `netbench exec` whose nodes leave and join: a leave kills the node's program, a join starts it again
with the same environment, its step records going on where the node's left off; the exec ends ok, and run.json,
schedule.csv and steps.csv say who left, when, and how many nodes each step ran with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import leftovers
import pandas as pd
import pytest

from netbench.rundir.steps_schema import Col

REPO = Path(__file__).resolve().parents[1]
STEPPING = (
    "import os, time, netbench\n"
    "for i in range({steps}):\n"
    "    with netbench.step():\n"
    "        time.sleep(0.1)\n"
    "print('lived', os.getpid(), flush=True)\n"
)


def test_a_joining_node_records_its_steps_after_the_ones_it_recorded_before_it_left(tmp_path: Path) -> None:
    records = tmp_path / "rank0.jsonl"
    env = {**os.environ, "NETBENCH_RECORDS": str(records), "NETBENCH_IFACE": "lo", "NETBENCH_RANK": "0"}
    code = STEPPING.format(steps=2)
    for again in ({}, {"NETBENCH_FIRST_STEP": "2"}):  # the program as started, then as started on a join
        done = subprocess.run([sys.executable, "-c", code], env={**env, **again}, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["event"] for r in lines] == ["start", "step", "step", "start", "step", "step"]
    assert [r["step"] for r in lines if r["event"] == "step"] == [0, 1, 2, 3]


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_node_that_leaves_and_joins_runs_its_program_again_and_the_exec_ends_ok(tmp_path: Path) -> None:
    schedule = tmp_path / "churn.csv"
    schedule.write_text("time_s,link,member\n1,n2,leave\n2.5,n2,join\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "exec", "--nodes", "3", "--bw", "100mbit", "--no-capture", "--json"]
        + ["--out", str(out), "--schedule", str(schedule), "--", sys.executable, "-c", STEPPING.format(steps=40)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    run_dir = next(out.rglob("run.json")).parent
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["status"] == "ok" and summary
    nodes = {n["node"]: n for n in run_json["exec"]["nodes"]}
    assert [nodes[i]["leaves"] for i in range(3)] == [0, 0, 1] and nodes[2]["exit_code"] == 0
    applied = [row["what"] for row in run_json["cluster"]["schedule"]["applied"]]
    assert applied == ["n2 left", "n2 joined"]
    assert (run_dir / "workers" / "rank2.log").read_text().count("lived") == 1  # the killed program never got there
    steps = pd.read_csv(run_dir / "steps.csv")
    mine = steps[steps[Col.RANK] == 2].sort_values(Col.STEP)
    assert list(mine[Col.STEP]) == list(range(len(mine))) and len(mine) > 40  # every step, numbered on after the join
    members = steps[steps[Col.RANK] == 0].sort_values(Col.STEP)[Col.SCHEDULE_MEMBERS]
    assert set(members) == {2, 3}  # rank 0 stepped through the absence
    assert leftovers.clean(run_json["run_id"]), leftovers.traces(run_json["run_id"])


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_program_that_fails_after_a_join_fails_the_exec_with_its_own_code(tmp_path: Path) -> None:
    schedule = tmp_path / "churn.csv"
    schedule.write_text("time_s,link,member\n1,n1,leave\n1.5,n1,join\n2.5,n1,leave\n3,n1,join\n4.5,n1,leave\n")
    failed = tmp_path / "failed-once"
    fails_once = (  # the first program started on a join fails; the next runs until the leave at 4.5 s kills it
        f"import os, sys\nif os.environ.get('NETBENCH_FIRST_STEP') and not os.path.exists({str(failed)!r}):\n"
        f"    open({str(failed)!r}, 'w').close()\n    sys.exit(3)\n" + STEPPING.format(steps=60)
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "exec", "--nodes", "2", "--bw", "100mbit", "--no-capture", "--json"]
        + ["--out", str(out), "--schedule", str(schedule), "--", sys.executable, "-c", fails_once],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    run_json = json.loads(next(out.rglob("run.json")).read_text())
    assert done.returncode == 3, done.stderr[-2000:]
    assert run_json["reason"] == "node 1 exited with code 3"  # not the SIGKILL of the leave at 4.5 s
    applied = [row["what"] for row in run_json["cluster"]["schedule"]["applied"]]
    assert applied == ["n1 left", "n1 joined", "n1 left", "n1 joined", "n1 left"]
    assert leftovers.clean(run_json["run_id"]), leftovers.traces(run_json["run_id"])
