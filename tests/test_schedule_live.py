"""Link schedules on real namespaces: tbf rates changed in place, the delay line's delay changed while it runs (native
and Python builds), a link taken down and brought back, straggler phases, and runs that ride out or fail an outage.

Bounds are generous (a shared 2-core machine); what is asserted is the behaviour: the rate the kernel shapes to, the
round trip the delay line holds packets for, a connection that fails while the link is down.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import leftovers
import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.cluster import Cluster
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.runner import run
from netbench.schedule import parse_text
from netbench.schedule.live import LiveSchedule
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
PORT = 5301
SERVER = (
    "import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    f"s.bind(('0.0.0.0', {PORT})); s.listen(64)\nwhile True: s.accept()[0].close()"
)


def _connect_rtt(address: str) -> float | None:
    """Median time of a TCP handshake to ``address`` (one round trip); None if it cannot connect within 1 s."""
    times = []
    for _ in range(5):
        began = time.perf_counter()
        try:
            with socket.create_connection((address, PORT), timeout=1.0):
                times.append(time.perf_counter() - began)
        except OSError:
            return None
    return sorted(times)[2]


def _tbf_rate(iface: str) -> str:
    out = subprocess.run(["tc", "qdisc", "show", "dev", iface], capture_output=True, text=True, check=True).stdout
    return out.split(" rate ")[1].split()[0]


def _start_clock(records: Path) -> None:
    """Rank 0's first measured step, as a worker records it: the schedule's time 0 is now."""
    records.write_text(
        json.dumps({"event": "step", "rank": 0, "step": 0, "warmup": False, "t_start": time.time()}) + "\n"
    )


def _tick_until(live: LiveSchedule, segment: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while live.applied < segment and time.monotonic() < deadline:
        live.tick()
        time.sleep(0.05)
    assert live.applied >= segment


@pytest.mark.parametrize("build", ["native", "python"])
def test_rate_delay_and_link_state_change_while_the_cluster_runs(
    build: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETBENCH_DELAY_LINE", build)
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.005), down=DirectionSpec(rate_bps=100e6))
    schedule = parse_text(
        "time_s,link,rate,delay,state\n0,*,50mbit,,\n0.3,*,20mbit,40ms,\n2,n1,,,down\n4,n1,,,up\n", "s.csv"
    )
    with Cluster(spec) as cluster:
        server = cluster.nodes[1].popen([sys.executable, "-c", SERVER])
        records = tmp_path / "rank0.jsonl"
        live = LiveSchedule(cluster, schedule, spec.topology, 1.0, tmp_path / "schedule.csv", records)
        live.begin()  # the time-0 change, before any step
        assert cluster.nodes[0].call(_tbf_rate, cluster.nodes[0].iface) == "50Mbit"
        assert 0.008 < cluster.nodes[0].call(_connect_rtt, cluster.nodes[1].address) < 0.03  # 5 ms on each uplink
        _start_clock(records)
        _tick_until(live, 1)
        assert cluster.nodes[0].call(_tbf_rate, cluster.nodes[0].iface) == "20Mbit"
        assert cluster.switch.call(_tbf_rate, cluster.nodes[1].port) == "20Mbit"
        assert 0.075 < cluster.nodes[0].call(_connect_rtt, cluster.nodes[1].address) < 0.15  # 40 ms on each uplink
        _tick_until(live, 2)
        assert cluster.nodes[0].call(_connect_rtt, cluster.nodes[1].address) is None  # n1's link is down
        _tick_until(live, 3)
        assert cluster.nodes[0].call(_connect_rtt, cluster.nodes[1].address) is not None
        cluster.check()  # the delay line took every change and is still running
        server.kill()
        cluster.down()
    log = pd.read_csv(tmp_path / "schedule.csv")
    assert log["segment"].tolist() == [0, 1, 2, 3]
    assert log["late_s"].iloc[1:].max() < 1.0
    assert "n1 down" in log["what"].iloc[2] and "n1 up" in log["what"].iloc[3]


WORKLOAD = WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=1", compute_ms=40)


def _config(tmp_path: Path, schedule: str, steps: int, **extra) -> RunConfig:
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    return RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="dct"),
        workload=WORKLOAD,
        steps=steps,
        warmup_steps=2,
        out_dir=tmp_path,
        capture=False,
        trace=False,
        schedule=parse_text(schedule, "s.csv"),
        **extra,
    )


def _inodes(log: dict):
    return lambda cluster: log.update(run_id=cluster.names.run_id, inodes=leftovers.inodes(cluster.names.run_id))


def test_an_outage_stalls_the_steps_it_overlaps_and_a_straggler_phase_slows_the_segment(tmp_path: Path) -> None:
    text = "time_s,link,rate,state,compute_scale\n0,*,100mbit,,\n2,n0,,,3\n5,n0,,,1\n6,n1,,down,\n9,n1,,up,\n"
    log: dict = {}
    result = run(_config(tmp_path, text, steps=70, timeout_s=30), on_cluster=_inodes(log))
    assert result.status == "ok", result.reason
    segments = {s["segment"]: s for s in result.summary["schedule_segments"]}
    assert segments[1]["step_time_s"] > 1.8 * segments[0]["step_time_s"]  # node 0 computes 3x slower from 2 s to 5 s
    assert abs(segments[1]["replay_error"]) < 0.25, segments[1]
    stalled = segments[3]["stalled_steps"]
    steps = pd.read_csv(result.run_dir / "steps.csv")
    slowest = steps.groupby("step")["step_s"].max()
    assert stalled and slowest[stalled].max() > 2.0  # the step that waited out the 3 s outage
    assert {s["step"] for s in result.summary["stalls"]} <= set(stalled)
    assert set(steps.loc[steps["rank"] == 0, "compute_scale"]) == {1.0, 3.0}
    assert set(steps["schedule_segment"]) >= {0, 1, 2, 4}
    applied = pd.read_csv(result.run_dir / "schedule.csv")
    assert applied["segment"].tolist() == [0, 1, 2, 3, 4]
    assert leftovers.clean(log["run_id"], log["inodes"]), leftovers.traces(log["run_id"], log["inodes"])


def test_an_outage_longer_than_the_timeout_fails_the_run_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    text = "time_s,link,state\n1,n1,down\n60,n1,up\n"
    log: dict = {}
    result = run(_config(tmp_path, text, steps=400, timeout_s=4), on_cluster=_inodes(log))
    assert result.status == "failed" and "\n" not in result.reason, result.reason
    assert result.reason.startswith("rank ")  # names the rank whose own error ended the run
    assert pd.read_csv(result.run_dir / "steps.csv")["step"].nunique() >= 3  # what was measured before is kept
    assert leftovers.clean(log["run_id"], log["inodes"]), leftovers.traces(log["run_id"], log["inodes"])


def test_a_trunk_rate_changes_in_place_on_a_topology() -> None:
    """probe --schedule on two sites: the WAN trunk's tbf follows the schedule (the path crosses it: the WAN has
    delay).
    """
    from netbench.schedule.probe import probe_segments
    from netbench.topology.presets import uniform_sites

    access = DirectionSpec(rate_bps=1e9)
    graph = uniform_sites(2, 1, access, access, DirectionSpec(rate_bps=100e6, delay_s=0.002))
    spec = ClusterSpec(nodes=2, up=access, down=access, topology=graph)
    rows = probe_segments(spec, parse_text("time_s,link,rate\n0,site0--site1,50mbit\n3,*,20mbit\n", "s.csv"), seconds=2)
    assert [r["configured_bps"] for r in rows] == [50e6, 20e6]
    for r in rows:
        assert 0.85 < r["goodput_bps"] / r["configured_bps"] < 1.0, rows
