"""A run's schedule segments give the heals they recorded beside the model's heal, and nothing where none was."""

from __future__ import annotations

import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.model.goodput import QUORUM_WAIT_S
from netbench.model.heal import heal_bytes, heal_time_s
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.schedule_results import annotate, churn_error, segment_summary, slowest_node_step_s
from netbench.rundir.steps_schema import Col
from netbench.schedule import parse_text
from netbench.topology.link import DirectionSpec
from netbench.workloads import WorkloadConfig

SPEC4 = ClusterSpec(nodes=4, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
MLP = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2)
T0 = 1000.0


def _config(name: str) -> RunConfig:
    schedule = parse_text("time_s,link,member\n6,n3,leave\n12,n3,join\n", "s.csv")
    return RunConfig(cluster=SPEC4, schedule=schedule, replicator=ReplicatorConfig(name=name), workload=MLP)


def _steps(heal: dict | None) -> pd.DataFrame:
    """Rank 0's steps across the leave and the join, and the joining node's first step (healed where given)."""
    frame = {
        Col.RANK: [0] * 5 + [3],
        Col.STEP: [0, 1, 2, 3, 4, 4],
        Col.WARMUP: [True] + [False] * 5,
        Col.T_START: [T0 - 1, T0, T0 + 7, T0 + 11.9, T0 + 13, T0 + 13],
        Col.STEP_S: [1.0] * 6,
    }
    if heal is not None:
        frame |= {Col.HEAL_BYTES: [0] * 5 + [heal["bytes"]], Col.HEAL_S: [0.0] * 5 + [heal["s"]]}
    return pd.DataFrame(frame)


@pytest.mark.parametrize("name", ["full", "diloco"])
def test_a_segment_gives_its_heals_beside_the_models(name: str) -> None:
    config = _config(name)
    shapes = MLP.declared_shapes()
    predicted = heal_bytes(config.replicator, shapes)
    found = segment_summary(config, annotate(_steps({"bytes": predicted, "s": 0.05}), config, 1.0), None, None, 4, None)
    joined = [s for s in found if s["members"] == 4 and "heals" in s]
    assert len(joined) == 1 and joined[0]["heals"] == 1
    entry = joined[0]
    assert entry["heal_bytes"] == entry["predicted_heal_bytes"] == predicted
    assert entry["heal_bytes_error"] == 0
    assert entry["predicted_heal_s"] == pytest.approx(heal_time_s(config.replicator, shapes, 100e6, 0.0))
    assert entry["heal_s_error"] == pytest.approx(0.05 / entry["predicted_heal_s"] - 1)
    assert not any("heals" in s for s in found if s["members"] == 3)


def test_a_run_without_heals_gets_nothing_new() -> None:
    config = _config("full")
    for steps in (_steps(None), _steps({"bytes": 0, "s": 0.0})):
        found = segment_summary(config, annotate(steps, config, 1.0), None, None, 4, None)
        assert found and not any(key.startswith(("heal", "predicted_heal")) for s in found for key in s)


def test_the_windows_a_change_in_members_cost_are_priced_apart_from_the_steady_step() -> None:
    """A segment's steady step leaves out the windows its changes cost (the first after a leave, a heal, an attempt
    not committed); those are set against the model's steps, heals and the lighthouse's wait, and the segment's mean
    step against the same sum."""
    config = _config("full")
    rank0 = [(T0 - 1, 1.0, True), (T0, 1.0, True), (T0 + 7, 3.0, True), (T0 + 8, 1.0, True)]
    rank0 += [(T0 + 13, 3.0, True), (T0 + 14, 1.0, True), (T0 + 15, 2.0, False), (T0 + 16, 1.0, True)]
    frame = {
        Col.RANK: [0] * len(rank0) + [3],
        Col.STEP: list(range(len(rank0))) + [4],
        Col.WARMUP: [True] + [False] * len(rank0),
        Col.T_START: [t for t, _, _ in rank0] + [T0 + 13],
        Col.STEP_S: [s for _, s, _ in rank0] + [3.0],
        Col.COMMITTED: [c for _, _, c in rank0] + [True],
        Col.HEAL_BYTES: [0] * len(rank0) + [100],
        Col.HEAL_S: [0.0] * len(rank0) + [2.0],
        Col.COMPUTE_S: [0.5] * (len(rank0) + 1),
    }
    found = {
        s["members"]: s
        for s in segment_summary(config, annotate(pd.DataFrame(frame), config, 1.0), None, None, 4, None)
        if s["start_s"] > 0
    }
    away, back = found[3], found[4]
    assert (away["transient_steps"], away["transient_s"], away["step_time_s"]) == (1, 3.0, 1.0)
    assert (back["transient_steps"], back["transient_s"], back["step_time_s"]) == (2, 5.0, 1.0)
    model = away["predicted_step_time_s"]
    assert away["predicted_transient_s"] == pytest.approx(model + QUORUM_WAIT_S)
    assert away["segment_step_time_s"] == pytest.approx(2.0)
    assert away["predicted_segment_step_time_s"] == pytest.approx((2 * model + QUORUM_WAIT_S) / 2)
    model = back["predicted_step_time_s"]
    assert back["predicted_transient_s"] == pytest.approx(2 * model + back["predicted_heal_s"])


def test_a_run_through_churn_is_held_to_the_model_with_its_costs_priced() -> None:
    found = [
        {"steps": 10, "segment_step_time_s": 2.0, "predicted_segment_step_time_s": 1.5, "transient_s": 4.0},
        {"steps": 30, "step_time_s": 1.0, "predicted_step_time_s": 1.1},
    ]
    assert churn_error(found)["churn_model_error"] == pytest.approx((15 + 33) / (20 + 30) - 1)
    assert churn_error(found[1:]) == {}  # members never changed


def test_a_windows_straggler_is_counted_once_in_the_segments_step() -> None:
    """Nodes wait for one another only at a window's exchange: the node slow in the local steps waits least at the
    sync. The segment's step is each node's mean at the slowest node (the window's time per step), not the mean of
    each step's slowest node, which would count the straggler's lead twice."""
    fast = [0.1, 0.1, 0.1, 0.5]  # waits 0.3 s at the sync for the other
    slow = [0.2, 0.2, 0.2, 0.2]
    rows = pd.DataFrame({Col.RANK: [0] * 4 + [1] * 4, Col.STEP: list(range(4)) * 2, Col.STEP_S: fast + slow})
    assert slowest_node_step_s(rows, "mean") == pytest.approx(0.2)
    assert rows.groupby(Col.STEP)[Col.STEP_S].max().mean() == pytest.approx(0.275)  # what it is not
    assert slowest_node_step_s(rows, "sum") == pytest.approx(0.8)
