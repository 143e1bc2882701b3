"""`netbench worker --topology` on 'hosts' that are node namespaces: each host's eth0 gets an HTB class per peer,
traffic to a peer runs at its path's rate, traffic to anyone else on the same link is left alone, and the tree goes
when the worker goes (its guard) or, if the guard was killed too, with `netbench clean --host-qdiscs`. Needs root."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from acks_traffic import acked_round_trip_ms, acks_first_trees
from leftovers import wait_until

from netbench.cli.app import main
from netbench.declarations.config import ReplicatorConfig
from netbench.emulation import cleanup, hostrecords, htb, shaping
from netbench.emulation.cluster import Cluster
from netbench.emulation.shaping import TbfParams
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.runner import run
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), "OMP_NUM_THREADS": "1"}
WAN_BPS = 100e6
# Two sites of one host each: the path between them is the WAN's 100mbit, each host's own uplink 1gbit.
TOPOLOGY = """
[[sites]]
name = "east"
nodes = 1
lan_bw = "1gbit"
[[sites]]
name = "west"
nodes = 1
lan_bw = "1gbit"
[[wan]]
between = ["east", "west"]
bw = "100mbit"
"""
TINY = "llama:d_model=32,layers=1,ffn=64,vocab=64"  # a few kB per step: the peer class stays free for iperf3
SHAPES = "llama:d_model=96,layers=2,ffn=256,vocab=512"  # as tests/test_torchrun.py: ~0.11 s of all-reduce at 100mbit
COMPUTE_MS, STEPS, WARMUP = 20.0, 6, 2


def _root(iface: str):
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return shaping.root_qdisc(ipr, ipr.link_lookup(ifname=iface)[0])


def _unshape(iface: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        shaping.clear(ipr, ipr.link_lookup(ifname=iface)[0])


def root_of(node) -> tuple[str, int] | None:
    return node.call(_root, node.iface)


@pytest.fixture(scope="module")
def hosts():
    """Three 'hosts' on one switch at 10gbit, their own egress unshaped: two run the job, the third is a bystander."""
    spec = ClusterSpec(nodes=3, up=DirectionSpec(rate_bps=10e9), down=DirectionSpec(rate_bps=10e9), offload="off")
    with Cluster(spec) as cluster:
        for node in cluster.nodes:
            node.call(_unshape, node.iface)
        yield cluster


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    path = tmp_path / "two-sites.toml"
    path.write_text(TOPOLOGY)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def goodput_bps(client, server, seconds: int = 4) -> float:
    """iperf3 from ``client`` to ``server`` for ``seconds`` after a second of warm-up, at the receiver."""
    listening = server.popen(
        ["iperf3", "-s", "-1", "-B", server.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(50):
            done = client.run(
                ["iperf3", "-c", server.address, "-t", str(seconds), "-O", "1", "-J"], capture_output=True, text=True
            )
            if done.returncode == 0:
                return json.loads(done.stdout)["end"]["sum_received"]["bits_per_second"]
            time.sleep(0.1)  # the server was not listening yet
        raise AssertionError(done.stdout[-500:])
    finally:
        listening.wait(timeout=10)


def test_only_traffic_to_peers_is_shaped_and_a_killed_worker_leaves_nothing(
    hosts, topology_file: Path, tmp_path: Path
) -> None:
    """Two workers without torchrun (rank 0 hosts the store the addresses travel through); then SIGKILL rank 0."""
    east, west, bystander = hosts.nodes
    port = str(_free_port())
    workers = []
    for rank, node in enumerate((east, west)):
        env = {**ENV, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": east.address, "MASTER_PORT": port}
        argv = [
            sys.executable,
            "-m",
            "netbench",
            "worker",
            "--iface",
            "eth0",
            "--topology",
            str(topology_file),
            "-r",
            "full",
            "--workload",
            "shapes",
            "--shapes",
            TINY,
            "--compute-ms",
            "200",
            "--steps",
            "100000",
            "--timeout",
            "5",
            "--out",
            str(tmp_path / f"out{rank}"),
            "--run-id",
            f"topo{rank}",
        ]
        log = (tmp_path / f"worker{rank}.log").open("w")
        workers.append(node.popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    logs = lambda: "\n".join((tmp_path / f"worker{r}.log").read_text()[-1500:] for r in range(2))  # noqa: E731
    try:
        assert wait_until(lambda: root_of(east)[0] == "htb" and root_of(west)[0] == "htb", 90), logs()
        classes = east.run(["tc", "class", "show", "dev", "eth0"], capture_output=True, text=True).stdout
        assert "rate 100Mbit ceil 100Mbit" in classes and "rate 1Gbit ceil 1Gbit" in classes, classes
        to_peer, to_bystander = goodput_bps(east, west), goodput_bps(east, bystander)
        print(
            f"east -> west (peer, 100mbit path): {to_peer / 1e6:.1f} Mbit/s; east -> bystander: "
            f"{to_bystander / 1e6:.1f} Mbit/s"
        )
        assert 0.90 <= to_peer / WAN_BPS <= 0.97, to_peer
        assert to_bystander > 3 * WAN_BPS, (
            to_bystander
        )  # the default class is unshaped (CPU-bound here, 0.7-2.2 Gbit/s)
        assert all(w.poll() is None for w in workers), logs()
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=10)
        assert wait_until(lambda: root_of(east)[1] == 0, 30), root_of(east)  # its guard removed the tree
        assert workers[1].wait(timeout=60) == 1  # its peer is gone: the collective times out, the run fails
        assert root_of(west)[1] == 0, logs()
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()


def test_a_delayed_path_without_netem_is_refused_before_anything_is_installed(
    hosts, topology_file: Path, tmp_path: Path
) -> None:
    """Delay on a real host needs netem: without it one line, exit 2, and the interface keeps the kernel's default."""
    from netbench.emulation.capabilities import detect

    if detect().netem:
        pytest.skip("this kernel has netem: the delayed path is shaped")
    east = hosts.nodes[0]
    delayed = tmp_path / "delayed.toml"
    delayed.write_text(TOPOLOGY.replace('bw = "100mbit"', 'bw = "100mbit"\ndelay = "20ms"'))
    env = {**ENV, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": east.address, "MASTER_PORT": str(_free_port())}
    done = east.run(
        [
            sys.executable,
            "-m",
            "netbench",
            "worker",
            "--iface",
            "eth0",
            "--topology",
            str(delayed),
            "-r",
            "full",
            "--out",
            str(tmp_path / "out"),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "n0 -> n1 has 20 ms one-way delay" in done.stderr and "netem" in done.stderr, done.stderr
    assert root_of(east)[1] == 0


# A worker's shaping alone, as tests/test_host_qdiscs.py has it, with the per-peer tree (a path at RATE to each
# PEER): says so and what it installed, shaped until stdin closes.
HOLDER = """
import json, sys
from netbench.emulation.hostshaping import HostShaper
from netbench.emulation.htb import HtbShaping, PeerClass
from netbench.emulation.spec import DirectionSpec
iface, run_id, rate, *peers = sys.argv[1:]
path = DirectionSpec(rate_bps=float(rate))
classes = tuple(PeerClass(node=f"n{k + 1}", addresses=(peer,), path=path) for k, peer in enumerate(peers))
tree = HtbShaping(node="n0", uplink=DirectionSpec(rate_bps=1e9), peers=classes)
with HostShaper(iface, tree, run_id=run_id) as shaper:
    print("shaped", flush=True)
    print(json.dumps(shaper.installed), flush=True)
    sys.stdin.readline()
"""


def _hold(node, run_id: str, rate_bps: float, *peers: str) -> subprocess.Popen:  # noqa: ANN001 - a cluster's node
    """Start HOLDER on ``node``: a per-peer tree for ``run_id``, a path at ``rate_bps`` to each peer address."""
    return node.popen(
        [sys.executable, "-c", HOLDER, node.iface, run_id, str(rate_bps), *peers],
        env={**os.environ, **ENV},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _end(holder: subprocess.Popen, run_id: str) -> None:
    """Whatever a test left of ``holder`` and its run's tree: gone."""
    if holder.poll() is None:
        holder.kill()
        holder.wait()
    cleanup.host_qdiscs(only=[run_id])


def test_clean_removes_the_tree_a_killed_guard_left(hosts, capsys) -> None:
    """Guard and worker killed (a cgroup kill); unclassified traffic since then does not hide the tree from clean."""
    east, west, bystander = hosts.nodes
    holder = _hold(east, "htbq0", WAN_BPS, west.address)
    try:
        assert holder.stdout.readline().strip() == "shaped"
        (guard,) = [c for c in psutil.Process(holder.pid).children() if "shapeguard" in " ".join(c.cmdline())]
        guard.kill()
        holder.kill()
        holder.wait()
        assert wait_until(lambda: not guard.is_running(), 10)
        assert (
            goodput_bps(east, bystander, seconds=1) > 0
        )  # unclassified traffic: htb counts it, the fingerprint must not
        assert root_of(east)[0] == "htb"
        assert cleanup.host_qdiscs(dry_run=True, only=["htbq0"]) == [cleanup.HostQdisc(east.iface, "htbq0", True)]
        main(["clean", "--host-qdiscs", "htbq0"])
        assert "qdisc and record of run htbq0" in capsys.readouterr().out.replace("\n", " ")
        assert root_of(east)[1] == 0
        assert not [p for p in hostrecords.folder().glob("*.json") if "htbq0" in p.read_text()]
    finally:
        _end(holder, "htbq0")
        east.call(_unshape, east.iface)


def test_each_peer_class_serves_pure_acks_first(hosts) -> None:
    """Each peer's class carries the ACKs-first tree: the ACKs east sends west leave ahead of east's own data to west
    queued in the same class, and releasing the tree leaves east's qdiscs as they were."""
    from netbench.emulation.capabilities import detect

    if not detect().acks_first:
        pytest.skip("this kernel refuses the ACKs-first tree (htb, pfifo and u32)")
    east, west, bystander = hosts.nodes
    before = east.run(["tc", "qdisc", "show", "dev", east.iface], check=True).stdout
    holder = _hold(east, "htbq1", 10e6, west.address, bystander.address)
    try:
        assert holder.stdout.readline().strip() == "shaped"
        classes = json.loads(holder.stdout.readline())["htb"]["classes"]
        trees = [f"{htb.FIRST_TREE_MAJOR + htb.TREE_MAJOR_STRIDE * k:x}:" for k in range(2)]
        assert acks_first_trees(east) == {"1:10": trees[0], "1:11": trees[1]}
        frames = TbfParams.for_rate(10e6, False).limit_frames
        assert [c["acks_first"]["frames_per_band"] for c in classes] == [frames, frames]
        rtt_ms = acked_round_trip_ms(east, west)  # west sends to east, whose class toward west is full
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    finally:
        _end(holder, "htbq1")
    assert east.run(["tc", "qdisc", "show", "dev", east.iface], check=True).stdout == before
    print(f"round trip across a full 10mbit peer class with ACKs first: {rtt_ms:.0f} ms")
    assert rtt_ms < 400  # a full class holds 1.2 s of data at 10mbit


def test_torchrun_two_sites_match_netbench_run_over_their_wan(hosts, topology_file: Path, tmp_path: Path) -> None:
    """A real 2-rank torchrun across the two sites: each host shapes its peer to the WAN's 100mbit, so a step takes
    what `netbench run --bw 100mbit` takes on two emulated nodes."""
    east, west, _ = hosts.nodes
    endpoint, procs = f"{east.address}:29401", []
    for rank, node in enumerate((east, west)):
        torchrun = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            "topo7",
            "--rdzv-conf",
            f"is_host={int(rank == 0)}",
            "--local-addr",
            node.address,
        ]
        worker = [
            "-m",
            "netbench",
            "worker",
            "--iface",
            "eth0",
            "--topology",
            str(topology_file),
            "-r",
            "full",
            "--workload",
            "shapes",
            "--shapes",
            SHAPES,
            "--compute-ms",
            str(COMPUTE_MS),
            "--steps",
            str(STEPS),
            "--warmup",
            str(WARMUP),
            "--out",
            str(tmp_path / "torchrun"),
            "--json",
        ]
        log = (tmp_path / f"torchrun{rank}.log").open("w")
        procs.append(node.popen([*torchrun, *worker], env=ENV, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    codes = [p.wait(timeout=180) for p in procs]
    assert codes == [0, 0], "\n".join((tmp_path / f"torchrun{i}.log").read_text()[-2000:] for i in range(2))
    assert root_of(east)[1] == 0 and root_of(west)[1] == 0  # removed on normal exit
    (run_dir,) = (tmp_path / "torchrun").glob("*-full-topo7")
    ours = json.loads((run_dir / "run.json").read_text())
    assert ours["status"] == "ok", ours["reason"]
    trees = [n["shaping"]["htb"] for n in ours["cluster"]["nodes"]]
    assert [t["node"] for t in trees] == ["n0", "n1"]
    assert [[(c["node"], c["ceil_bps"], c["addresses"]) for c in t["classes"]] for t in trees] == [
        [("n1", WAN_BPS, [west.address])],
        [("n0", WAN_BPS, [east.address])],
    ]
    assert ours["config"]["cluster"]["topology"]["kind"] == "file"
    assert "predicted" in ours["summary"], ours["summary"]

    config = RunConfig(
        cluster=ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=WAN_BPS), down=DirectionSpec(rate_bps=WAN_BPS)),
        replicator=ReplicatorConfig(name="full"),
        workload=WorkloadConfig(kind="shapes", shapes=SHAPES, compute_ms=COMPUTE_MS),
        steps=STEPS,
        warmup_steps=WARMUP,
        out_dir=tmp_path / "run",
        capture=False,
    )
    reference = run(config)
    assert reference.status == "ok", reference.reason
    theirs = json.loads((reference.run_dir / "run.json").read_text())
    measured, reference_s = ours["summary"]["step_time_s"], theirs["summary"]["step_time_s"]
    print(
        f"step time: worker --topology {measured:.4f} s, netbench run --bw 100mbit {reference_s:.4f} s, "
        f"ratio {measured / reference_s:.3f}; predicted {ours['summary']['predicted']}"
    )
    assert abs(measured / reference_s - 1) <= 0.15
    predicted = ours["summary"]["predicted"][
        "step_time_s"
    ]  # the model walks the topology in run.json: the WAN, not the LAN
    assert abs(measured / predicted - 1) <= 0.20, (measured, predicted)
