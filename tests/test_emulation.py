"""The emulated cluster: shaping, delay, asymmetry, concurrency, rootless, teardown (bad input: test_bad_input.py).

These build real namespaces and qdiscs, so they need root (CI runs as root). Accuracy bounds here
are loose on purpose (a shared 2-core machine); the tight figures live in scripts/bench_network.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from leftovers import running, wait_until
from pyroute2 import IPRoute

from netbench.emulation import naming, netns, shaping
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.probe import measure_goodput, measure_rtt, probe
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.frames import GSO_MAX_BYTES
from netbench.orchestrator.run.fidelity import qdisc_stats

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spec(rate: float = 100e6, nodes: int = 2, down: float | None = None, **up: float) -> ClusterSpec:
    return ClusterSpec(nodes=nodes, up=DirectionSpec(rate_bps=rate, **up), down=DirectionSpec(rate_bps=down or rate))


def ours(run_id: str) -> list[str]:
    return [n for n in netns.list_netns() if RunNames(run_id).owns(n)]


def netbench_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True, cwd=REPO, **kwargs)


def tbf_rate(netns_name: str, ifname: str) -> int:
    def read() -> int:
        with IPRoute() as ipr:
            index = ipr.link_lookup(ifname=ifname)[0]
            for qdisc in ipr.get_qdiscs(index=index):
                if qdisc.get_attr("TCA_KIND") == "tbf":
                    return qdisc.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")["rate"] * 8
        return 0

    return netns.call_in(netns_name, read)


def assert_no_reordering(node) -> None:
    """The node's TCP saw no reordered segment (SACK or timestamp evidence), counted since its namespace was made."""
    reorder = node.run(["nstat", "-az", "TcpExtTCPSACKReorder", "TcpExtTCPTSReorder"]).stdout
    assert [int(line.split()[1]) for line in reorder.splitlines()[1:]] == [0, 0], reorder


@pytest.mark.parametrize("rate", [10e6, 100e6, 1e9])
def test_shaping_accuracy_per_rate(rate: float) -> None:
    result = probe(spec(rate), seconds=2)
    assert 0.85 <= result.goodput_ratio <= 1.0, result


def test_a_read_delayed_across_an_interval_edge_does_not_inflate_goodput() -> None:
    """A descheduled receiver moves bytes from one interval into the next; the median interval ignores the pair."""
    from netbench.emulation.probe import steady_receiver_goodput

    rate = 1.25e6 * 0.956  # 10mbit of TCP payload, bytes/s
    shifted = 0.08 * 1.25e6  # 80 ms of data read late
    sizes = [rate * 0.5] * 2 + [rate * 0.5 + shifted, rate * 0.5 - shifted] + [rate * 0.5] * 2
    intervals = [{"sum": {"start": 0.5 * k, "seconds": 0.5, "bytes": b}} for k, b in enumerate(sizes)]
    goodput, window = steady_receiver_goodput({"server_output_json": {"intervals": intervals}})
    assert goodput == pytest.approx(8 * rate) and window == pytest.approx(2.0)


def test_probe_measures_steady_state_after_slow_start() -> None:
    """Whole intervals after a second of warm-up, from the receiver's own report: slow start over a
    40 ms round trip (0.75 of the rate in the first second) and iperf3's short closing interval stay out."""
    result = probe(spec(100e6, delay_s=0.020), seconds=2)
    if result.goodput_tool == "iperf3":
        assert result.goodput_window_s == pytest.approx(2.0, abs=0.05)
    assert result.goodput_ratio >= 0.85, result


def test_links_keep_a_flow_in_order() -> None:
    """RPS on every veth: a flow's packets share one CPU's backlog, so a fast link never reorders them
    (without it, 10gbit showed SACK reordering and spurious retransmissions on two cores)."""
    with Cluster(spec(10e9)) as cluster:
        n0, n1 = cluster.nodes
        for ns, ifname in (
            (n0.netns, n0.iface),
            (cluster.switch.netns, n0.port),
            (cluster.switch.netns, n1.port),
            (n1.netns, n1.iface),
        ):
            masks = subprocess.run(
                ["ip", "netns", "exec", ns, "sh", "-c", f"cat /sys/class/net/{ifname}/queues/rx-*/rps_cpus"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            assert masks and all(
                int(m.replace(",", ""), 16) == sum(1 << c for c in os.sched_getaffinity(0)) for m in masks
            ), (ns, ifname, masks)
        measure_goodput(n0, n1, seconds=2)
        assert_no_reordering(n0)


def test_delay_line_adds_configured_delay() -> None:
    result = probe(spec(100e6, delay_s=0.010), seconds=2)
    assert result.delay_engine in ("delayline", "netem")
    assert result.expected_rtt_ms == pytest.approx(20.0)
    assert result.rtt_ms == pytest.approx(20.0, rel=0.10)


@pytest.mark.parametrize("build", ["native", "python"])
def test_both_delay_lines_delay_jitter_and_drop_alike(monkeypatch, build: str) -> None:
    """The native delay line (delayline.c) and the Python one (the fallback) keep one contract: the
    configured delay, jitter without reordering a flow, loss counted, and run.json names which ran."""
    monkeypatch.setenv("NETBENCH_DELAY_LINE", build)
    with Cluster(spec(100e6, delay_s=0.010, jitter_s=0.002, loss=0.02)) as cluster:
        assert cluster.describe()["delay_line"] == build
        n0, n1 = cluster.nodes
        rtt = measure_rtt(n0, n1, count=60, interval_s=0.01)
        assert (
            rtt["rtt_ms"] == pytest.approx(20.0, rel=0.15) and rtt["rtt_max_ms"] - rtt["rtt_min_ms"] > 0.5
        )  # jittered
        measure_goodput(n0, n1, seconds=1)
        assert_no_reordering(n0)
        wait_until(
            lambda: (cluster.impairment.stats() or {}).get("dropped", 0) > 0, timeout_s=3
        )  # counters rewritten every second
        counted = cluster.impairment.stats()
        assert counted["passed"] > 200 and 0.005 < counted["dropped"] / (counted["passed"] + counted["dropped"]) < 0.05


def test_asymmetric_links_shape_each_direction() -> None:
    with Cluster(spec(20e6, down=80e6)) as cluster:
        n0, n1 = cluster.nodes
        assert tbf_rate(n0.netns, n0.iface) == pytest.approx(20e6, rel=0.01)
        assert tbf_rate(cluster.switch.netns, n0.port) == pytest.approx(80e6, rel=0.01)
        goodput, _, _ = measure_goodput(n0, n1, seconds=2)
        assert 0.8 * 20e6 <= goodput <= 20e6  # limited by the sender's uplink, not the 80mbit downlink


@pytest.mark.skipif(not shutil.which("iperf3"), reason="needs iperf3")
def test_a_slow_link_queues_both_directions_without_dropping() -> None:
    """At 10mbit both ends sending at once once overflowed the node's own 125 kB tbf queue (TCP resent what it
    dropped).
    """
    with Cluster(spec(10e6)) as cluster:
        n0, n1 = cluster.nodes
        server = n1.popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):  # iperf3 has no ready signal
            if n0.run(["iperf3", "-c", n1.address, "-p", "5201", "-t", "2", "--bidir"]).returncode == 0:
                break
            time.sleep(0.1)
        server.wait(timeout=10)
        assert [qdisc_stats([node.netns])["drops"] for node in cluster.nodes] == [0, 0]  # each node's own uplink tbf


def test_queue_holds_a_nic_transmit_queue_or_100_ms() -> None:
    slow, fast = shaping.TbfParams.for_rate(10e6, False), shaping.TbfParams.for_rate(10e9, False)
    assert slow.limit_bytes - slow.burst_bytes == shaping.TX_QUEUE_FRAMES * shaping.FRAME_BYTES  # 1.2 s at 10mbit
    assert fast.limit_bytes - fast.burst_bytes == int(10e9 / 8 * 0.1)


def test_burst_scales_with_rate() -> None:
    slow, fast = shaping.TbfParams.for_rate(10e6, False), shaping.TbfParams.for_rate(10e9, False)
    assert fast.burst_bytes > 100 * slow.burst_bytes
    assert shaping.TbfParams.for_rate(10e9, True).burst_bytes >= GSO_MAX_BYTES


def test_nodes_have_no_route_out_of_their_subnet() -> None:
    def routes() -> list[str]:
        with IPRoute() as ipr:
            return [r.get_attr("RTA_DST") or "default" for r in ipr.get_routes(table=254)]

    with Cluster(spec()) as cluster:
        for node in cluster.nodes:
            assert node.call(routes) == [str(cluster.names.subnet.network_address)]


def test_concurrent_clusters_do_not_collide() -> None:
    results: dict[int, object] = {}

    def run(i: int) -> None:
        results[i] = probe(spec(50e6 * (i + 1)), seconds=2)

    with Cluster(spec()) as a, Cluster(spec()) as b:
        assert a.names.run_id != b.names.run_id
        assert set(ours(a.names.run_id)).isdisjoint(ours(b.names.run_id))
        rtt = measure_rtt(a.nodes[0], a.nodes[1], count=5)
        assert rtt["lost"] == 0
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0].goodput_bps < 50e6 < results[1].goodput_bps  # each run got its own shaping


def test_eight_nodes_come_up_and_go_down(tmp_path) -> None:
    with Cluster(spec(1e9, nodes=8)) as cluster:
        run_id = cluster.names.run_id
        assert len(ours(run_id)) == 9
        rtt = measure_rtt(cluster.nodes[0], cluster.nodes[7], count=3)
        assert rtt["lost"] == 0
    assert ours(run_id) == []


def test_a_node_resolves_only_its_switch() -> None:
    """Peers are reached through the switch: one neighbour entry per node, not one per peer. Linux's neighbour table
    is shared by every namespace and refuses entries past gc_thresh3 (1024): 64 nodes resolving every peer need
    4032 and lose packets to it."""

    def neighbours() -> set[str]:
        with IPRoute() as ipr:
            return {n.get_attr("NDA_DST") for n in ipr.get_neighbours(family=socket.AF_INET)}

    with Cluster(spec(1e9, nodes=4)) as cluster:
        for peer in cluster.nodes[1:]:
            assert measure_rtt(cluster.nodes[0], peer, count=1)["lost"] == 0
        assert cluster.nodes[0].call(neighbours) == {cluster.names.switch_address}


def test_teardown_when_build_fails(monkeypatch) -> None:
    calls = {"n": 0}
    real = shaping.apply

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("injected")
        return real(*args, **kwargs)

    monkeypatch.setattr(shaping, "apply", failing)
    names = RunNames.new()
    with pytest.raises(RuntimeError, match="injected"):
        with Cluster(spec(), names=names):
            pass
    assert ours(names.run_id) == []


def test_teardown_on_exception_inside_and_processes_are_killed() -> None:
    names = RunNames.new()
    with pytest.raises(ZeroDivisionError):
        with Cluster(spec(delay_s=0.001), names=names) as cluster:
            sleeper = cluster.nodes[0].popen(["sleep", "60"])
            raise ZeroDivisionError("the body fails")
    assert sleeper.poll() is not None
    assert ours(names.run_id) == []


_HOLDER = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    faulthandler.register(signal.SIGUSR1)  # a holder that does not end when told says where it is
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec
    spec = ClusterSpec(nodes=3, up=DirectionSpec(rate_bps=1e8, delay_s=0.005), down=DirectionSpec(rate_bps=1e8))
    with Cluster(spec) as c:
        c.nodes[1].popen(["sleep", "300"])
        print(c.names.run_id, flush=True)  # ready only once everything is started
        time.sleep(300)
    """
)


def _start_holder() -> tuple[subprocess.Popen, str]:
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    proc.holder_stderr = err  # read back by _why_still_running
    run_id = proc.stdout.readline().strip()
    assert run_id, "cluster holder did not start"
    return proc, run_id


def _why_still_running(proc: subprocess.Popen, run_id: str) -> str:
    """What a holder that did not end is doing: its signal masks, kernel wait channel and Python stack; then it is
    killed and its cluster cleaned."""
    facts = []
    for name in ("status", "wchan", "stack"):
        try:
            text = open(f"/proc/{proc.pid}/{name}").read()
        except OSError:
            continue
        facts.append(
            "\n".join(
                line for line in text.splitlines() if name != "status" or line.startswith(("State", "Sig", "Shd"))
            )
        )
    proc.send_signal(signal.SIGUSR1)
    time.sleep(1.0)
    proc.kill()
    proc.wait()
    netbench_cli("clean", run_id)
    proc.holder_stderr.seek(0)
    return "\n".join(facts) + "\n" + proc.holder_stderr.read().decode(errors="replace")[-4000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_teardown_on_signal(sig: int) -> None:
    proc, run_id = _start_holder()
    assert len(ours(run_id)) == 4
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)  # teardown takes under a second here, about 1 s with the host fully loaded
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the holder of {run_id} did not end within 20 s of "
            f"{signal.Signals(sig).name}:\n{_why_still_running(proc, run_id)}"
        )
    assert ours(run_id) == []


def test_sigkill_then_clean_removes_everything() -> None:
    proc, run_id = _start_holder()
    started = netns.pids_in(ours(run_id))
    assert started, "the delay line and the sleeper run in the cluster"
    proc.kill()
    proc.wait()
    assert len(ours(run_id)) == 4  # killed: nothing could remove the namespaces
    # ...but what it started dies with it (parent-death signal), rather than run on unowned.
    assert wait_until(lambda: not any(running(pid) for pid in started), 10)
    out = netbench_cli("clean", run_id)
    assert out.returncode == 0, out.stderr
    assert ours(run_id) == [] and not (naming.REGISTRY_DIR / f"{run_id}.json").exists()


def test_clean_leaves_live_runs_alone() -> None:
    with Cluster(spec()) as cluster:
        out = netbench_cli("clean")
        assert out.returncode == 0
        assert len(ours(cluster.names.run_id)) == 3


def _as_nobody(work) -> tuple[str, int]:
    """In a forked child: become nobody, enter netbench's user namespace, and report ``work()``'s string.

    Returns what the child reported (``work()``'s result, or its error) and its wait status.
    """
    from netbench import rootless

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            rootless.ensure_privileges()
            os.write(write_fd, work().encode()[:1000])
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write_fd, f"{type(exc).__name__}: {exc}".encode()[:1000])
        finally:
            os._exit(code)
    os.close(write_fd)
    report = os.read(read_fd, 1000).decode()
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    return report, status


def test_rootless_cluster_as_unprivileged_user() -> None:
    """Drop to nobody, enter a user namespace, build and tear down a cluster there."""
    from netbench import rootless

    if not rootless.user_namespaces_allowed():
        pytest.skip("user namespaces disabled on this kernel")

    def build() -> str:
        with Cluster(spec(nodes=3)) as cluster:
            built = len(ours(cluster.names.run_id))
        return f"{os.geteuid()} {built} {len(netns.list_netns())}"

    report, status = _as_nobody(build)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert report == "0 4 0"  # root inside, 4 namespaces built, none left


def _send_udp(address: str, count: int) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(count):
            sock.sendto(b"x" * 100, (address, 9))


def test_capture_in_a_rootless_cluster() -> None:
    """As nobody, in netbench's own user namespace, tcpdump captures every switch port (its setgroups() is a no-op
    there).
    """
    import shutil

    from netbench import rootless

    if not rootless.user_namespaces_allowed():
        pytest.skip("user namespaces disabled on this kernel")
    top = tempfile.mkdtemp(
        prefix="netbench-rootless-capture-", dir="/tmp"
    )  # pytest's tmp_path is root's alone (0700 parents)
    try:
        os.chmod(top, 0o755)
        out = Path(top) / "pcaps"
        out.mkdir()
        os.chown(out, 65534, 65534)
        report, status = _as_nobody(lambda: _capture_udp(out))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert os.waitstatus_to_exitcode(status) == 0, report
    reason, sent, received = report.split()
    # 50 datagrams of 142 B on the wire from node 0's port and 50 to node 1's, each with a 16 B pcap record header
    assert reason == "None" and int(sent) >= 24 + 50 * (16 + 96) and int(received) >= 24 + 50 * (16 + 96), report


def _capture_udp(out: Path) -> str:
    """Build a cluster, capture UDP between its nodes: ``unavailable_reason() size0 size1``."""
    from netbench.capture.tcpdump import Capture, unavailable_reason

    with Cluster(spec(nodes=2)) as cluster:
        capture = Capture(cluster.switch, [n.port for n in cluster.nodes], out)
        capture.start()
        cluster.nodes[0].call(_send_udp, cluster.nodes[1].address, 50)
        paths, _ = capture.stop()
    sizes = [paths[n.port].stat().st_size for n in cluster.nodes]
    return f"{unavailable_reason()} {sizes[0]} {sizes[1]}"


def test_run_fails_promptly_naming_the_delay_line_when_it_dies(tmp_path) -> None:
    """A dead delay line drops every packet of its links; the run must say so at once, not time out on a node."""
    from netbench.declarations.config import ReplicatorConfig
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.run.runner import run
    from netbench.workloads.config import WorkloadConfig

    cluster_spec = ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.002), down=DirectionSpec(rate_bps=100e6), engine="delayline"
    )
    config = RunConfig(
        cluster=cluster_spec,
        replicator=ReplicatorConfig(name="full"),
        workload=WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2),
        steps=100000,
        warmup_steps=1,
        out_dir=tmp_path,
        timeout_s=120,
    )
    killed: dict[str, float] = {}

    def kill_delay_line_after_a_step(cluster: Cluster) -> None:
        def later() -> None:
            wait_until(
                lambda: any('"event": "step"' in p.read_text() for p in tmp_path.glob("*/workers/rank0.jsonl")), 120
            )
            killed["at"] = time.monotonic()
            cluster._delay_line.send_signal(signal.SIGKILL)

        threading.Thread(target=later, daemon=True).start()

    result = run(config, on_cluster=kill_delay_line_after_a_step)
    took = time.monotonic() - killed["at"]
    assert result.status == "failed"
    assert "the delay line" in result.reason and "signal 9" in result.reason, result.reason
    assert took < 30, took  # the collective timeout is 120 s: the watch noticed, not gloo
    assert not ours(result.run_json["run_id"])


def test_no_queue_bypass_so_a_dead_delay_line_cannot_silently_remove_the_delay() -> None:
    from netbench.emulation.delayline import iptables_rules

    rules = iptables_rules(["p0"], ["p1"])
    assert "--queue-bypass" not in rules and "physdev" not in rules
    assert "-A FORWARD -i p0 -j NFQUEUE" in rules and "-A FORWARD -o p1 -j NFQUEUE" in rules


def _root_qdisc_of(iface: str) -> tuple[str, int] | None:
    with IPRoute() as ipr:
        return shaping.root_qdisc(ipr, ipr.link_lookup(ifname=iface)[0])


def _unshape(iface: str) -> None:
    with IPRoute() as ipr:
        shaping.clear(ipr, ipr.link_lookup(ifname=iface)[0])


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_shaping_worker(node, out) -> subprocess.Popen:
    """`netbench worker --bw` alone (world size 1) in ``node``, running steps until killed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": node.address,
        "MASTER_PORT": str(port),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": REPO,
    }
    argv = [
        sys.executable,
        "-m",
        "netbench",
        "worker",
        "--iface",
        node.iface,
        "--bw",
        "100mbit",
        "-r",
        "full",
        "--workload",
        "mlp",
        "--steps",
        "100000",
        "--warmup",
        "1",
        "--out",
        str(out),
        "--run-id",
        "guard",
    ]
    return node.popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("foreign", [False, True], ids=["ours", "replaced-by-someone-else"])
def test_sigkilled_shaping_worker_leaves_the_interface_as_it_found_it(tmp_path, foreign: bool) -> None:
    """Once the worker is SIGKILLed, its shaping guard removes the worker's qdisc and exits; a qdisc that
    someone else put in its place meanwhile stays."""
    with Cluster(
        ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=10e9), down=DirectionSpec(rate_bps=10e9), offload="off")
    ) as cluster:
        node = cluster.nodes[0]
        node.call(_unshape, node.iface)
        assert node.call(_root_qdisc_of, node.iface)[1] == 0
        worker = _start_shaping_worker(node, tmp_path)
        try:
            assert wait_until(
                lambda: node.call(_root_qdisc_of, node.iface)[0] == "tbf" or worker.poll() is not None, 120
            )
            assert worker.poll() is None, "the worker exited before it was killed"
            if foreign:
                node.run(
                    [
                        "tc",
                        "qdisc",
                        "replace",
                        "dev",
                        node.iface,
                        "root",
                        "handle",
                        "2:",
                        "tbf",
                        "rate",
                        "1gbit",
                        "burst",
                        "256k",
                        "latency",
                        "50ms",
                    ],
                    check=True,
                )
            guards = [
                pid for pid in netns.pids_in([node.netns]) if "netbench.emulation.shapeguard" in _command_line(pid)
            ]
            assert len(guards) == 1, guards
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
            # The guard's last act is the removal: wait for it to exit (not a fixed time, which a loaded host overran).
            assert wait_until(lambda: not running(guards[0]), 60), "the guard outlived its worker"
            if foreign:  # it had its chance, and left it alone
                assert node.call(_root_qdisc_of, node.iface) == ("tbf", 0x20000)
            else:
                assert node.call(_root_qdisc_of, node.iface)[1] == 0, node.call(_root_qdisc_of, node.iface)
        finally:
            if worker.poll() is None:
                worker.kill()


def test_delay_line_switch_routes_without_bridge_netfilter() -> None:
    """No bridge, no physdev match, no bridge sysctl: nothing that would load br_netfilter on a modular kernel."""
    from netbench.emulation.delayline import iptables_restore_binary

    with Cluster(spec(100e6, delay_s=0.002)) as cluster:
        if cluster.engine != "delayline":
            pytest.skip("this kernel has netem: the delay line is not used")
        save = iptables_restore_binary().replace("-restore", "-save")
        rules = cluster.switch.run([save, "-t", "filter"]).stdout
        assert "NFQUEUE" in rules and "physdev" not in rules, rules
        links = cluster.switch.run(["ip", "-d", "link", "show"]).stdout
        assert " bridge " not in links and "bridge_slave" not in links, links
        n0, n1 = cluster.nodes
        assert n0.run(["ip", "route", "show"]).stdout.count("\n") == 1  # only the /24: still no default route
        # The fastest of 20 round trips: the ping and echo are Python processes, and on a loaded host their own
        # wake-ups add milliseconds to a median of 5 (beyond a 1 ms tolerance); a delay line is late, never early.
        rtt = measure_rtt(n0, n1, count=20)
        assert rtt["lost"] == 0 and 4.0 * 0.95 <= rtt["rtt_min_ms"] <= 4.0 * 1.25, rtt
