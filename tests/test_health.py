"""Unit checks of what a run reports about a misbehaving network: retransmissions, stalls, slowdown."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pandas as pd
import pytest
from rich.console import Console

from netbench.capture.pcap import RetransTracker
from netbench.cli import problems
from netbench.counters import CounterError, parse_retrans_segs
from netbench.orchestrator.run import health

SNMP = "\n".join(
    [
        "Ip: Forwarding DefaultTTL InReceives",
        "Ip: 1 64 12345",
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab "
        "InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors",
        "Tcp: 1 200 120000 -1 10 5 0 1 3 5000 4800 17 0 2 0",
        "Udp: InDatagrams NoPorts",
        "Udp: 3 0",
        "",
    ]
)


def test_retrans_segs_from_proc_net_snmp() -> None:
    assert parse_retrans_segs(SNMP) == 17
    with pytest.raises(CounterError):
        parse_retrans_segs("Ip: Forwarding\nIp: 1\n")


def test_tracker_counts_payload_sent_again_and_nothing_else() -> None:
    t, flow = RetransTracker(), ("a", 1, "b", 2)
    assert t.retransmitted(flow, 1000, 100) == 0  # first data seen
    assert t.retransmitted(flow, 1100, 100) == 0  # in order
    assert t.retransmitted(flow, 1100, 100) == 100  # the same segment again
    assert t.retransmitted(flow, 1150, 100) == 50  # half old, half new
    assert t.retransmitted(flow, 1250, 0) == 0  # a pure ACK carries nothing
    assert t.retransmitted(("a", 1, "b", 3), 1100, 100) == 0  # another flow has its own sequence


def test_tracker_survives_sequence_wraparound() -> None:
    t, flow = RetransTracker(), ("a", 1, "b", 2)
    top = (1 << 32) - 100
    assert t.retransmitted(flow, top, 100) == 0
    assert t.retransmitted(flow, 0, 100) == 0  # wrapped: new data
    assert t.retransmitted(flow, top + 50, 50) == 50  # from before the wrap: old
    assert t.retransmitted(flow, 100, 10) == 0


def _steps(step_s: list[float], ranks: int = 2) -> pd.DataFrame:
    rows = [
        {
            "rank": r,
            "step": i,
            "step_s": s,
            "warmup": i == 0,
            "retrans_segs": 2 * r,
            "capture_tx_retrans_bytes": 1448 * r,
            "capture_tx_payload_bytes": 14480,
        }
        for i, s in enumerate(step_s)
        for r in range(ranks)
    ]
    return pd.DataFrame(rows)


def test_a_step_far_above_the_typical_one_is_a_stall() -> None:
    steps = _steps([0.5, 0.2, 0.21, 6.3, 0.2, 0.19])
    assert health.stalls(steps) == [{"step": 3, "seconds": 6.3, "typical_s": pytest.approx(0.205, abs=1e-3)}]
    assert health.stalls(_steps([0.2, 1.5, 0.2, 0.2])) == []  # slow, but under STALL_MIN_S: noise on a busy host


def test_figures_are_means_and_slowdown_is_against_the_model() -> None:
    steps = _steps([0.5, 0.2, 0.4])
    measured = steps[~steps["warmup"]]
    out = health.figures(measured, steps)
    assert out["step_time_mean_s"] == pytest.approx(0.3)
    assert out["retrans_segs_per_step"] == 1.0 and out["retrans_bytes_per_step"] == 724.0
    assert out["retrans_fraction"] == pytest.approx(724 / 14480)
    assert health.slowdown({**out, "predicted": {"step_time_s": 0.2}}) == {"slowdown_vs_model": pytest.approx(1.5)}
    assert health.slowdown(out) == {}


def _churned(step_s: list[float], **columns: list) -> pd.DataFrame:
    """One node's steps through churn: its quorum's columns as a torchft run writes them."""
    rows = {"rank": [0] * len(step_s), "step": list(range(len(step_s))), "step_s": step_s}
    defaults = {
        "quorum_replicas": [4] * len(step_s),
        "committed": [True] * len(step_s),
        "heal_bytes": [0] * len(step_s),
    }
    return pd.DataFrame({**rows, **defaults, **columns})


def test_a_slow_step_that_healed_or_dropped_its_update_is_explained_by_the_change_of_members() -> None:
    steps = _churned(
        [0.2, 0.2, 4.4, 0.2, 5.0, 0.2, 0.2, 0.2],
        heal_bytes=[0, 0, 9_410_676, 0, 0, 0, 0, 0],
        committed=[True, True, True, True, False, True, True, True],
    )
    assert [(s["step"], s.get("membership")) for s in health.stalls(steps)] == [(2, "heal"), (4, "dropped")]


def test_a_slow_step_whose_quorum_changed_size_is_a_re_formation_and_one_that_did_not_is_a_stall() -> None:
    steps = _churned([0.2, 0.2, 5.0, 0.2, 0.2, 6.0, 0.2, 0.2], quorum_replicas=[4, 4, 3, 3, 3, 3, 3, 3])
    found = {s["step"]: s.get("membership") for s in health.stalls(steps)}
    assert found == {2: "re-formed", 5: None}


def test_a_slow_step_of_a_node_while_another_is_healed_is_explained_as_the_heal_it_sent() -> None:
    healer = _churned([0.2, 0.2, 3.1, 0.2], t_start=[0.0, 0.2, 0.4, 3.5], t_end=[0.2, 0.4, 3.5, 3.7])
    healed = _churned(
        [0.2, 0.2, 3.0, 0.2],
        heal_bytes=[0, 0, 5_646_452, 0],
        t_start=[0.0, 0.2, 0.45, 3.5],
        t_end=[0.2, 0.4, 3.45, 3.7],
    ).assign(rank=1)
    alone = _churned([0.2, 0.2, 3.1, 0.2], t_start=[10.0, 10.2, 10.4, 13.5], t_end=[10.2, 10.4, 13.5, 13.7])
    assert health.membership_changes(pd.concat([healer, healed], ignore_index=True)) == {2: "heal sent", 6: "heal"}
    assert health.membership_changes(pd.concat([alone, healed], ignore_index=True)) == {6: "heal"}


def test_a_step_no_node_timed_is_no_stall_and_does_not_hide_the_others() -> None:
    steps = _steps([0.5, 0.2, 0.21, 6.3, 0.2, 0.19])
    steps.loc[steps["step"] == 1, "step_s"] = float("nan")
    assert [s["step"] for s in health.stalls(steps)] == [3]


def test_a_run_without_quorums_marks_no_stall_as_a_change_of_members() -> None:
    assert all("membership" not in s for s in health.stalls(_steps([0.5, 0.2, 0.21, 6.3, 0.2, 0.19])))


def test_the_run_prints_explained_slow_steps_apart_from_the_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(problems, "console", Console(file=out, width=200, color_system=None))
    steps = _churned([0.2, 0.2, 4.4, 0.2, 6.0, 0.2, 0.2, 0.2], heal_bytes=[0, 0, 9_410_676, 0, 0, 0, 0, 0])
    problems.report_problems(SimpleNamespace(run_json={}, summary={"stalls": health.stalls(steps)}))
    lines = out.getvalue().splitlines()
    assert lines == [
        "stalled: 1 step(s) (step 4 took 6.0 s; a typical step took 0.20 s)",
        "slow steps the changes of members explain: 1 (1 heal)",
    ]
