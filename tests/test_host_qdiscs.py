"""Host shaping (`netbench worker --bw`) shared by several runs: one run per interface, a qdisc removed only by the run
that installed it, a guard that watches its worker's pid, `netbench clean --host-qdiscs` for what a killed guard
left, and pure ACKs served ahead of the host's own data where the kernel takes the tree. A node namespace of an
emulated cluster stands in for a host, its eth0 for the host's NIC."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from acks_traffic import acked_round_trip_ms, acks_first_trees
from leftovers import wait_until

from netbench.emulation import acksfirst, cleanup, hostrecords, shaping
from netbench.emulation.capabilities import detect
from netbench.emulation.cluster import Cluster
from netbench.emulation.spec import ClusterSpec, DirectionSpec

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]

# A worker's shaping alone: shape IFACE at RATE for run RUN_ID, say so and what it installed, hold it until stdin
# closes. With "race" the worker skips its own early check, as two workers do that both passed it before either
# installed; with "fifo" doctor's probe finds no ACKs-first tree, as on a kernel without htb or u32.
WORKER = """
import dataclasses, json, os, sys, time
from netbench.emulation import capabilities
from netbench.emulation.hostshaping import HostShaper, HostShapingError
from netbench.emulation.spec import DirectionSpec
iface, run_id, mode, rate = sys.argv[1:5]
if mode == "race":
    HostShaper.check = lambda self: None
if mode == "fifo":
    found = dataclasses.replace(capabilities.detect(), acks_first=False)
    capabilities.detect = lambda: found
try:
    with HostShaper(iface, DirectionSpec(rate_bps=float(rate)), run_id=run_id) as shaper:
        if mode == "fork" and os.fork() == 0:  # a workload's child that keeps every inherited descriptor
            time.sleep(60)
            os._exit(0)
        print("shaped", flush=True)
        print(json.dumps(shaper.installed), flush=True)
        sys.stdin.readline()
except HostShapingError as exc:
    print("refused", exc, flush=True)
"""


def _root(iface: str):
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return shaping.root_qdisc(ipr, ipr.link_lookup(ifname=iface)[0])


def _unshape(iface: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        shaping.clear(ipr, ipr.link_lookup(ifname=iface)[0])


def _records_of(run_id: str) -> list[Path]:
    found = []
    for path in hostrecords.folder().glob("*.json"):
        try:
            if f'"run_id": "{run_id}"' in path.read_text():
                found.append(path)
        except OSError:
            pass
    return found


def _qdiscs(node) -> str:  # noqa: ANN001 - a cluster's node
    return node.run(["tc", "qdisc", "show", "dev", node.iface], check=True).stdout


@pytest.fixture(scope="module")
def cluster():
    """Two nodes; the first's eth0 has the kernel's default root qdisc, as a host NIC would."""
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=10e9), down=DirectionSpec(rate_bps=10e9), offload="off")
    with Cluster(spec) as cluster:
        node = cluster.nodes[0]
        node.call(_unshape, node.iface)
        yield cluster


@pytest.fixture(scope="module")
def host(cluster):  # noqa: ANN001, ANN201 - a cluster's node
    return cluster.nodes[0]


@pytest.fixture
def workers(host):
    started: list[subprocess.Popen] = []

    def start(run_id: str, mode: str = "plain", rate_bps: float = 100e6) -> subprocess.Popen:
        proc = host.popen(
            [sys.executable, "-c", WORKER, host.iface, run_id, mode, str(rate_bps)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:  # a guard ends by itself once its worker is gone
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    cleanup.host_qdiscs(only=[f"hq{i}" for i in range(8)])
    host.call(_unshape, host.iface)


def test_two_runs_racing_for_one_interface_one_wins_and_keeps_its_qdisc(host, workers) -> None:
    """Both passed the early check; the host lock lets one install, the other is refused in one line and removes
    nothing.
    """
    first, second = workers("hq0", "race"), workers("hq1", "race")
    answers = {proc: proc.stdout.readline().strip() for proc in (first, second)}
    winners = [proc for proc, line in answers.items() if line == "shaped"]
    (loser,) = [proc for proc, line in answers.items() if line.startswith("refused")]
    assert len(winners) == 1, answers
    assert "is shaped by netbench run hq" in answers[loser] and "one run per interface" in answers[loser], answers[
        loser
    ]
    assert loser.wait(timeout=30) == 0
    assert host.call(_root, host.iface)[0] == "tbf"  # the winner's qdisc survived the loser's failure
    winner_id = "hq0" if winners[0] is first else "hq1"
    assert len(_records_of(winner_id)) == 1
    winners[0].stdin.close()
    assert winners[0].wait(timeout=30) == 0
    assert host.call(_root, host.iface)[1] == 0 and _records_of(winner_id) == []


def test_a_forked_child_holding_the_pipe_does_not_keep_the_qdisc(host, workers) -> None:
    """The guard watches its worker's pid: SIGKILL the worker, its forked child lives on, the qdisc still goes."""
    worker = workers("hq2", "fork")
    assert worker.stdout.readline().strip() == "shaped"
    child = next(c for c in psutil.Process(worker.pid).children() if "shapeguard" not in " ".join(c.cmdline()))
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    try:
        assert wait_until(lambda: host.call(_root, host.iface)[1] == 0, 30), host.call(_root, host.iface)
        assert child.is_running() and _records_of("hq2") == []
    finally:
        child.kill()


def test_clean_removes_what_a_killed_guard_left_and_never_a_live_ones(host, workers, capsys) -> None:
    from netbench.cli.app import main

    before = _qdiscs(host)
    worker = workers("hq3")
    assert worker.stdout.readline().strip() == "shaped"
    assert cleanup.host_qdiscs(only=["hq3"]) == [] and host.call(_root, host.iface)[0] == "tbf"  # its guard lives
    (guard,) = [c for c in psutil.Process(worker.pid).children() if "shapeguard" in " ".join(c.cmdline())]
    guard.kill()  # as scancel or a pod deletion would, with the job's cgroup
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not guard.is_running(), 10)
    assert host.call(_root, host.iface)[0] == "tbf" and len(_records_of("hq3")) == 1
    after = workers("hq4")  # the next run on this interface is told what to do
    line = after.stdout.readline().strip()
    assert line.startswith("refused") and "netbench clean --host-qdiscs" in line, line
    assert cleanup.host_qdiscs(dry_run=True, only=["hq3"]) == [cleanup.HostQdisc(host.iface, "hq3", True)]
    main(["clean", "--host-qdiscs", "hq3"])
    assert f"qdisc and record of run hq3 on {host.iface}" in capsys.readouterr().out.replace("\n", " ")
    assert host.call(_root, host.iface)[1] == 0 and _records_of("hq3") == []
    assert _qdiscs(host) == before  # the ACKs-first tree went with the root it sits beneath


def test_a_qdisc_someone_else_put_in_place_is_left_to_them(host, workers) -> None:
    """A killed guard's record no longer matches what is on the interface: clean drops the record, not the qdisc."""
    worker = workers("hq5")
    assert worker.stdout.readline().strip() == "shaped"
    (guard,) = [c for c in psutil.Process(worker.pid).children() if "shapeguard" in " ".join(c.cmdline())]
    guard.kill()
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not guard.is_running(), 10)
    host.run(
        [
            "tc",
            "qdisc",
            "replace",
            "dev",
            host.iface,
            "root",
            "handle",
            "1:",
            "tbf",
            "rate",
            "1gbit",
            "burst",
            "256k",
            "latency",
            "50ms",
        ],
        check=True,
    )  # same kind and handle, other parameters
    assert cleanup.host_qdiscs(only=["hq5"]) == [cleanup.HostQdisc(host.iface, "hq5", False)]
    assert host.call(_root, host.iface) == ("tbf", 0x10000) and _records_of("hq5") == []


@pytest.mark.parametrize("acks_first", [True, False])
def test_a_flow_whose_acks_cross_the_full_shaped_queue_waits_for_them_only_without_acks_first(
    cluster, host, workers, acks_first: bool
) -> None:
    """Where doctor's probe finds the tree, the worker's tbf serves pure ACKs first and says so; else a FIFO. Either
    way releasing the shaping leaves the interface's qdiscs as they were."""
    if acks_first and not detect().acks_first:
        pytest.skip("this kernel refuses the ACKs-first tree (htb, pfifo and u32 beneath tbf)")
    before = _qdiscs(host)
    worker = workers("hq6" if acks_first else "hq7", "plain" if acks_first else "fifo", 10e6)
    assert worker.stdout.readline().strip() == "shaped"
    installed = json.loads(worker.stdout.readline())
    assert acks_first_trees(host) == ({"1:1": acksfirst.ROOT} if acks_first else {})
    assert ("acks_first" in installed) == acks_first
    rtt_ms = acked_round_trip_ms(host, cluster.nodes[1])  # the other node sends to host, whose uplink is full
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0
    assert _qdiscs(host) == before
    print(f"round trip across the worker's full 10mbit queue, ACKs first {acks_first}: {rtt_ms:.0f} ms")
    if acks_first:
        assert rtt_ms < 400
    else:
        assert rtt_ms > 900  # the ACKs wait behind 1.2 s of the host's own data
