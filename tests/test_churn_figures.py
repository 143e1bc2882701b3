"""What churn cost a run, from steps.csv's quorum columns: steps lost, heals, goodput; and the leaves and joins handed
to a launcher (no cluster: the launcher's calls are recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from netbench.orchestrator.membership import Membership
from netbench.rundir.churn_figures import churn_figures
from netbench.rundir.layout import RunDir
from netbench.rundir.steps_schema import Col


def rows(*steps: tuple[int, int, bool, int, int, float]) -> pd.DataFrame:
    """(rank, step, committed, quorum replicas, heal bytes, t_start) per row; each step lasts 1 s."""
    return pd.DataFrame(
        [
            {
                Col.RANK: r,
                Col.STEP: s,
                Col.COMMITTED: c,
                Col.QUORUM_REPLICAS: q,
                Col.HEAL_BYTES: h,
                Col.HEAL_S: 0.5 if h else 0.0,
                Col.T_START: t,
                Col.T_END: t + 1.0,
            }
            for r, s, c, q, h, t in steps
        ]
    )


def test_a_committed_step_counts_once_however_many_nodes_record_it_and_a_lost_one_not_at_all() -> None:
    steps = rows(
        (0, 0, True, 2, 0, 0.0),
        (1, 0, True, 2, 0, 0.0),
        (0, 1, False, 2, 0, 1.0),  # a peer left during its exchange: run again
        (0, 2, True, 2, 0, 2.0),
        (1, 1, True, 2, 4000, 2.0),  # node 1 back: healed
        (0, 3, True, 1, 0, 3.0),
    )
    found = churn_figures(steps)
    assert found["steps_lost"] == 1 and found["heals"] == 1
    assert found["heal_bytes"] == 4000 and found["heal_time_s"] == 0.5
    assert found["goodput_steps_per_s"] == pytest.approx(3 / 4)  # steps 0, 2 and 3 over 4 wall seconds


def test_a_run_without_a_quorum_has_no_churn_figures() -> None:
    assert churn_figures(pd.DataFrame({Col.RANK: [0], Col.STEP: [0]})) == {}


def test_a_leave_and_a_join_reach_the_launcher_with_the_steps_the_node_recorded(tmp_path: Path) -> None:
    run_dir = RunDir.create(tmp_path, "full", "abc123")
    records = run_dir.records_path(1)
    records.parent.mkdir(parents=True, exist_ok=True)
    records.write_text("".join(json.dumps({"event": "step", "step": i}) + "\n" for i in range(3)))
    calls: list[tuple] = []
    members = Membership(
        run_dir,
        lambda node: node,
        lambda rank: calls.append(("leave", rank)),
        lambda r, f: calls.append(("join", r, f)),
    )
    members(1, False)
    assert members.away == {1} and members.leaves == {1: 1}
    members(1, True)
    assert calls == [("leave", 1), ("join", 1, 3)] and members.away == set()
    assert members.waiting() == {1}  # joined, no step yet
    with records.open("a") as fh:
        fh.write(json.dumps({"event": "step", "step": 3}) + "\n")
    assert members.waiting() == set()
