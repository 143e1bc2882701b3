"""Sweeps on a reused cluster: which points share one, and that nothing of one point reaches the next.

The emulation tests build real namespaces, shape real links and run real workers forked from the
sweep's fork server; a test that Ctrl-Cs a sweep runs the CLI in its own session, as a terminal would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import leftovers
import psutil
import pytest

from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.emulation.tcpsettings import TcpOptions
from netbench.orchestrator.cluster_reuse import ClusterReuse, counters_since, network_key, order_by_network
from netbench.orchestrator.phases import Outcome
from netbench.orchestrator.sweep.scenario import points, scenario_from_dict
from netbench.orchestrator.sweep.sweep import read_summary

TINY = {"kind": "shapes", "shapes": "llama:d_model=64,layers=1,ffn=128,vocab=128", "compute_ms": 20}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def _spec(rate: float, nodes: int = 2, delay: float = 0.0, **kw) -> ClusterSpec:
    return ClusterSpec(
        nodes=nodes, up=DirectionSpec(rate_bps=rate, delay_s=delay), down=DirectionSpec(rate_bps=rate), **kw
    )


# ------------------------------------------------------------------------------------------ which points share


def test_the_network_key_leaves_out_the_star_rates_and_nothing_else() -> None:
    assert network_key(_spec(10e6)) == network_key(_spec(1e9))
    assert network_key(_spec(1e8)) != network_key(_spec(1e8, nodes=4))
    assert network_key(_spec(1e8)) != network_key(_spec(1e8, delay=0.02))
    assert network_key(_spec(1e8)) != network_key(_spec(1e8, tcp=TcpOptions(slow_start_after_idle=False)))
    assert network_key(_spec(1e9)) != network_key(_spec(10e9))  # offloads go on above 2.5gbit: a rebuild


def test_points_are_grouped_by_network_in_order_of_first_appearance() -> None:
    scenario = scenario_from_dict(
        {
            "grid": {"bw": ["10mbit", "1gbit"], "replicator": ["full", "dct"], "nodes": [2, 4]},
            "steps": 1,
            "warmup": 0,
            "workload": TINY,
        }
    )
    plan = points(scenario, Path("/nonexistent/runs"))
    ordered = order_by_network(plan, lambda p: p.config)
    assert sorted(p.key for p in ordered) == sorted(p.key for p in plan)
    nodes = [p.config.cluster.nodes for p in ordered]
    assert nodes == sorted(nodes, key=[p.config.cluster.nodes for p in plan].index)  # one run of each network
    within = [p.key for p in ordered if p.config.cluster.nodes == 2]
    assert within == [p.key for p in plan if p.config.cluster.nodes == 2]  # each group keeps its own order


def test_cumulative_counters_read_as_differences_maxima_as_they_are() -> None:
    now = {"passed": 150, "late": 3, "late_sum_s": 0.5, "late_max_s": 0.004, "queue_dropped": 2}
    base = {"passed": 100, "late": 1, "late_sum_s": 0.25, "late_max_s": 0.002, "queue_dropped": 2}
    assert counters_since(now, base) == {
        "passed": 50,
        "late": 2,
        "late_sum_s": 0.25,
        "late_max_s": 0.004,
        "queue_dropped": 0,
    }
    assert counters_since(None, base) is None and counters_since(now, None) == now


# --------------------------------------------------------------------------------- nothing carries over


def _backlog_bytes(netns: str) -> int:
    out = subprocess.run(
        ["tc", "-n", netns, "-s", "-j", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True, check=True
    ).stdout
    return sum(int(q.get("backlog", 0)) for q in json.loads(out) if q.get("kind") == "tbf")


def _tcp_metrics(netns: str) -> str:
    return subprocess.run(
        ["ip", "-n", netns, "tcp_metrics", "show"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _bulk_transfer(cluster, megabytes: int) -> None:
    """A TCP transfer from node 0 to node 1 (iperf3), run to its end: its connection's metrics stay cached in node 0."""
    server = cluster.nodes[1].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    client = cluster.nodes[0].run(["iperf3", "-c", cluster.nodes[1].address, "-n", f"{megabytes}M"], timeout=60)
    assert client.returncode == 0, client.stderr
    server.wait(timeout=10)


UDP_FLOOD = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 << 20)
while True:
    try:
        s.sendto(bytes(1400), (sys.argv[1], 5201))
    except OSError:
        pass  # the shaper's queue is full: the datagram is dropped, as a flood's are
"""


def _flood(cluster, seconds: float) -> None:
    """UDP from node 0 to node 1 as fast as it can be written: node 0's shaper queue fills and stays full until it
    drains. No TCP: a connection killed with the queue full leaves its FIN queued behind the flood, and the kernel
    retransmits it a few hundred milliseconds later, through whatever qdisc the port has by then."""
    flood = cluster.nodes[0].popen(
        [sys.executable, "-c", UDP_FLOOD, cluster.nodes[1].address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(seconds)
    os.killpg(flood.pid, signal.SIGKILL)
    flood.wait()


@pytest.mark.netns
@needs_root
def test_a_point_after_a_full_10mbit_queue_inherits_neither_its_backlog_nor_its_tcp_metrics() -> None:
    """Point A (10mbit) ends with its shaper queue full after a TCP transfer to the same peer; point B on the same
    cluster starts with empty queues and fresh shaper statistics, and no TCP metrics were cached for it to inherit."""
    seen: dict[str, object] = {}

    def point_a(cluster) -> None:
        _bulk_transfer(cluster, 2)
        seen["metrics_a"] = _tcp_metrics(cluster.nodes[0].netns)
        _flood(cluster, 1.5)
        seen["backlog_a"] = _backlog_bytes(cluster.nodes[0].netns)
        seen["ended_a"] = time.monotonic()

    def point_b(cluster) -> None:
        seen["began_b"] = time.monotonic()
        seen["backlog_b"] = _backlog_bytes(cluster.nodes[0].netns)
        seen["metrics_b"] = _tcp_metrics(cluster.nodes[0].netns)
        seen["no_save"] = subprocess.run(
            ["ip", "netns", "exec", cluster.nodes[0].netns, "sysctl", "-n", "net.ipv4.tcp_no_metrics_save"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        seen["shaping_b"] = cluster.shaping
        stats = json.loads(
            subprocess.run(
                ["tc", "-n", cluster.nodes[0].netns, "-s", "-j", "qdisc", "show", "dev", "eth0"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        seen["sent_b"] = sum(int(q.get("packets", 0)) for q in stats if q.get("kind") == "tbf")

    with ClusterReuse() as held:
        slow, fast = _spec(10e6), _spec(1e9)
        names = held.names_for(slow)
        first, second = Outcome(), Outcome()
        held.hold(slow, names, first, "", point_a)
        assert first.status == "ok", first.reason
        assert held.names_for(fast) == names  # the same network: the same cluster
        held.hold(fast, names, second, "", point_b)
        assert second.status == "ok", second.reason
        assert held.built == 1
        run_id = names.run_id
    assert seen["backlog_a"] > 500_000, seen  # a full 10mbit queue: about a second of line rate
    drain_s = seen["backlog_a"] * 8 / 10e6
    assert seen["began_b"] - seen["ended_a"] < drain_s, seen  # too soon for the queue to have drained: it was dropped
    assert seen["metrics_a"] == "" and seen["no_save"] == "1", seen  # a closed connection left no window behind
    assert seen["backlog_b"] == 0 and seen["sent_b"] == 0, seen
    assert seen["metrics_b"] == "", seen["metrics_b"]
    assert all(s["tbf"]["rate_bps"] == 1e9 for s in seen["shaping_b"].values()), seen["shaping_b"]
    assert leftovers.clean(run_id), leftovers.traces(run_id)


# ----------------------------------------------------------------------------- workers: failure and Ctrl-C


@pytest.mark.netns
@needs_root
def test_a_killed_worker_fails_its_point_and_the_next_point_runs_on_a_new_cluster(tmp_path: Path) -> None:
    from netbench.emulation import netns
    from netbench.orchestrator.run.runner import run

    scenario = scenario_from_dict(
        {
            "grid": {"bw": ["100mbit", "1gbit"], "replicator": ["full"]},
            "steps": 400,
            "warmup": 1,
            "capture": False,
            "workload": TINY,
        }
    )
    plan = points(scenario, tmp_path / "runs")

    def kill_node_1_worker(cluster) -> None:
        assert leftovers.wait_until(lambda: list(tmp_path.glob("runs/*/workers/rank1.jsonl")), 60)
        time.sleep(1.0)
        for pid in netns.pids_in([cluster.nodes[1].netns]):
            if "forkserver" in leftovers.command_line(pid):
                os.kill(pid, signal.SIGKILL)

    with ClusterReuse() as held:
        failed = run(plan[0].config, on_cluster=kill_node_1_worker, reuse=held)
        first_id = json.loads((failed.run_dir / "run.json").read_text())["cluster"]["run_id"]
        later = plan[1].config.model_copy(update={"steps": 3})
        ok = run(later, reuse=held)
        assert held.built == 2
    assert failed.status == "failed" and "rank 1" in (failed.reason or ""), failed.reason
    assert ok.status == "ok", ok.reason
    assert leftovers.clean(first_id), leftovers.traces(first_id)


def _forkservers(marker: Path) -> list[int]:
    """Fork servers started from ``marker`` (their working directory is on their command line)."""
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "netbench.orchestrator.forkserver" in (p.info["cmdline"] or []) and str(marker) in (p.info["cmdline"] or [])
    ]


@pytest.mark.netns
@needs_root
def test_ctrl_c_keeps_finished_points_leaves_nothing_and_the_sweep_resumes(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    argv = [
        sys.executable,
        "-m",
        "netbench",
        "sweep",
        "--bw",
        "100mbit,1gbit",
        "--replicator",
        "full,dct",
        "--nodes",
        "2",
        "--steps",
        "40",
        "--warmup",
        "1",
        "--shapes",
        TINY["shapes"],
        "--compute-ms",
        "20",
        "--no-calibrate",
        "--no-capture",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:

        def finished() -> int:
            try:
                return int((read_summary(out)["status"] == "ok").sum())
            except Exception:  # noqa: BLE001 - not written yet
                return 0

        assert leftovers.wait_until(lambda: finished() >= 1, 300, interval_s=0.05), proc.stdout.read().decode()[-2000:]
        run_id = leftovers.run_id_of_pid(proc.pid)
        inodes = set(leftovers.inodes(run_id)) if run_id else set()
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, output[-2000:]
    kept = read_summary(out)
    done = set(kept[kept["status"] == "ok"]["key"].astype(str))
    assert 1 <= len(done) < 4, kept
    assert run_id is not None and leftovers.clean(run_id, inodes), leftovers.traces(run_id, inodes)
    assert leftovers.wait_until(lambda: not _forkservers(tmp_path), 10), _forkservers(tmp_path)

    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"skipped {len(done)} (done earlier)" in again.stderr, again.stderr[-2000:]
    resumed = read_summary(out)
    assert set(resumed["status"]) == {"ok"} and len(resumed) == 4
    assert done <= set(resumed["key"].astype(str))
    assert not _forkservers(tmp_path)
