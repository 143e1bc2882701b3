"""Link schedules read from files: the schedule CSV and TOML, Mahimahi and rate traces, segments and node phases."""

from __future__ import annotations

import pytest

from netbench.pacing import scale_at
from netbench.schedule import ScheduleError, parse_text
from netbench.schedule.state import node_phases, segments
from netbench.schedule.traces import rates_per_window
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import star, uniform_sites

ISSUE_EXAMPLE = "time_s,link,rate,delay,loss,state\n0,*,100mbit,,,\n30,*,10mbit,,,\n45,n1,,,,down\n50,n1,,,,up\n"
STAR = star(2, DirectionSpec(rate_bps=1e9, delay_s=0.01), DirectionSpec(rate_bps=1e9))


def test_the_csv_form_becomes_segments_that_keep_what_a_row_leaves_empty() -> None:
    schedule = parse_text(ISSUE_EXAMPLE, "s.csv")
    schedule.check_targets(STAR)
    found = segments(schedule, STAR)
    assert [s.start_s for s in found] == [0, 30, 45, 50]
    assert [s.end_s for s in found] == [30, 45, 50, None]
    assert {link.forward.rate_bps for link in found[2].graph.links} == {
        10e6
    }  # the rate set at 30 s holds while n1 is down
    assert found[2].down == {"n1"} and found[3].down == frozenset()
    assert all(
        link.forward.delay_s == 0.01 for s in found for link in s.graph.links
    )  # no delay cell: the built delay stays


def test_a_node_target_changes_only_its_access_link_and_its_compute() -> None:
    schedule = parse_text("time_s,link,rate,delay,compute_scale\n5,n0,20mbit,30ms,3\n", "s.csv")
    (segment,) = segments(schedule, STAR)
    n0, n1 = segment.graph.links
    assert (n0.forward.rate_bps, n0.reverse.rate_bps, n0.forward.delay_s, n0.reverse.delay_s) == (20e6, 20e6, 0.03, 0.0)
    assert n1.forward.rate_bps == 1e9
    assert [n.compute_scale for n in segment.graph.nodes] == [3.0, 1.0]
    assert node_phases(schedule, STAR, 0) == ((5.0, 3.0),)
    assert scale_at(((5.0, 3.0), (9.0, 1.0)), 4.9, 1.0) == 1.0
    assert scale_at(((5.0, 3.0), (9.0, 1.0)), 5.0, 1.0) == 3.0
    assert scale_at(((5.0, 3.0), (9.0, 1.0)), 12.0, 1.0) == 1.0


def test_toml_form_reads_like_the_csv() -> None:
    toml = (
        '[[change]]\ntime_s = 0\nlink = "*"\nrate = "100mbit"\n[[change]]\ntime_s = 30\nlink = "*"\nrate = "10mbit"\n'
    )
    assert parse_text(toml, "s.toml", toml=True).changes == parse_text(ISSUE_EXAMPLE, "s.csv").changes[:2]


def test_a_mahimahi_trace_becomes_one_rate_per_window() -> None:
    # 2 s at 24 Mbit/s (2000 packets of 1500 B per second), then 1 s at 12 Mbit/s
    stamps = [i // 2 for i in range(4000)] + [2000 + i for i in range(1000)]
    assert rates_per_window(stamps) == [24e6, 24e6, 12e6]
    schedule = parse_text("\n".join(map(str, stamps)) + "\n", "trace.mahi")
    assert [(c.time_s, c.rate_bps, c.target) for c in schedule.changes] == [(0.0, 24e6, "*"), (2.0, 12e6, "*")]


def test_a_mahimahi_window_slower_than_tbf_can_shape_is_raised_and_noted() -> None:
    schedule = parse_text("0\n1\n2\n", "slow.mahi")  # 3 packets in a second: 36 kbit/s
    assert schedule.changes[0].rate_bps == 10e6 and "raised to 10mbit" in schedule.note


def test_a_rate_trace_csv_sets_every_link() -> None:
    schedule = parse_text("time_s,rate,delay\n0,50mbit,5ms\n10,20mbit,\n", "t.csv")
    assert [(c.time_s, c.target, c.rate_bps, c.delay_s) for c in schedule.changes] == [
        (0, "*", 50e6, 0.005),
        (10, "*", 20e6, None),
    ]


def test_trunks_are_named_as_the_topology_names_them() -> None:
    graph = uniform_sites(
        2, 1, DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=100e6, delay_s=0.02)
    )
    schedule = parse_text("time_s,link,rate\n0,site0--site1,20mbit\n", "s.csv")
    schedule.check_targets(graph)
    (segment,) = segments(schedule, graph)
    assert segment.graph.link("site0--site1").forward.rate_bps == 20e6
    assert segment.graph.link("site0--site1").forward.delay_s == 0.02
    with pytest.raises(ValueError, match="only a node's access link can go down"):
        parse_text("time_s,link,state\n0,site0--site1,down\n", "s.csv").check_targets(graph)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("time_s,link,rate\n5,*,10mbit\n1,*,20mbit\n", "times out of order"),
        ("time_s,link,rate\n0,*,-5mbit\n", "rate: must be between 10mbit and 10gbit"),
        ("time_s,link,rate\n-1,*,20mbit\n", "time_s"),
        ("time_s,link,rate\n0,*,5mbit\n", "rate: must be between"),
        ("time_s,link,rate\n0,*,20zbit\n", "line 2"),
        ("time_s,link,delay\n0,*,-3ms\n", "delay"),
        ("time_s,link,loss\n0,*,70%\n", "loss"),
        ("time_s,link,state\n0,*,sideways\n", "state"),
        ("time_s,link,compute_scale\n0,n0,0.5\n", "compute_scale"),
        ("time_s,link,rate\n0,*,\n", "sets nothing"),
        ("time_s,link,speed\n0,*,1\n", "unknown column 'speed'"),
        ("time_s,link,rate\n0,*,20mbit,extra\n", "more cells than columns"),
        ("time_s,link,rate\nsoon,*,20mbit\n", "line 2"),
        ("0\n5\nabc\n", "line 3"),
        ("0\n5\n3\n", "out of order"),
        ("time,rate\n0,fast\n", "line 2"),
        ("", "empty"),
        ("time_s,link,rate\nnan,*,20mbit\n", "time_s"),
        ("time_s,link,link\n0,*,n0\n", "appears twice"),
        ("time_s,link,rate\n0,*,20mbit\x00\n", "line 2"),
    ],
)
def test_a_bad_schedule_is_one_line_naming_the_row(text: str, needle: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_text(text, "bad.csv")
    message = str(info.value)
    assert needle in message and "\n" not in message and message.startswith("bad.csv: "), message


def test_spaces_around_cells_and_a_byte_order_mark_are_read() -> None:
    schedule = parse_text("\ufeff time_s , link , rate \n0, n1 , 20mbit\n", "s.csv")
    assert [(c.target, c.rate_bps) for c in schedule.changes] == [("n1", 20e6)]


def test_an_unknown_link_names_the_change() -> None:
    with pytest.raises(ValueError, match="change 1: unknown link"):
        parse_text("time_s,link,rate\n0,n7,20mbit\n", "s.csv").check_targets(STAR)
