"""The default collective timeout follows the model: long enough for slow links, a floor for fast ones."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.timeouts import FLOOR_S, SAFETY, collective_timeout_s, loss_limited_bps, slowest_call_s
from netbench.workloads.config import WorkloadConfig

GPT2_BLOCKS = WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2")


def config(rate_bps: float, replicator: str = "full", loss: float = 0.0, delay_s: float = 0.0, **kw) -> RunConfig:
    cluster = ClusterSpec(
        nodes=2, up={"rate_bps": rate_bps, "loss": loss, "delay_s": delay_s}, down={"rate_bps": rate_bps}
    )
    return RunConfig(cluster=cluster, replicator=ReplicatorConfig(name=replicator), workload=GPT2_BLOCKS, **kw)


def test_explicit_timeout_wins() -> None:
    assert collective_timeout_s(config(1e7, timeout_s=7)) == 7


def test_fast_link_gets_the_floor() -> None:
    assert collective_timeout_s(config(1e9, "dct")) == FLOOR_S


def test_slow_link_gets_room_for_its_slowest_call() -> None:
    slow = config(1e7)  # a dense all-reduce of ~57 MB over 10 Mbit/s: tens of seconds per call
    call = slowest_call_s(slow)
    assert call > FLOOR_S
    assert collective_timeout_s(slow) >= SAFETY * call
    assert slowest_call_s(config(1e8)) == pytest.approx(call / 10, rel=0.05)


def test_sparse_replicator_needs_less_than_dense() -> None:
    assert slowest_call_s(config(1e7, "dct")) < slowest_call_s(config(1e7, "full")) / 3


def test_onebit_has_room_for_its_dense_warm_up_all_reduce() -> None:
    assert slowest_call_s(config(1e7, "onebit")) == pytest.approx(slowest_call_s(config(1e7, "full")), rel=0.05)


def test_loss_and_delay_lower_the_rate_tcp_can_hold() -> None:
    assert loss_limited_bps(1e9, 0.0, 0.5) == 1e9
    assert loss_limited_bps(1e9, 0.01, 0.0) < 1e9
    assert loss_limited_bps(1e9, 0.05, 0.5) < loss_limited_bps(1e9, 0.01, 0.5) < loss_limited_bps(1e9, 0.01, 0.01)
    assert slowest_call_s(config(1e9, loss=0.01, delay_s=0.1)) > slowest_call_s(config(1e9))
