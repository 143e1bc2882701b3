"""`netbench worker` under torchrun: one torchrun per emulated node, as if each namespace were a separate host.

The cluster's own node-side shaper is removed, so the only thing limiting a node's egress is the
shaping the worker applies itself through ``--iface eth0 --bw``; the run directory rank 0 writes
is then held against an orchestrated `netbench run` with the same settings. Needs root.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from netbench.capture import pcap
from netbench.cli.app import main
from netbench.declarations.config import ReplicatorConfig
from netbench.emulation import shaping
from netbench.emulation.capabilities import detect
from netbench.emulation.cluster import Cluster
from netbench.emulation.hostshaping import root_qdisc
from netbench.emulation.node import Node
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.results import CAPTURE_COLUMNS
from netbench.orchestrator.run.runner import run
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]
RATE = "100mbit"
SHAPES = "llama:d_model=96,layers=2,ffn=256,vocab=512"  # 0.32 M parameters: ~0.11 s of all-reduce at 100mbit
COMPUTE_MS = 20.0
STEPS, WARMUP = 6, 2
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), "OMP_NUM_THREADS": "1"}
WORKER_ARGS = [
    "--iface",
    "eth0",
    "--bw",
    RATE,
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
]


def _root(iface: str) -> tuple[str, int] | None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return root_qdisc(ipr, ipr.link_lookup(ifname=iface)[0])


def _unshape(iface: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        shaping.clear(ipr, ipr.link_lookup(ifname=iface)[0])


def root_of(node: Node) -> tuple[str, int] | None:
    """(kind, handle) of the root qdisc on the node's eth0; handle 0 is the kernel's default."""
    return node.call(_root, node.iface)


@pytest.fixture(scope="module")
def hosts():
    """Two 'hosts' joined by a switch whose ports run at 10gbit, their own egress left unshaped (the worker shapes
    it).
    """
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=10e9), down=DirectionSpec(rate_bps=10e9), offload="off")
    with Cluster(spec) as cluster:
        for node in cluster.nodes:
            node.call(_unshape, node.iface)
        yield cluster


def _shape(iface: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        shaping.apply(
            ipr,
            ipr.link_lookup(ifname=iface)[0],
            DirectionSpec(rate_bps=1e9),
            offload=False,
            use_netem=False,
            acks_first=False,
        )


def _drop_net_admin() -> None:
    """Clear CAP_NET_ADMIN from this process's effective set (capset(2)); root's file access stays."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].effective &= ~(1 << 12)  # CAP_NET_ADMIN
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _cli(argv: list[str], env: dict[str, str], without_net_admin: bool) -> tuple[int, str]:
    """`netbench ARGV` inside this forked, namespaced process (torch is loaded already): exit code and stderr."""
    os.environ.update(env)
    if without_net_admin:
        _drop_net_admin()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


def test_refuses_a_configured_root_qdisc_and_needs_net_admin(hosts) -> None:
    """Nothing starts (exit 2, one line) when shaping cannot be undone exactly or is not allowed; the host is
    untouched.
    """
    node, other = hosts.nodes
    out = tempfile.mkdtemp(prefix="netbench-torchrun-")
    argv = ["worker", *WORKER_ARGS, "--out", out]
    cases = [
        (other, argv, False, "already has a configured root qdisc"),
        (node, argv, True, "needs root or CAP_NET_ADMIN"),
    ]
    if not detect().netem:
        cases.append((node, [*argv, "--delay", "10ms"], False, "netem"))
    other.call(_shape, other.iface)  # someone else's shaper (or one a SIGKILLed worker left)
    try:
        for where, args, without_net_admin, expected in cases:
            env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": where.address, "MASTER_PORT": "29411"}
            code, err = where.call(_cli, args, env, without_net_admin)
            assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (args, without_net_admin, err)
        assert root_of(other)[0] == "tbf"  # left exactly as it was
    finally:
        other.call(_unshape, other.iface)
        shutil.rmtree(out, ignore_errors=True)
    assert root_of(node)[1] == 0 and root_of(other)[1] == 0


def test_torchrun_per_host_matches_netbench_run(hosts, tmp_path: Path, capsys) -> None:
    assert all(root_of(n)[1] == 0 for n in hosts.nodes)
    endpoint = f"{hosts.nodes[0].address}:29400"
    procs = []
    for node in hosts.nodes:
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
            "tr7",
            "--rdzv-conf",
            f"is_host={int(node.index == 0)}",
            "--local-addr",
            node.address,
        ]
        log = (tmp_path / f"torchrun{node.index}.log").open("w")
        procs.append(
            node.popen(
                [*torchrun, "-m", "netbench", "worker", *WORKER_ARGS, "--out", str(tmp_path / "torchrun"), "--json"],
                env=ENV,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    codes = [p.wait(timeout=120) for p in procs]
    logs = "\n".join((tmp_path / f"torchrun{i}.log").read_text()[-2000:] for i in range(2))
    assert codes == [0, 0], logs
    assert all(root_of(n)[1] == 0 for n in hosts.nodes)  # shaping removed on normal exit
    (worker_dir,) = (tmp_path / "torchrun").glob("*-full-tr7")
    assert not list((tmp_path / "torchrun").glob("*.partial"))  # local copies dropped once rank 0 had them

    config = RunConfig(
        cluster=ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6)),
        replicator=ReplicatorConfig(name="full"),
        workload=WorkloadConfig(kind="shapes", shapes=SHAPES, compute_ms=COMPUTE_MS),
        steps=STEPS,
        warmup_steps=WARMUP,
        out_dir=tmp_path / "run",
        capture=False,
    )
    reference = run(config)  # capture off saves ~20 s of pcap parsing; the columns are the same (checked below)
    assert reference.status == "ok", reference.reason

    ours, theirs = (json.loads((d / "run.json").read_text()) for d in (worker_dir, reference.run_dir))
    assert ours["status"] == "ok", ours["reason"]
    assert set(ours) == set(theirs) and set(ours["config"]) == set(theirs["config"])
    assert ours["capture"]["enabled"] is False and "interface counters" in ours["capture"]["reason"]
    assert [n["shaping"]["tbf"]["rate_bps"] for n in ours["cluster"]["nodes"]] == [100e6, 100e6]
    assert ["acks_first" in n["shaping"] for n in ours["cluster"]["nodes"]] == [detect().acks_first] * 2
    assert ours["summary"]["bw_bps"] == theirs["summary"]["bw_bps"] == 100e6
    assert "predicted" in ours["summary"] and "predicted" in theirs["summary"]
    worker_steps, run_steps = pd.read_csv(worker_dir / "steps.csv"), pd.read_csv(reference.run_dir / "steps.csv")
    assert list(worker_steps.columns) == list(run_steps.columns)
    assert len(worker_steps) == len(run_steps) == 2 * (STEPS + WARMUP)
    capture = [c for c in worker_steps.columns if c.startswith("capture_")]
    assert capture and worker_steps[capture].isna().all().all()
    assert sorted(p.name for p in (worker_dir / "workers").glob("*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
    measured, reference_s = ours["summary"]["step_time_s"], theirs["summary"]["step_time_s"]
    print(
        f"step time: torchrun worker {measured:.4f} s, netbench run {reference_s:.4f} s, ratio "
        f"{measured / reference_s:.3f}"
    )
    assert abs(measured / reference_s - 1) <= 0.10
    assert abs(ours["summary"]["wire_tx_bytes_per_step"] / theirs["summary"]["wire_tx_bytes_per_step"] - 1) <= 0.02
    main(["report", str(worker_dir)])  # `netbench report RUN_DIR` reads it as it reads a `netbench run` directory
    shown = capsys.readouterr().out
    assert "step time" in shown and "netbench worker" in shown


def test_capture_columns_are_what_a_capture_adds() -> None:
    """A run with a capture has the columns a worker run leaves empty, in the same order."""
    packet = {
        "t": 1.5,
        "direction": "tx",
        "peer": "198.18.0.2",
        "proto": "tcp",
        "wire_bytes": 1514,
        "payload_bytes": 1448,
        "frames": 1,
        "ack_only": False,
    }
    packets = pd.DataFrame([{column: packet.get(column, 0) for column in pcap.COLUMNS}])
    windows = pd.DataFrame({"step": [0], "t_from": [1.0], "t_to": [2.0]})
    assert list(pcap.per_step(packets, windows).columns) == ["step", *CAPTURE_COLUMNS]


def _wait_for(predicate, what: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None and time.monotonic() < deadline, f"{what}: worker exited with {proc.poll()}"
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_shaping_removed_after_error_and_sigterm(hosts, tmp_path: Path) -> None:
    """Node 0 waits for a peer that never comes (error); node 1 runs alone until SIGTERM; both restore eth0."""
    started = []
    for node, world, steps in ((hosts.nodes[0], "2", "2"), (hosts.nodes[1], "1", "100000")):
        env = {**ENV, "RANK": "0", "WORLD_SIZE": world, "MASTER_ADDR": node.address, "MASTER_PORT": str(_free_port())}
        argv = [
            sys.executable,
            "-m",
            "netbench",
            "worker",
            *WORKER_ARGS,
            "--steps",
            steps,
            "--timeout",
            "3",
            "--out",
            str(tmp_path / f"n{node.index}"),
            "--run-id",
            f"fault{node.index}",
        ]
        log = (tmp_path / f"n{node.index}.log").open("w")
        started.append(node.popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    lonely, alone = started
    _wait_for(lambda: root_of(hosts.nodes[0])[0] == "tbf", "node 0 shaping", lonely)  # shaped while it waits
    partial = tmp_path / "n1" / "fault1.partial" / "rank0.jsonl"
    _wait_for(lambda: partial.exists() and '"event": "step"' in partial.read_text(), "node 1 stepping", alone)
    assert root_of(hosts.nodes[1])[0] == "tbf"
    alone.send_signal(signal.SIGTERM)
    assert alone.wait(timeout=30) == 1
    assert lonely.wait(timeout=60) == 1
    for node in hosts.nodes:
        assert root_of(node)[1] == 0, f"node {node.index}: {(tmp_path / f'n{node.index}.log').read_text()[-2000:]}"
        (run_dir,) = (tmp_path / f"n{node.index}").glob(f"*-full-fault{node.index}")
        run_json = json.loads((run_dir / "run.json").read_text())
        assert run_json["status"] == "failed"
    terminated = json.loads(next((tmp_path / "n1").glob("*-fault1/run.json")).read_text())
    assert "signal 15" in terminated["reason"]
