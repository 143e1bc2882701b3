"""Faults injected into real runs: a dead worker, a flapping link, loss and long delay, a killed
orchestrator, Ctrl-C at every phase. Each test checks the outcome the user sees (status, reason,
what was kept) and that the run -- only that run: others may share the host -- left nothing.

Bounds are generous (a shared 2-core machine); the behaviour asserted is what matters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import leftovers
import pandas as pd
import pytest
from leftovers import wait_until

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation import netns
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.phases import Outcome, hold_cluster
from netbench.orchestrator.run.runner import run
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]
TINY = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2)  # ~7k parameters: steps take milliseconds


def config(tmp_path: Path, steps: int = 6, delay: float = 0.0, loss: float = 0.0, **extra) -> RunConfig:
    cluster = ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=delay, loss=loss), down=DirectionSpec(rate_bps=100e6)
    )
    return RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="full"),
        workload=extra.pop("workload", TINY),
        steps=steps,
        warmup_steps=1,
        out_dir=tmp_path,
        **extra,
    )


def steps_recorded(out: Path, rank: int = 0) -> int:
    files = list(out.glob(f"*/workers/rank{rank}.jsonl"))
    return files[0].read_text().count('"event": "step"') if files else 0


def after_steps(
    out: Path, count: int, action: Callable[[Cluster], None], log: dict, ranks: tuple[int, ...] = (0,)
) -> Callable[[Cluster], None]:
    """An ``on_cluster`` hook: once each of ``ranks`` has recorded ``count`` steps, run ``action`` (from a thread).

    ``log`` gets the time the action began (``at``: monotonic, ``wall_at``: wall clock, as step records have it).
    """

    def hook(cluster: Cluster) -> None:
        log["inodes"] = leftovers.inodes(cluster.names.run_id)

        def later() -> None:
            if wait_until(lambda: min(steps_recorded(out, rank) for rank in ranks) >= count, 120):
                log["at"], log["wall_at"] = time.monotonic(), time.time()
                action(cluster)

        threading.Thread(target=later, daemon=True).start()

    return hook


# --------------------------------------------------------------------------- dead peer, bad link


def test_killed_worker_fails_the_run_cleanly(tmp_path: Path) -> None:
    """Default timeout: the dead node is named, its steps are kept, the cluster is gone, well under a minute.

    Node 1 is killed once *it* has recorded 3 steps (rank 0 records a step before rank 1 may have
    written the same one), and every step it had recorded by then must be in steps.csv.
    """
    log: dict = {}

    def kill_node_1(cluster: Cluster) -> None:
        from netbench.emulation import netns

        pid = next(  # the worker, forked by the run's fork server into node 1's namespace
            p for p in netns.pids_in([cluster.nodes[1].netns]) if "forkserver" in leftovers.command_line(p)
        )
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not leftovers.running(pid), 30)  # dead (a zombie at most): it writes nothing more
        log["recorded"] = steps_recorded(tmp_path, rank=1)

    result = run(config(tmp_path, steps=2000), on_cluster=after_steps(tmp_path, 3, kill_node_1, log, ranks=(1,)))
    assert time.monotonic() - log["at"] < 45
    assert result.status == "failed" and "rank 1 was killed by SIGKILL" in result.reason, result.reason
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert run_json["status"] == "failed" and run_json["reason"] == result.reason
    steps = pd.read_csv(result.run_dir / "steps.csv")
    assert (steps["rank"] == 1).sum() == log["recorded"] >= 3  # what was measured before the kill is kept
    assert leftovers.clean(result.summary["run_id"], log["inodes"]), leftovers.traces(
        result.summary["run_id"], log["inodes"]
    )


def _flap(down_s: float) -> Callable[[Cluster], None]:
    def action(cluster: Cluster) -> None:
        cluster.set_link(1, False)
        if down_s:
            time.sleep(down_s)
            cluster.set_link(1, True)

    return action


def test_link_down_then_up_is_reported_as_a_stall(tmp_path: Path) -> None:
    """A 4 s outage after step 4 shows as one step of at least 3.5 s.

    Steps of this workload take 5-30 ms, so the run must outlast the hook's reaction (a 50 ms poll,
    then a fork of this large process into the switch namespace): 30 steps ended first on a loaded
    host, and the outage hit nothing. 400 steps leave seconds of margin, and the outage must be seen
    to start before the last step ended.
    """
    log: dict = {}
    result = run(config(tmp_path, steps=400, timeout_s=30), on_cluster=after_steps(tmp_path, 4, _flap(4.0), log))
    assert result.status == "ok", result.reason
    steps = pd.read_csv(result.run_dir / "steps.csv")
    assert log["wall_at"] < steps["t_end"].max() - 1.0, "the run ended before the link went down: nothing to detect"
    stalls = result.summary["stalls"]
    assert stalls and max(s["seconds"] for s in stalls) >= 3.5, stalls  # the step that waited out the outage
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert run_json["summary"]["stalls"] == stalls
    assert result.summary["steps_measured"] == 400
    assert leftovers.clean(result.summary["run_id"], log["inodes"]), leftovers.traces(
        result.summary["run_id"], log["inodes"]
    )


def test_link_down_for_good_fails_within_the_timeout(tmp_path: Path) -> None:
    log: dict = {}
    timeout = 8.0
    result = run(config(tmp_path, steps=2000, timeout_s=timeout), on_cluster=after_steps(tmp_path, 4, _flap(0), log))
    ended = time.monotonic() - log["at"]
    assert result.status == "failed" and "rank" in result.reason, result.reason
    assert "timed out" in result.reason.lower() or "no progress" in result.reason, result.reason
    assert timeout * 0.8 <= ended <= 2 * timeout + 30  # the collective timeout, then the watcher's backstop at most
    assert (pd.read_csv(result.run_dir / "steps.csv")["rank"] == 0).sum() >= 4
    assert leftovers.clean(result.summary["run_id"], log["inodes"]), leftovers.traces(
        result.summary["run_id"], log["inodes"]
    )


@pytest.mark.parametrize("delay, loss", [(0.0, 0.05), (0.5, 0.0)], ids=["loss-5pct", "delay-500ms"])
def test_loss_and_long_delay_complete_with_slowdown_and_retransmissions(
    tmp_path: Path, delay: float, loss: float
) -> None:
    result = run(config(tmp_path, steps=4 if loss else 2, delay=delay, loss=loss))
    assert result.status == "ok", result.reason
    summary = result.summary
    assert summary["delay_engine"] in ("delayline", "netem")
    assert summary["slowdown_vs_model"] > 0 and summary["retrans_segs_per_step"] >= 0
    steps = pd.read_csv(result.run_dir / "steps.csv")
    assert {"retrans_segs", "capture_tx_retrans_bytes"} <= set(steps.columns)
    if loss:  # ~40 frames a step (28 kB each way): 5 steps without a single loss would take odds of 1e-4
        assert summary["retrans_bytes_per_step"] > 0 and summary["retrans_segs_per_step"] > 0
        assert 0 < summary["retrans_fraction"] < 0.5
    else:  # a two-node ring all-reduce is two one-way trips of 500 ms at least; TCP's slow start
        assert summary["step_time_s"] >= 1.0  # after each idle gap adds round trips the model leaves out
        assert summary["slowdown_vs_model"] > 0.8


# --------------------------------------------------------------------------- the orchestrator itself


@contextmanager
def _cli_run(out: Path, *args: str, **popen) -> Iterator[subprocess.Popen]:
    """`netbench run` with a delay, so the delay line and its iptables rules are part of what must go.

    A test that fails half-way must not leave its run going: it is stopped (SIGTERM, then SIGKILL).
    """
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "netbench",
            "run",
            "-r",
            "full",
            "--workload",
            "mlp",
            "--bw",
            "100mbit",
            "--delay",
            "1ms",
            "--out",
            str(out),
            *args,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _wait_for_run_id(proc: subprocess.Popen, timeout_s: float = 60) -> str:
    """The run id, as soon as the run registers its cluster (the first thing building it does)."""
    found: list[str] = []

    def registered() -> bool:
        found[:] = [r for r in (leftovers.run_id_of_pid(proc.pid),) if r]
        return bool(found)

    assert wait_until(registered, timeout_s, interval_s=0.01), "the run never registered its cluster"
    return found[0]


def test_orchestrator_sigkill_then_clean_and_a_new_run(tmp_path: Path) -> None:
    with _cli_run(tmp_path, "--steps", "2000") as proc:
        run_id = _wait_for_run_id(proc)
        assert wait_until(lambda: steps_recorded(tmp_path) >= 1, 120)
        inodes = leftovers.inodes(run_id)
        assert leftovers.processes(run_id, inodes), "workers, tcpdump and the delay line should be running"
        proc.kill()
        proc.communicate()

    # Workers and the delay line die with it (parent-death signal); tcpdump, which drops root and
    # with it that setting, and the namespaces wait for `netbench clean`.
    def python_children() -> list[int]:
        return [p for p in leftovers.processes(run_id, inodes) if "netbench." in leftovers.command_line(p)]

    assert wait_until(lambda: not python_children(), 15), [leftovers.command_line(p) for p in python_children()]
    assert len(leftovers.namespaces(run_id)) == 3
    fresh = run(config(tmp_path / "next", steps=2))
    assert fresh.status == "ok", fresh.reason
    assert any(run_id in w for w in fresh.run_json["warnings"]), fresh.run_json["warnings"]
    out = subprocess.run(
        [sys.executable, "-m", "netbench", "clean", run_id], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert leftovers.clean(run_id, inodes), leftovers.traces(run_id, inodes)
    assert leftovers.clean(fresh.summary["run_id"])


def _interrupt_when(phase: str, proc: subprocess.Popen, out: Path) -> tuple[str, set[int]]:
    """Press Ctrl-C (SIGINT to the process group, as a terminal does) in ``phase`` of a run; wait for it to end."""
    run_id = _wait_for_run_id(proc)
    inodes: set[int] = set()

    def seen(condition: Callable[[], bool]) -> Callable[[], bool]:
        return lambda: inodes.update(leftovers.inodes(run_id)) or condition()

    if phase == "setup":  # the registry file is the first thing a cluster writes
        os.killpg(proc.pid, signal.SIGINT)
    elif phase == "training":
        assert wait_until(seen(lambda: steps_recorded(out) >= 1), 120)
        os.killpg(proc.pid, signal.SIGINT)
    else:  # from the moment every worker has recorded its done event, until the process is gone

        def done() -> bool:
            files = list(out.glob("*/workers/rank*.jsonl"))
            return len(files) == 2 and all('"event": "done"' in f.read_text() for f in files)

        assert wait_until(seen(done), 120, interval_s=0.01)
        while proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.005)
    proc.communicate(timeout=60)
    return run_id, inodes


@pytest.mark.parametrize("phase", ["setup", "training", "teardown"])
def test_ctrl_c_leaves_nothing_behind(tmp_path: Path, phase: str) -> None:
    with _cli_run(tmp_path, "--steps", "2000" if phase != "teardown" else "3", start_new_session=True) as proc:
        run_id, inodes = _interrupt_when(phase, proc, tmp_path)
    assert leftovers.clean(run_id, inodes), leftovers.traces(run_id, inodes)
    if phase != "teardown":  # interrupted runs still say what happened (a storm of Ctrl-C may cut even that short)
        assert proc.returncode == 130
        run_json = json.loads(next(tmp_path.glob("*/run.json")).read_text())
        assert run_json["status"] == "failed" and run_json["reason"] == "interrupted (Ctrl-C)"


def test_ctrl_c_as_the_first_namespace_is_made_stops_the_run_as_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ctrl-C lands the moment the orchestrator has reaped the helper that made the switch's namespace.

    A terminal's Ctrl-C reaches the process group at once; in setup the orchestrator is mostly
    waiting for such a helper, and a signal its other threads took is handled just after the wait
    returned. The run must end as interrupted (exit 130 from the CLI), not as a failure to wait.
    """
    names = RunNames.new()
    release_r, release_w = os.pipe()
    create = netns.pr_netns._create

    def create_then_hold(name: str, *args, **kwargs) -> None:  # runs in the forked helper
        create(name, *args, **kwargs)
        if name == names.switch_netns:
            os.read(release_r, 1)  # exits only once the orchestrator's Ctrl-C is due

    def press_ctrl_c() -> None:
        wait_until(lambda: netns.inode_of(names.switch_netns) is not None, 60)
        time.sleep(0.3)  # the orchestrator is waiting for the helper by now
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # handled by the main thread once its wait returns
        time.sleep(0.05)
        os.write(release_w, b"x")

    monkeypatch.setattr(netns.pr_netns, "_create", create_then_hold)
    ctrl_c = threading.Thread(target=press_ctrl_c)
    ctrl_c.start()
    outcome = Outcome()
    try:
        cluster = ClusterSpec(
            nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.001), down=DirectionSpec(rate_bps=100e6)
        )
        hold_cluster(
            cluster, names, outcome, "every step was measured", lambda built: pytest.fail("the cluster was built")
        )
    finally:
        ctrl_c.join()
        os.close(release_r)
        os.close(release_w)
    assert outcome.status == "failed" and outcome.reason == "interrupted (Ctrl-C)", outcome.reason
    assert isinstance(outcome.interrupted, KeyboardInterrupt) and outcome.error is None
    assert leftovers.clean(names.run_id), leftovers.traces(names.run_id)
