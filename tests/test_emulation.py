"""The emulated cluster: shaping, delay, asymmetry, concurrency, rootless, teardown (bad input: test_bad_input.py).

These build real namespaces and qdiscs, so they need root (CI runs as root). Accuracy bounds here
are loose on purpose (a shared 2-core machine); the tight figures live in scripts/bench_network.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from leftovers import running, wait_until
from pyroute2 import IPRoute

from netbench.emulation import naming, netns, shaping
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.probe import measure_goodput, measure_rtt, probe
from netbench.emulation.spec import ClusterSpec, DirectionSpec

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


@pytest.mark.parametrize("rate", [10e6, 100e6, 1e9])
def test_shaping_accuracy_per_rate(rate: float) -> None:
    result = probe(spec(rate), seconds=2)
    assert 0.85 <= result.goodput_ratio <= 1.0, result


def test_delay_line_adds_configured_delay() -> None:
    result = probe(spec(100e6, delay_s=0.010), seconds=2)
    assert result.delay_engine in ("delayline", "netem")
    assert result.expected_rtt_ms == pytest.approx(20.0)
    assert result.rtt_ms == pytest.approx(20.0, rel=0.10)


def test_asymmetric_links_shape_each_direction() -> None:
    with Cluster(spec(20e6, down=80e6)) as cluster:
        n0, n1 = cluster.nodes
        assert tbf_rate(n0.netns, n0.iface) == pytest.approx(20e6, rel=0.01)
        assert tbf_rate(cluster.switch.netns, n0.port) == pytest.approx(80e6, rel=0.01)
        goodput, _ = measure_goodput(n0, n1, seconds=2)
        assert 0.8 * 20e6 <= goodput <= 20e6  # limited by the sender's uplink, not the 80mbit downlink


def test_burst_scales_with_rate() -> None:
    slow, fast = shaping.TbfParams.for_rate(10e6, False), shaping.TbfParams.for_rate(10e9, False)
    assert fast.burst_bytes > 100 * slow.burst_bytes
    assert shaping.TbfParams.for_rate(10e9, True).burst_bytes >= shaping.GSO_MAX_BYTES


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
            1 / 0
    assert sleeper.poll() is not None
    assert ours(names.run_id) == []


_HOLDER = textwrap.dedent(
    """
    import sys, time
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
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True, cwd=REPO)
    run_id = proc.stdout.readline().strip()
    assert run_id, "cluster holder did not start"
    return proc, run_id


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_teardown_on_signal(sig: int) -> None:
    proc, run_id = _start_holder()
    assert len(ours(run_id)) == 4
    proc.send_signal(sig)
    proc.wait(timeout=20)
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


def test_rootless_cluster_as_unprivileged_user() -> None:
    """Drop to nobody, enter a user namespace, build and tear down a cluster there."""
    from netbench.emulation import rootless

    if not rootless.user_namespaces_allowed():
        pytest.skip("user namespaces disabled on this kernel")
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
            with Cluster(spec(nodes=3)) as cluster:
                built = len(ours(cluster.names.run_id))
            os.write(write_fd, f"{os.geteuid()} {built} {len(netns.list_netns())}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    report = os.read(read_fd, 100).decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == "0 4 0"  # root inside, 4 namespaces built, none left
