"""A torchft trainer under `netbench exec --torchft`: each node a replica group of one, a lighthouse and group stores
in the switch's namespace; a node that leaves and joins is healed by a live peer over the emulated links, and run.json
says what it received before it trained again and what each node sent and received between the schedule's changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import leftovers
import pytest

from netbench.frames import MSS
from netbench.orchestrator.exec.churn_wire import churn_wire, windows

REPO = Path(__file__).resolve().parents[1]


def _row(t: float, direction: str, payload: int) -> tuple:
    """A packet row as the capture parser yields it (COLUMNS), its frame headers 66 bytes."""
    return (t, direction, "10.0.0.2", "tcp", payload + 66, payload, 1, payload == 0, 0, payload + 66)


def test_a_joining_node_catches_up_until_it_first_sends_a_full_segment_and_windows_split_at_each_change() -> None:
    applied = [{"segment": 0, "wall_time": 10.0}, {"segment": 1, "wall_time": 20.0}]
    spans = windows(applied, 0.0, 30.0)
    assert spans == [(None, 0.0, 10.0), (0, 10.0, 20.0), (1, 20.0, 30.0)]
    rows = [
        _row(5.0, "tx", 1000),  # before the leave
        _row(21.0, "rx", 400),  # after the join: chatter, then the heal's bytes
        _row(21.5, "tx", 200),  # a small request does not end the catch-up
        _row(22.0, "rx", 50_000),
        _row(23.0, "tx", MSS),  # the node's first full segment: it trains again
        _row(23.5, "rx", 7_000),
    ]
    out = churn_wire(rows, spans, [20.5])
    (join,) = out["joins"]
    assert join == {"wall_time": 20.5, "rx_payload_bytes": 50_400, "rx_wire_bytes": 50_532, "first_send_s": 2.5}
    by_segment = {s["segment"]: s for s in out["segments"]}
    assert by_segment[None]["tx_payload_bytes"] == 1000 and by_segment[0]["rx_wire_bytes"] == 0
    assert by_segment[1]["rx_payload_bytes"] == 57_400 and by_segment[1]["tx_payload_bytes"] == 200 + MSS
    assert (by_segment[1]["from_s"], by_segment[1]["to_s"]) == (20.0, 30.0)


def test_a_catch_up_that_never_ended_stops_at_the_next_join() -> None:
    spans = windows([], 0.0, 10.0)
    rows = [_row(1.5, "rx", 100), _row(3.5, "rx", 200), _row(4.0, "tx", MSS)]
    out = churn_wire(rows, spans, [1.0, 3.0])
    assert [(j["rx_payload_bytes"], j["first_send_s"]) for j in out["joins"]] == [(100, None), (200, 1.0)]


def _model_heal_bytes() -> int:
    """What the model says a heal of the DiLoCo example sends: its weights and AdamW's, DiLoCo's outer state."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from torchft_diloco import MultiMLP
    finally:
        sys.path.pop(0)
    from netbench.declarations.config import ReplicatorConfig
    from netbench.model.heal import heal_bytes
    from netbench.shapes import ParamShape

    shapes = [ParamShape(name, tuple(p.shape)) for name, p in MultiMLP().named_parameters()]
    return heal_bytes(ReplicatorConfig(name="diloco"), shapes)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_torchfts_diloco_example_is_healed_over_the_emulated_links_after_a_leave_and_join(tmp_path: Path) -> None:
    schedule = tmp_path / "churn.csv"
    # the example's outer syncs take about 75 ms here: 60 of them outlast the leave at 1 s four times over, so node 0
    # is still training (and, with the lighthouse's two replicas, waits for n1) when n1 leaves and joins
    schedule.write_text("time_s,link,member\n1,n1,leave\n2,n1,join\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "exec", "--nodes", "2", "--bw", "100mbit", "--json", "--out", str(out)]
        + ["--torchft", "--schedule-clock", "traffic", "--schedule", str(schedule), "--timeout", "150"]
        + ["--", sys.executable, str(REPO / "examples" / "torchft_diloco.py"), "60"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_json = json.loads(next(out.rglob("run.json")).read_text())
    assert run_json["status"] == "ok"
    assert run_json["cluster"]["torchft"]["lighthouse"].startswith("http://")
    assert run_json["cluster"]["torchft"]["min_replicas"] == 2  # the node back is healed by its peer
    assert [row["what"] for row in run_json["cluster"]["schedule"]["applied"]] == ["n1 left", "n1 joined"]
    nodes = {n["rank"]: n for n in run_json["exec"]["nodes"]}
    assert (nodes[0]["leaves"], nodes[1]["leaves"]) == (0, 1) and nodes[1]["exit_code"] == 0
    (join,) = nodes[1]["joins"]
    model = _model_heal_bytes()
    # the heal crossed node 1's link: what it received before it trained again is the model's heal and little else
    assert model <= join["rx_payload_bytes"] < 1.2 * model, (join, model)
    away = next(s for s in nodes[1]["segments"] if s["segment"] == 0)
    assert away["tx_payload_bytes"] == 0 and away["rx_payload_bytes"] == 0  # nothing of it ran while it was away
    assert leftovers.clean(run_json["run_id"]), leftovers.traces(run_json["run_id"])


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--schedule-clock", "later"], "--schedule-clock: one of step, start, traffic"),
        (["--torchft", "--topology", "sites", "--sites", "2", "--nodes", "4"], "--torchft: supported on a network"),
    ],
)
def test_bad_torchft_and_clock_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "exec", "--out", str(out), *args, "--", "true"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr
    assert not out.exists()
