"""trace.json through leaves and joins: a membership process with each change and the nodes present, and each
step's quorum figures in its arguments."""

from __future__ import annotations

from netbench.rundir.steps_schema import Col
from netbench.trace import events as ev
from netbench.trace.membership import membership_events
from netbench.trace.ranks import step_events

ORIGIN = 1_000.0
RUN_JSON = {
    "cluster": {
        "schedule": {
            "applied": [
                {"time_s": 1.4, "wall_time": ORIGIN + 2.0, "what": "n1 left"},
                {"time_s": 2.0, "wall_time": ORIGIN + 3.0, "what": "link n0 100mbit"},  # not a membership change
                {"time_s": 7.4, "wall_time": ORIGIN + 9.5, "what": "n2 left"},
                {"time_s": 7.5, "wall_time": ORIGIN + 9.0, "what": "n1 joined"},
            ]
        }
    }
}


def test_each_leave_and_join_is_a_moment_and_the_nodes_present_follow_them() -> None:
    found = membership_events(RUN_JSON, ORIGIN, nodes=4)
    moments = [(e["name"], e["ts"]) for e in found if e["ph"] == "i"]
    assert moments == [("n1 left", 2e6), ("n1 joined", 9e6), ("n2 left", 9.5e6)]
    present = [(e["ts"], e["args"]["nodes"]) for e in found if e["ph"] == "C"]
    assert present == [(0.0, 4), (2e6, 3), (9e6, 4), (9.5e6, 3)]
    assert all(e["pid"] == ev.MEMBERSHIP_PID for e in found)


def test_a_run_without_leaves_or_joins_has_no_membership_process() -> None:
    assert (
        membership_events(
            {"cluster": {"schedule": {"applied": RUN_JSON["cluster"]["schedule"]["applied"][1:2]}}}, ORIGIN, 4
        )
        == []
    )
    assert membership_events({}, ORIGIN, 4) == []


def test_a_steps_quorum_figures_are_in_its_arguments() -> None:
    record = {
        Col.STEP: 12,
        Col.T_START: ORIGIN + 1.0,
        Col.T_END: ORIGIN + 1.5,
        Col.QUORUM_REPLICAS: 2,
        Col.COMMITTED: True,
        Col.HEAL_BYTES: 9_000_000,
        Col.RESTART_QUORUM: None,
    }
    step = next(e for e in step_events(ev.RANK_PID, record, ORIGIN) if e["cat"] == "step")
    assert step["args"].items() >= {"quorum_replicas": 2, "committed": True, "heal_bytes": 9_000_000}.items()
    assert "restart_quorum" not in step["args"]
