"""Nodes that leave and join: member rows of a schedule file, the random churn's draws, the segments' membership, the
live schedule's hand-over of each leave and join, and the per-step membership column."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_cli import netbench

from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.schedule_results import annotate, segment_cluster
from netbench.orchestrator.sweep.scenario import ScenarioError, points, scenario_from_dict
from netbench.rundir.steps_schema import Col
from netbench.schedule import ScheduleError, parse_text
from netbench.schedule.churn import ChurnError, draw, parse_churn, with_churn
from netbench.schedule.fits import check_whole_membership
from netbench.schedule.live import LiveSchedule
from netbench.schedule.state import members_graph, segments
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import star, uniform_sites

SPEC4 = ClusterSpec(nodes=4, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
STAR4 = star(4, DirectionSpec(rate_bps=100e6, delay_s=0.01), DirectionSpec(rate_bps=100e6))
NODES = tuple(n.name for n in STAR4.nodes)
LEAVE_AND_JOIN = "time_s,link,member\n6,n3,leave\n12,n3,join\n"


def test_a_node_that_leaves_is_away_until_it_joins_and_the_segments_count_the_members() -> None:
    schedule = parse_text(LEAVE_AND_JOIN, "churn.csv")
    schedule.check_targets(STAR4)
    found = segments(schedule, STAR4)
    assert [(s.start_s, s.away, s.members) for s in found] == [(6, {"n3"}, 3), (12, frozenset(), 4)]
    assert found[0].label.endswith("n3 away") and "away" not in found[1].label
    assert schedule.changes_members and not parse_text("time_s,link,rate\n5,*,10mbit\n", "s.csv").changes_members
    assert schedule.describe()["changes"][0] == {"time_s": 6.0, "target": "n3", "member": "leave"}


def test_member_rows_read_the_same_from_toml() -> None:
    toml = (
        '[[change]]\ntime_s = 6\nlink = "n3"\nmember = "leave"\n[[change]]\ntime_s = 12\nlink = "n3"\nmember = "Join"\n'
    )
    assert parse_text(toml, "c.toml", toml=True).changes == parse_text(LEAVE_AND_JOIN, "c.csv").changes


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("time_s,link,member\n6,n3,leave\n8,n3,leave\n", "change 2: the node leaves but has already left"),
        ("time_s,link,member\n6,n3,join\n", "change 1: the node joins but has not left"),
        ("time_s,link,member\n6,*,leave\n", "names every node"),
        ("time_s,link,member\n0,n1,leave\n", "member at time 0"),
        ("time_s,link,member\n6,n1,reboot\n", "line 2: member: Input should be 'leave' or 'join'"),
    ],
)
def test_a_bad_member_row_is_one_line_naming_the_row(text: str, said: str) -> None:
    with pytest.raises(ScheduleError) as exc:
        parse_text(text, "bad.csv")
    assert said in str(exc.value) and "\n" not in str(exc.value) and "reboot" not in str(exc.value)


def test_a_member_row_must_name_a_node_and_leave_one_to_train_with() -> None:
    two = star(2, DirectionSpec(rate_bps=100e6), DirectionSpec(rate_bps=100e6))
    with pytest.raises(ValueError, match="every node has left"):
        parse_text("time_s,link,member\n1,n0,leave\n2,n1,leave\n", "s.csv").check_targets(two)
    parse_text("time_s,link,member\n1,n0,leave\n2,n0,join\n3,n1,leave\n", "s.csv").check_targets(two)
    with pytest.raises(ValueError, match="change 1: unknown link"):
        parse_text("time_s,link,member\n1,n7,leave\n", "s.csv").check_targets(two)


def test_a_sweep_refuses_leaves_and_joins_in_one_line() -> None:
    check_whole_membership(None)
    check_whole_membership(parse_text("time_s,link,rate\n5,*,10mbit\n", "s.csv"))
    with pytest.raises(ValueError, match="netbench run .-r full or diloco. and netbench exec apply them"):
        check_whole_membership(parse_text(LEAVE_AND_JOIN, "s.csv"))


# ----------------------------------------------------------------------------------------- random churn


def test_the_churn_is_seeded_and_each_node_draws_from_its_own_stream() -> None:
    churn = parse_churn("20s,away=6s,seed=3,for=120s")
    first = draw(churn, NODES)
    assert first == draw(churn, NODES)
    assert first != draw(parse_churn("20s,away=6s,seed=4,for=120s"), NODES)
    assert [c for c in draw(churn, NODES[:2]) if c.target == "n1"] == [c for c in first if c.target == "n1"]
    assert all(c.time_s < 120 + 6 for c in first) and [c.time_s for c in first] == sorted(c.time_s for c in first)
    for name in NODES:  # each absence lasts `away`, and a node's leaves and joins alternate
        mine = [c for c in first if c.target == name]
        assert [c.member for c in mine] == ["leave", "join"] * (len(mine) // 2)
        assert all(
            join.time_s - leave.time_s == pytest.approx(6.0, abs=2e-3) for leave, join in zip(mine[0::2], mine[1::2])
        )


def test_the_churn_keeps_a_member_and_its_draws_follow_the_mean_time_between_failures() -> None:
    churn = parse_churn("10s,away=30s,seed=1,for=2000s")  # away three times as long as up: leaves would empty it
    changes = draw(churn, ("n0", "n1"))
    schedule = with_churn(None, churn, ("n0", "n1"))  # validates: never every node away
    assert schedule.source == churn.label and len(changes) == len(schedule.changes)
    many = [c for c in draw(parse_churn("20s,away=1s,seed=0,for=20000s"), NODES) if c.target == "n0"]
    ups = [b.time_s - a.time_s for a, b in zip(many[1::2], many[2::2])]  # join to next leave: the time it took part
    assert sum(ups) / len(ups) == pytest.approx(20.0, rel=0.15)


def test_the_churn_merges_with_a_schedule_file_and_a_clash_is_one_line() -> None:
    links = parse_text("time_s,link,rate\n30,*,10mbit\n", "rates.csv")
    merged = with_churn(links, parse_churn("20s,seed=3,for=120s"), NODES)
    assert merged.source.startswith("rates.csv + churn mtbf=20s") and links.changes[0] in merged.changes
    clash = parse_text("time_s,link,member\n10.5,n1,leave\n50,n1,join\n", "mine.csv")
    with pytest.raises(ChurnError, match="clash with the schedule file"):
        with_churn(clash, parse_churn("20s,away=6s,seed=3,for=120s"), NODES)  # seed 3 takes n1 away at 10.953 s


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("soon", "mtbf: cannot read time"),
        ("20s,reboot=1", "expected MTBF then away=, seed=, for="),
        ("20s,seed=1.5", "seed: expected a whole number"),
        ("0.5s", "mtbf: Input should be greater than or equal to 1"),
        ("20s,away=1s,away=2s", "away= given twice"),
        ("1s,away=0.1s,for=100000s", "draws more than 10000 changes"),
    ],
)
def test_a_bad_churn_is_one_line_that_never_echoes_it(text: str, said: str) -> None:
    with pytest.raises(ChurnError) as exc:
        with_churn(None, parse_churn(text), NODES)
    assert said in str(exc.value) and "soon" not in str(exc.value) and "reboot" not in str(exc.value)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--nodes", "4", "--churn", "soon"], "--churn: mtbf: cannot read time"),
        (["exec", "--nodes", "4", "--churn", "20s,x=1", "--", "true"], "--churn: expected MTBF"),
        (["run", "--nodes", "4", "--churn", "20s"], "--schedule: nodes leave and join"),
    ],
)
def test_the_commands_refuse_a_bad_churn_in_one_line_with_exit_2(args: list[str], said: str) -> None:
    assert said in netbench(*args).error_line


# --------------------------------------------------------------------------- applied, and recorded per step


class _FakeCluster:
    """What the live schedule reads of a cluster when only nodes leave and join (no egress, no delay line)."""

    def __init__(self) -> None:
        self.spec = SPEC4
        self.nodes: list[Any] = []
        self.switches: list[Any] = []
        self.impairment = None


def test_the_live_schedule_hands_each_leave_and_join_to_the_launcher_in_time(tmp_path: Path) -> None:
    records = tmp_path / "rank0.jsonl"
    records.write_text(json.dumps({"event": "step", "warmup": False, "t_start": time.time() - 0.05}) + "\n")
    schedule = parse_text("time_s,link,member\n0.01,n3,leave\n0.02,n1,leave\n30,n3,join\n", "s.csv")
    seen: list[tuple[int, bool]] = []
    hand_over = lambda node, joins: seen.append((node, joins))  # noqa: E731
    live = LiveSchedule(_FakeCluster(), schedule, STAR4, 1.0, tmp_path / "schedule.csv", records, hand_over)
    live.tick()
    assert seen == [(3, False), (1, False)]  # the join at 30 s is not due yet
    assert [row["what"] for row in live.log] == ["n3 left", "n1 left"]
    assert "n1 left" in (tmp_path / "schedule.csv").read_text()


def test_each_step_records_how_many_nodes_took_part() -> None:
    config = RunConfig(cluster=SPEC4, schedule=parse_text(LEAVE_AND_JOIN, "s.csv"))
    t0 = 1000.0
    steps = pd.DataFrame(
        {
            Col.RANK: [0] * 5,
            Col.STEP: range(5),
            Col.WARMUP: [True, False, False, False, False],
            Col.T_START: [t0 - 1, t0, t0 + 7, t0 + 11.9, t0 + 13],
            Col.STEP_S: [1.0] * 5,
        }
    )
    annotated = annotate(steps, config, 1.0)
    assert list(annotated[Col.SCHEDULE_MEMBERS]) == [4, 4, 3, 3, 4]


def test_a_segment_with_a_node_away_is_modelled_as_the_network_of_the_nodes_taking_part() -> None:
    schedule = parse_text("time_s,link,member,rate\n6,n1,leave,\n8,n0,leave,\n9,n2,,50mbit\n", "s.csv")
    left_one, left_two, slower = segments(schedule, STAR4)
    one = segment_cluster(SPEC4, left_one)
    assert one is not None and one.nodes == 3 and one.on_star and one.placement == (0, 1, 2)
    assert (
        members_graph(left_two).node_count == 2 and members_graph(slower).link("n0").forward.rate_bps == 50e6
    )  # n2, named n0
    back = segment_cluster(SPEC4, segments(parse_text(LEAVE_AND_JOIN, "s.csv"), STAR4)[1])
    assert back is not None and back.nodes == 4 and back.topology == STAR4  # all four take part again
    sites = uniform_sites(2, 2, DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=1e8))
    (away,) = segments(parse_text("time_s,link,member\n3,n3,leave\n", "s.csv"), sites)
    kept = members_graph(away)
    assert [n.switch for n in kept.nodes] == ["site0", "site0", "site1"] and kept.trunks == sites.trunks
    three = star(3, DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=1e9))
    (alone,) = segments(parse_text("time_s,link,member\n1,n0,leave\n2,n1,leave\n", "s.csv"), three)[1:]
    assert members_graph(alone) is None and segment_cluster(SPEC4, alone) is None


def test_a_sweep_whose_schedule_makes_nodes_leave_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "churn.csv").write_text(LEAVE_AND_JOIN)
    grid = {"grid": {"replicator": ["diloco"], "nodes": [4]}, "schedule": str(tmp_path / "churn.csv")}
    with pytest.raises(ScenarioError, match=r"^x.toml: schedule: nodes leave and join") as exc:
        points(scenario_from_dict(grid, "x.toml"), tmp_path / "runs")
    assert "\n" not in str(exc.value)
