"""Goodput under churn: the analytic answer against a seeded simulation over the draws ``--churn`` makes, and the
simulation's rules on hand-made changes."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest

from netbench.model.goodput import (
    MAX_PRICED_STATES,
    MAX_RUN_CHANGES,
    MIN_RUN_DRAWS,
    RUN_DRAWS,
    SIMULATED_GRID,
    Goodput,
    Recovery,
    away_distribution,
    expected_goodput,
    goodput,
    leave_cost_s,
    run_draws,
    run_goodput,
    simulate,
)
from netbench.schedule.churn import Churn, draw
from netbench.schedule.model import Change

NAMES = ("n0", "n1", "n2", "n3")
SEEDS = range(10)
HORIZON_S = 3600.0


def full_step(members: int) -> tuple[float, float, float]:
    """A step that grows with the members, the whole of it vulnerable (a quorum each step), 60 % of it the
    all-reduce."""
    step = 0.3 + 0.05 * members
    return step, step, 0.6 * step


def diloco_step(members: int) -> tuple[float, float, float]:
    """An averaged step whose window ends in a 0.3 s exchange."""
    return 0.2 + 0.02 * members, 0.3, 0.3


def _simulated(mtbf: float, away: float, step_at, recovery: Recovery) -> float:
    rates = []
    for seed in SEEDS:
        changes = draw(Churn(mtbf_s=mtbf, away_s=away, seed=seed, for_s=HORIZON_S), NAMES)
        rates.append(simulate(changes, NAMES, HORIZON_S, step_at, recovery).steps_per_s)
    return statistics.mean(rates)


def test_the_odds_of_nodes_away_are_those_of_the_draws() -> None:
    seen = [0.0] * (len(NAMES) + 1)
    for seed in SEEDS:
        away, last = 0, 0.0
        for change in draw(Churn(mtbf_s=20, away_s=6, seed=seed, for_s=HORIZON_S), NAMES):
            seen[away] += change.time_s - last
            away, last = away + (1 if change.member == "leave" else -1), change.time_s
        seen[away] += HORIZON_S - last
    total = sum(seen)
    for k, p in enumerate(away_distribution(len(NAMES), 20, 6)):
        assert seen[k] / total == pytest.approx(p, abs=0.01), k
    assert seen[len(NAMES)] == 0  # a leave that would leave nobody is skipped


@pytest.mark.parametrize(
    ("step_at", "recovery", "mtbf", "away"),
    [
        (full_step, Recovery(period=1, heal_s=0.5, quorum_wait_s=1.0), 20, 6),
        (full_step, Recovery(period=1, heal_s=1.0, quorum_wait_s=1.0), 20, 6),
        (diloco_step, Recovery(period=5, heal_s=0.5, quorum_wait_s=1.0), 20, 6),
        (diloco_step, Recovery(period=20, heal_s=0.5, quorum_wait_s=1.0), 20, 6),
        (diloco_step, Recovery(period=5, heal_s=0.5, quorum_wait_s=1.0), 60, 10),
        (full_step, Recovery(period=1, heal_s=1.0, quorum_wait_s=1.0, exchange_timeout_s=5.0), 20, 6),
        (diloco_step, Recovery(period=5, heal_s=0.5, quorum_wait_s=1.0, exchange_timeout_s=5.0), 20, 6),
    ],
    ids=["full", "full-slower-heal", "diloco-5", "diloco-20", "diloco-rare", "full-stuck", "diloco-stuck"],
)
def test_analytic_goodput_matches_a_simulation_over_the_drawn_churn(step_at, recovery, mtbf, away) -> None:
    predicted = goodput(len(NAMES), mtbf, away, step_at, recovery)
    simulated = _simulated(mtbf, away, step_at, recovery)
    assert predicted.steps_per_s == pytest.approx(simulated, rel=0.05)
    assert predicted.steps_per_s < predicted.plain_steps_per_s


def test_without_churn_goodput_is_the_step_rate() -> None:
    recovery = Recovery(period=1, heal_s=1.0)
    found = simulate([], NAMES, 100.0, full_step, recovery)
    assert found.committed_steps == int(100.0 / full_step(4)[0])
    rare = goodput(len(NAMES), 1e9, 6, full_step, recovery)
    assert rare.steps_per_s == pytest.approx(1 / full_step(4)[0], rel=1e-6)


def test_a_leave_in_a_full_step_loses_it_and_the_quorum_waits() -> None:
    step = lambda members: (1.0, 1.0, 0.0)  # noqa: E731
    changes = [Change(time_s=2.5, target="n1", member="leave")]
    found = simulate(changes, NAMES, 10.0, step, Recovery(period=1, quorum_wait_s=1.0))
    # steps end at 1, 2; the third fails at 2.5, the quorum forms at 3.5, then steps end at 4.5 .. 9.5
    assert found.lost_windows == 1
    assert found.committed_steps == 2 + 6


def test_a_leave_before_a_diloco_sync_costs_only_the_wait_left() -> None:
    step = lambda members: (1.0, 0.5, 0.5)  # noqa: E731  a window of 4 s whose last 0.5 s is the exchange
    changes = [Change(time_s=3.2, target="n1", member="leave")]
    found = simulate(changes, NAMES, 12.0, step, Recovery(period=4, quorum_wait_s=1.0))
    # the window ends at 4 but its quorum waits until 4.2; the next two end at 8.2 and 12.2 (past the horizon)
    assert found.lost_windows == 0
    assert found.committed_steps == 8


def one_second_steps(members: int) -> tuple[float, float, float]:
    """A step of 1 s, all of it vulnerable (a quorum each step)."""
    return 1.0, 1.0, 0.0


# n1 leaves in the first step and is back at 3.2: lost at 0.5, quorum at 1.5, steps end 2.5 and 3.5, n1 asks at 3.2
AWAY_AND_BACK = [Change(time_s=0.5, target="n1", member="leave"), Change(time_s=3.2, target="n1", member="join")]


def test_a_node_back_is_healed_at_the_next_quorum() -> None:
    found = simulate(AWAY_AND_BACK, NAMES, 20.0, one_second_steps, Recovery(period=1, heal_s=2.0, quorum_wait_s=1.0))
    assert found.heals == 1
    # heal 3.5-5.5; steps end 6.5 .. 19.5
    assert found.committed_steps == 2 + 14


def test_a_leave_during_a_heal_fails_it_at_once_and_the_heal_starts_over_without_the_exchange_timeout() -> None:
    changes = [*AWAY_AND_BACK, Change(time_s=4.0, target="n2", member="leave")]
    found = simulate(changes, NAMES, 20.0, one_second_steps, Recovery(period=1, heal_s=2.0, exchange_timeout_s=5.0))
    # the heal from 3.5 fails when n2 leaves at 4.0 (its quorum formed before: no timeout); the quorum waits for n2
    # until 5.0, heals n1 again to 7.0; steps end 8.0 .. 20.0
    assert (found.committed_steps, found.stuck, found.heals, found.failed_heals) == (2 + 13, 0, 2, 1)


def test_a_node_back_that_leaves_while_it_asks_for_a_quorum_makes_everyone_wait_out_the_exchange_timeout() -> None:
    changes = [*AWAY_AND_BACK, Change(time_s=3.4, target="n1", member="leave")]
    found = simulate(changes, NAMES, 20.0, one_second_steps, Recovery(period=1, heal_s=2.0, exchange_timeout_s=5.0))
    # n1 asked at 3.2 and left at 3.4, within the quorum's wait: the quorum formed at 3.5 lists it and waits on it
    # until 8.5; steps end 9.5 .. 19.5
    assert (found.committed_steps, found.stuck) == (2 + 11, 1)
    assert simulate(changes, NAMES, 20.0, one_second_steps, Recovery(period=1, heal_s=2.0)).committed_steps == 2 + 16


def test_a_second_leave_while_the_quorum_waits_for_the_first_makes_everyone_wait_out_the_exchange_timeout() -> None:
    step = lambda members: (1.0, 1.0, 0.0)  # noqa: E731
    changes = [Change(time_s=2.5, target="n1", member="leave"), Change(time_s=3.0, target="n2", member="leave")]
    stuck = simulate(changes, NAMES, 10.0, step, Recovery(period=1, exchange_timeout_s=5.0))
    # steps end at 1, 2; the third fails at 2.5; n2 leaves before the quorum forms at 3.5: it waits until 8.5
    assert (stuck.committed_steps, stuck.stuck) == (2 + 1, 1)
    assert simulate(changes, NAMES, 10.0, step, Recovery(period=1)).committed_steps == 2 + 6
    slower = goodput(len(NAMES), 20, 6, full_step, Recovery(period=1, heal_s=1.0, exchange_timeout_s=5.0))
    assert slower.steps_per_s < goodput(len(NAMES), 20, 6, full_step, Recovery(period=1, heal_s=1.0)).steps_per_s


def test_leave_cost_of_a_whole_vulnerable_window_is_half_of_it_and_the_wait() -> None:
    assert leave_cost_s(2.0, 2.0, 1.0) == pytest.approx(2.0)
    assert leave_cost_s(4.0, 0.0, 1.0) == pytest.approx(1.0 / 8)  # the wait left after a uniform time in 4 s


def test_a_leave_inside_the_exchange_keeps_the_window_and_heals_the_survivors_behind() -> None:
    assert leave_cost_s(2.0, 2.0, 1.0, exchange_s=2.0, heal_s=3.0) == pytest.approx(1.0 + 3.0)
    # half the step before the all-reduce (lost, half of it on average, and the wait), half inside it (wait, heal)
    assert leave_cost_s(2.0, 2.0, 1.0, exchange_s=1.0, heal_s=3.0) == pytest.approx(0.5 * (0.5 + 1.0) + 0.5 * 4.0)
    step = lambda members: (1.0, 1.0, 0.5)  # noqa: E731
    changes = [Change(time_s=2.7, target="n1", member="leave")]
    found = simulate(changes, NAMES, 10.0, step, Recovery(period=1, quorum_wait_s=1.0, heal_s=2.0))
    # steps end at 1, 2, 3 (the third kept: the leave came in its all-reduce); the quorum at 3.7, its heal to 5.7,
    # then steps end at 6.7 .. 9.7
    assert (found.lost_windows, found.heals) == (0, 1)
    assert found.committed_steps == 3 + 4


def test_wall_time_to_a_budget_divides_it_by_the_goodput() -> None:
    found = goodput(len(NAMES), 20, 6, full_step, Recovery(period=1, heal_s=0.5))
    assert found.wall_s(1000) == pytest.approx(1000 / found.steps_per_s)
    assert found.wall_s_for_tokens(1e6, 1000) == pytest.approx(1e6 / (1000 * found.member_share * found.steps_per_s))
    assert 0.5 < found.member_share < 1


@pytest.mark.parametrize(("nodes", "mtbf", "away"), [(0, 20, 6), (4, 0, 6), (4, 20, -1)])
def test_bad_churn_is_refused(nodes: int, mtbf: float, away: float) -> None:
    with pytest.raises(ValueError, match="churn needs"):
        away_distribution(nodes, mtbf, away)


def test_many_nodes_price_a_few_member_counts() -> None:
    priced: list[int] = []

    def step(members: int) -> tuple[float, float, float]:
        priced.append(members)
        return 1.0 + members / 1000, 1.0 + members / 1000, 0.5

    found = goodput(512, 20, 6, step, Recovery(period=1, heal_s=0.5))
    assert len(set(priced)) <= 10
    assert 0 < found.steps_per_s < found.plain_steps_per_s
    absent = 6 + 1.512 / 2  # away, then half a step waiting for the next quorum
    assert found.mean_away == pytest.approx(512 * absent / (20 + absent), rel=0.01)


def test_plan_goodput_is_the_rules_over_seeded_draws_and_prices_few_member_counts() -> None:
    recovery = Recovery(period=1, heal_s=1.0, exchange_timeout_s=5.0)
    planned = expected_goodput(len(NAMES), 20.0, 6.0, full_step, recovery)
    assert planned == expected_goodput(len(NAMES), 20.0, 6.0, full_step, recovery)  # the same draws every time
    long_run = statistics.mean(
        simulate(draw(Churn(mtbf_s=20.0, away_s=6.0, seed=s, for_s=HORIZON_S), NAMES), NAMES, HORIZON_S, full_step,
                 recovery).steps_per_s
        for s in SEEDS
    )  # fmt: skip
    assert planned.steps_per_s == pytest.approx(long_run, rel=0.08)
    priced: set[int] = set()

    def counted(members: int) -> tuple[float, float, float]:
        priced.add(members)
        return full_step(members)

    expected_goodput(512, 60.0, 30.0, counted, recovery)  # many nodes away at once
    assert len(priced) <= SIMULATED_GRID + MAX_PRICED_STATES + 1


def test_a_run_of_a_given_length_is_priced_over_the_draws_that_run_makes() -> None:
    recovery = Recovery(period=1, heal_s=1.0, quorum_wait_s=1.0, exchange_timeout_s=5.0)
    found = run_goodput(len(NAMES), 20, 6, 120, full_step, recovery, seed=3)
    rates = [
        simulate(
            draw(Churn(mtbf_s=20, away_s=6, seed=s, for_s=120), NAMES), NAMES, 120, full_step, recovery
        ).steps_per_s
        for s in range(found.draws)
    ]
    assert found.draws == RUN_DRAWS
    assert found.steps_per_s == pytest.approx(statistics.fmean(rates))
    assert found.sd == pytest.approx(statistics.stdev(rates))
    assert min(rates) <= found.p10 < found.steps_per_s < found.p90 <= max(rates)
    assert found.seed_steps_per_s == rates[3]


def test_a_seed_past_the_priced_draws_is_its_own_draw() -> None:
    recovery = Recovery(period=4, heal_s=2.0, exchange_timeout_s=5.0)
    found = run_goodput(len(NAMES), 20, 6, 90, diloco_step, recovery, seed=1000)
    changes = draw(Churn(mtbf_s=20, away_s=6, seed=1000, for_s=90), NAMES)
    assert found.seed_steps_per_s == simulate(changes, NAMES, 90, diloco_step, recovery).steps_per_s


def test_a_short_run_reads_above_the_long_run_and_spreads_more_than_a_long_one() -> None:
    recovery = Recovery(period=1, heal_s=2.0, exchange_timeout_s=5.0)
    long_run = expected_goodput(len(NAMES), 20, 6, full_step, recovery).steps_per_s
    short = run_goodput(len(NAMES), 20, 6, 60, full_step, recovery)
    longer = run_goodput(len(NAMES), 20, 6, 1200, full_step, recovery)
    assert short.steps_per_s > long_run  # every node present at the start
    assert short.sd > 2 * longer.sd
    assert longer.steps_per_s == pytest.approx(long_run, rel=0.08)


def test_a_run_too_long_to_price_gets_fewer_draws_then_none() -> None:
    assert run_draws(4, 20, 6, 120) == RUN_DRAWS
    per_draw_s = (20 + 6) / (2 * 4)  # a node leaves and joins once per MTBF + away
    fewer = run_draws(4, 20, 6, MAX_RUN_CHANGES / (RUN_DRAWS - 10) * per_draw_s)
    assert MIN_RUN_DRAWS <= fewer < RUN_DRAWS
    assert run_draws(4, 20, 6, MAX_RUN_CHANGES / (MIN_RUN_DRAWS - 1) * per_draw_s) == 0
    assert run_draws(512, 20, 6, 3600) == 0
    with pytest.raises(ValueError, match="too many changes"):
        run_goodput(512, 20, 6, 3600, full_step, Recovery())


def test_nodes_back_with_every_holder_of_the_training_gone_train_afresh_without_a_heal() -> None:
    names = ("n0", "n1", "n2")
    # n2 leaves in the first step (lost; quorum at 1.5) and asked again at 1.2: its heal from 1.5 fails when n0, its
    # source, leaves at 2.5; n1, the last node that held the training, leaves at 3.0 while the quorum waits for n0.
    # n2 alone waits; n0 is back at 4.2: the quorum of n2 and n0 holds no node ahead of them, so it trains from the
    # first weights at once, without a heal: steps end 5.2 .. 19.2
    found = simulate(LOST_TRAINING, names, 20.0, one_second_steps, Recovery(period=1, heal_s=5.0, quorum_wait_s=1.0))
    assert (found.heals, found.failed_heals, found.restarts, found.committed_steps) == (1, 1, 1, 15)
    # without n0 back, n2 alone (fewer than a quorum) trains nothing
    alone = simulate(LOST_TRAINING[:4], names, 20.0, one_second_steps, Recovery(period=1, heal_s=5.0))
    assert (alone.restarts, alone.committed_steps) == (0, 0)


LOST_TRAINING = [
    Change(time_s=0.5, target="n2", member="leave"),
    Change(time_s=1.2, target="n2", member="join"),
    Change(time_s=2.5, target="n0", member="leave"),
    Change(time_s=3.0, target="n1", member="leave"),
    Change(time_s=4.2, target="n0", member="join"),
]


def test_a_run_of_a_given_number_of_steps_trains_on_with_every_node_after_its_churn() -> None:
    recovery = Recovery(period=1, heal_s=2.0, quorum_wait_s=1.0)
    # n1 away 0.5-3.2 and healed; after the churn every node trains on until the 30th step
    found = simulate(AWAY_AND_BACK, NAMES, 4.0, one_second_steps, recovery, steps=30)
    # 2 steps by 3.5, the heal to 5.5, then 28 steps of 1 s
    assert (found.committed_steps, found.horizon_s) == (30, pytest.approx(5.5 + 28))
    assert simulate(AWAY_AND_BACK, NAMES, 5.5 + 28, one_second_steps, recovery).committed_steps == 30


def test_a_run_of_a_given_number_of_steps_counts_them_again_from_a_restart() -> None:
    names = ("n0", "n1", "n2")
    # steps end 1, 2, 3; n2 leaves at 3.5 (lost; quorum at 4.5), a step ends 5.5; n2, back at 4.6, is healed from
    # 5.5 until n0 leaves at 6.0; n1 leaves at 6.5, n0 is back at 8.0: n2 and n0 train afresh from 8.0
    changes = [
        Change(time_s=3.5, target="n2", member="leave"),
        Change(time_s=4.6, target="n2", member="join"),
        Change(time_s=6.0, target="n0", member="leave"),
        Change(time_s=6.5, target="n1", member="leave"),
        Change(time_s=8.0, target="n0", member="join"),
    ]
    found = simulate(changes, names, 8.0, one_second_steps, Recovery(period=1, heal_s=5.0), steps=10)
    # the run's 10 steps count from the restart; the 4 before it were committed too
    assert (found.restarts, found.committed_steps, found.horizon_s) == (1, 14, pytest.approx(18.0))
    assert found.kept_steps == 10
    # over a horizon: the training holds only the steps since the restart (ends 9 .. 12), goodput counts all 8
    until = simulate(changes, names, 12.0, one_second_steps, Recovery(period=1, heal_s=5.0))
    assert (until.restarts, until.committed_steps, until.kept_steps) == (1, 8, 4)
    assert until.kept_steps_per_s == pytest.approx(4 / 12) and until.steps_per_s == pytest.approx(8 / 12)


def test_plan_for_a_run_of_given_steps_prices_every_draw_until_they_commit() -> None:
    recovery = Recovery(period=4, heal_s=2.0, exchange_timeout_s=5.0)
    found = run_goodput(len(NAMES), 20, 6, 60, diloco_step, recovery, seed=2, steps=400)
    changes = draw(Churn(mtbf_s=20, away_s=6, seed=2, for_s=60), NAMES)
    seeded = simulate(changes, NAMES, 60, diloco_step, recovery, steps=400)
    assert found.steps == 400
    assert found.seed_steps_per_s == seeded.steps_per_s
    assert seeded.horizon_s > 60  # 400 steps outlast the churn: the rest is trained with every node present
    # the tail with every node present raises the run's goodput above that of a run that ends with its churn
    assert found.steps_per_s > run_goodput(len(NAMES), 20, 6, 60, diloco_step, recovery).steps_per_s


def test_the_time_to_hold_a_budget_grows_exponentially_with_the_restarts_it_meets() -> None:
    steady = Goodput(steps_per_s=2.0, plain_steps_per_s=3.0, member_share=0.5, leaves_per_s=0.1, mean_away=1,
                     stalled_share=0)  # fmt: skip
    assert steady.wall_s_to_keep(100) == pytest.approx(50.0) == steady.wall_s(100)
    restarting = replace(steady, restarts_per_s=0.01)  # every 100 s on average: 50 s of training is half of that
    assert restarting.wall_s_to_keep(100) == pytest.approx(100 * (math.exp(0.5) - 1))
    assert restarting.wall_s_for_tokens(1000, 20) == pytest.approx(restarting.wall_s_to_keep(1000 / (0.5 * 20)))
    assert not restarting.out_of_reach(100)
    # a budget of 1,000 s of training at a restart every 100 s: e^10 / 0.01 s, out of reach without a checkpoint
    assert restarting.out_of_reach(2000) and not steady.out_of_reach(2000)
    assert restarting.wall_s_to_keep(1e6) == math.inf
    nothing = replace(restarting, steps_per_s=0.0)
    assert nothing.wall_s_to_keep(10) == math.inf and not nothing.out_of_reach(10)


def test_the_closed_form_time_to_hold_a_budget_is_the_mean_of_the_rules_driven_to_hold_it() -> None:
    recovery = Recovery(period=1, heal_s=1.0)
    names = ("n0", "n1", "n2")
    found = expected_goodput(3, 15, 6, full_step, recovery)
    assert found.restarts_per_s > 0
    steps = round(found.steps_per_s / found.restarts_per_s)  # training as long as the mean time between restarts
    horizon = 30 * found.wall_s_to_keep(steps)
    times = [
        simulate(draw(Churn(mtbf_s=15, away_s=6, seed=s, for_s=horizon), names), names, horizon, full_step, recovery,
                 steps=steps).horizon_s
        for s in range(60)
    ]  # fmt: skip
    mean = statistics.fmean(times)
    assert found.wall_s_to_keep(steps) == pytest.approx(mean, rel=0.3)
    assert found.wall_s(steps) < 0.75 * mean, "committing the steps once is well short of holding them"


def test_every_re_formed_quorum_configures_before_it_trains() -> None:
    changes = [Change(time_s=2.5, target="n1", member="leave")]
    found = simulate(changes, NAMES, 10.0, one_second_steps, Recovery(period=1, quorum_wait_s=1.0, reform_s=1.0))
    # the third step fails at 2.5, the quorum forms at 3.5 and is configured at 4.5, then steps end at 5.5 .. 9.5
    assert found.committed_steps == 2 + 5
    healed = simulate(AWAY_AND_BACK, NAMES, 20.0, one_second_steps, Recovery(period=1, heal_s=2.0, reform_s=0.5))
    # lost at 0.5, quorum at 1.5, configured at 2.0, steps end 3.0 and 4.0; n1 asked at 3.2: configured 4.5, heal to
    # 6.5, steps end 7.5 .. 19.5
    assert healed.committed_steps == 2 + 13


def test_the_closed_form_prices_the_configuration_of_each_re_formed_quorum() -> None:
    plain = goodput(len(NAMES), 20, 6, full_step, Recovery(period=1, heal_s=1.0))
    configured = goodput(len(NAMES), 20, 6, full_step, Recovery(period=1, heal_s=1.0, reform_s=0.5))
    assert configured.steps_per_s < plain.steps_per_s
    recovery = Recovery(period=1, heal_s=1.0, quorum_wait_s=1.0, reform_s=0.5)
    assert configured.steps_per_s == pytest.approx(_simulated(20, 6, full_step, recovery), rel=0.05)
