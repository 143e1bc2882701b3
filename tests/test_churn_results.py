"""A run through churn held to the goodput model's rules played over its own leaves and joins."""

from __future__ import annotations

import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.churn_results import churn_model, restart_s, run_recovery
from netbench.orchestrator.run.schedule_results import annotate, segment_summary
from netbench.rundir.churn_figures import churn_figures
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps
from netbench.schedule import parse_text
from netbench.topology.link import DirectionSpec
from netbench.workloads import WorkloadConfig

SPEC4 = ClusterSpec(nodes=4, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
MLP = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2)
T0 = 1000.0
JOIN = {"segment": 1, "time_s": 12.0, "wall_time": T0 + 12.0, "what": "n3 joined"}
CLUSTER = {"quorum": {"exchange_timeout_s": 5.0}, "schedule": {"applied": [JOIN]}}


def _config(schedule: str = "time_s,link,member\n6,n3,leave\n12,n3,join\n") -> RunConfig:
    return RunConfig(
        cluster=SPEC4, schedule=parse_text(schedule, "s.csv"), replicator=ReplicatorConfig(name="full"), workload=MLP
    )


def _steps(config: RunConfig, step_s: float) -> pd.DataFrame:
    """Rank 0 trains through the leave (6 s) and the join (12 s); the joining node's first step is 1 s after its
    join, healed."""
    starts = [T0 - 1] + [T0 + i * step_s for i in range(int(20 / step_s))]
    n = len(starts)
    frame = {
        Col.RANK: [0] * n + [3],
        Col.STEP: list(range(n)) + [n - 1],
        Col.WARMUP: [True] + [False] * n,
        Col.T_START: starts + [T0 + 13.0],
        Col.STEP_S: [step_s] * n + [step_s],
        Col.COMMITTED: [True] * (n + 1),
        Col.QUORUM_REPLICAS: [4] * (n + 1),
        Col.HEAL_BYTES: [0] * n + [100],
        Col.HEAL_S: [0.0] * n + [0.5],
        Col.COMPUTE_S: [0.5] * (n + 1),
    }
    return annotate(pd.DataFrame(frame), config, 1.0)


def _found(config: RunConfig, steps: pd.DataFrame) -> list[dict]:
    return segment_summary(config, steps, None, None, 4, None)


def _goodput(steps: pd.DataFrame) -> float:
    """The run's measured goodput, as its summary holds it."""
    return churn_figures(measured_steps(steps))["goodput_steps_per_s"]


def test_a_joining_workers_start_is_the_time_from_its_join_to_the_next_step_in_cluster_seconds() -> None:
    steps = pd.DataFrame({Col.T_START: [T0 + 11.0, T0 + 12.4, T0 + 13.0]})
    assert restart_s(steps, [JOIN], 1.0) == pytest.approx(0.4)
    assert restart_s(steps, [JOIN], 2.0) == pytest.approx(0.2)
    assert restart_s(steps, [{"wall_time": T0 + 12.0, "what": "n3 left"}], 1.0) == 0.0


def test_the_model_replays_the_runs_leave_and_join_and_sets_its_goodput_beside_the_runs() -> None:
    config = _config()
    steps = _steps(config, 1.0)
    found = _found(config, steps)
    out = churn_model(config, steps, found, CLUSTER, 1.0, _goodput(steps))
    step_at, recovery = run_recovery(config, steps, found, CLUSTER, 1.0)
    assert recovery.exchange_timeout_s == 5.0 and recovery.period == 1 and recovery.heal_s > 0
    plain = 1.0 / step_at(4)[0]
    assert 0 < out["goodput_model_steps_per_s"] < plain  # the leave, the wait and the heal cost steps
    slower = _steps(config, 2.0)
    slower_out = churn_model(config, slower, _found(config, slower), CLUSTER, 1.0, _goodput(slower))
    assert slower_out["goodput_model_error"] > out["goodput_model_error"]  # the same model, a slower run


def test_a_run_without_a_change_in_members_or_a_recorded_wait_bound_gets_no_goodput_model() -> None:
    config = _config()
    steps = _steps(config, 1.0)
    found = _found(config, steps)
    assert churn_model(config, steps, found, {"schedule": {"applied": [JOIN]}}, 1.0, _goodput(steps)) == {}
    links_only = _config("time_s,link,rate\n6,n3,50mbit\n")
    assert churn_model(links_only, steps, found, CLUSTER, 1.0, _goodput(steps)) == {}
