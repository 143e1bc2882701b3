"""The training lost and started afresh: a worker marks the step whose quorum (torchft's answer, as its lighthouse
client returns it) held nobody past step 0 after the run began; the run aggregates the marks into restarts and the
committed steps each threw away, and prints them in one line beside the model's rules."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from torchft._torchft import QuorumResult

from netbench.reports.schedule_figure import restart_line, segment_lines
from netbench.rundir.restarts import restart_figures, training_restarts
from netbench.rundir.steps_schema import Col
from netbench.worker.quorum_watch import QuorumWatch, started_afresh


def quorum(quorum_id: int, max_step: int) -> QuorumResult:
    q = QuorumResult()
    q.quorum_id, q.max_step = quorum_id, max_step
    return q


class Client:
    """torchft's lighthouse client as the manager calls it: ``_quorum`` answers in turn, other calls recorded."""

    def __init__(self, *answers: QuorumResult) -> None:
        self.answers, self.calls = list(answers), []

    def _quorum(self, **kwargs: Any) -> QuorumResult:
        self.calls.append(kwargs)
        return self.answers.pop(0)

    def should_commit(self, *args: Any) -> bool:
        self.calls.append(args)
        return True


def test_only_a_quorum_at_step_zero_after_the_run_began_started_afresh() -> None:
    assert not started_afresh(0, run_began=False)  # the run's first quorum starts from the first weights by design
    assert started_afresh(0, run_began=True)
    assert not started_afresh(7, run_began=True)


def test_the_watch_hands_every_call_through_and_marks_the_quorum_that_started_afresh() -> None:
    client = Client(quorum(1, 0), quorum(2, 5), quorum(4, 0), quorum(5, 0))
    watch = QuorumWatch(client, joining=False)
    assert watch._quorum(step=0).quorum_id == 1 and watch.take_restart() is None  # the run's first quorum
    assert watch._quorum(step=5).max_step == 5 and watch.take_restart() is None
    watch._quorum(step=0)
    watch._quorum(step=0)
    assert watch.take_restart() == 4, "the first quorum at step 0 since the last take"
    assert watch.take_restart() is None
    assert watch.should_commit(1, 2) and client.calls[-1] == (1, 2)
    assert [c["step"] for c in client.calls[:-1]] == [0, 5, 0, 0]


def test_a_joining_worker_whose_first_quorum_holds_nobody_past_step_zero_marks_it() -> None:
    watch = QuorumWatch(Client(quorum(9, 0)), joining=True)
    watch._quorum()
    assert watch.take_restart() == 9


def steps(*rows: tuple[int, int, bool, int, float, int | None]) -> pd.DataFrame:
    """(rank, step, committed, quorum replicas, t_start, restart quorum) per row; each step lasts 1 s."""
    return pd.DataFrame(
        [
            {
                Col.RANK: r,
                Col.STEP: s,
                Col.COMMITTED: c,
                Col.QUORUM_REPLICAS: q,
                Col.T_START: t,
                Col.T_END: t + 1.0,
                Col.STEP_S: 1.0,
                Col.SCHEDULE_ELAPSED_S: t,
                Col.RESTART_QUORUM: restart,
            }
            for r, s, c, q, t, restart in rows
        ]
    )


def test_restarts_count_the_committed_steps_they_threw_away_and_a_failed_fresh_quorum_is_the_same_restart() -> None:
    found = training_restarts(
        steps(
            (0, 0, True, 2, 0.0, None),
            (1, 0, True, 2, 0.0, None),
            (0, 1, True, 2, 1.0, None),
            (1, 1, True, 2, 1.0, None),
            (0, 2, True, 1, 2.0, None),  # three steps of training, then every node holding it left
            (2, 0, False, 2, 10.0, 7),  # a fresh quorum at step 0: a node back in it left before it committed
            (3, 0, False, 2, 10.0, 7),
            (2, 1, True, 2, 12.0, 8),  # the next fresh quorum: the same restart
            (1, 5, True, 2, 12.0, 8),
            (2, 2, True, 2, 13.0, None),
            (1, 6, True, 2, 13.0, None),
            (2, 3, True, 2, 20.0, 11),  # the fresh training committed two steps, then was lost too
            (0, 9, True, 2, 20.0, 11),
        )
    )
    assert [r["quorums"] for r in found] == [[7, 8], [11]]
    assert found[0]["members"] == [1, 2, 3] and found[0]["time_s"] == 10.0 and found[0]["step"] == 0
    assert [r["committed_steps_lost"] for r in found] == [pytest.approx(3.0), pytest.approx(2.0)]


def test_a_quorum_at_step_zero_before_anything_was_committed_threw_nothing_away() -> None:
    rows = steps((0, 0, False, 2, 0.0, None), (1, 0, True, 2, 2.0, 3), (2, 0, True, 2, 2.0, 3))
    assert restart_figures(rows) == {
        "restarts": 0,
        "restart_steps_lost": 0,
        "restart_events": [],
        "kept_steps": 1,
        "kept_steps_per_s": pytest.approx(1 / 3),  # all the training did, over the steps' 3 s
    }
    assert restart_figures(rows.drop(columns=[Col.RESTART_QUORUM])) == {}


def test_the_run_says_in_one_line_how_often_the_training_was_lost_beside_the_rules() -> None:
    summary = {
        "restarts": 2,
        "restart_steps_lost": 57.0,
        "restarts_model": 1,
        "restart_events": [{"time_s": 47.2}, {"time_s": 170.0}],
    }
    line = restart_line(summary)
    assert line == (
        "the training was lost and started afresh 2 times (at 47, 170 s): every node that held it had left; "
        "57 committed steps redone; the model's rules over the run's changes: 1"
    )
    assert segment_lines(summary) == [line]
    assert restart_line({"restarts": 0, "restarts_model": 0}) is None
    assert "never lost" in str(restart_line({"restarts": 0, "restarts_model": 2}))
    assert restart_line({"restarts_model": 2}) is None, "a run that records no restarts says nothing of them"
