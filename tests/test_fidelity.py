"""The fidelity flag: a run whose workers wait for cores (more nodes than cores, saturated CPU) is flagged with
its cause; one whose workers each have a core is not. Also time dilation's transforms."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.dilation import auto_factor, cpu_stretch, dilate, parse_dilation, undilate_records
from netbench.orchestrator.fidelity import THRESHOLDS, FidelityMonitor, judge
from netbench.replicators.config import ReplicatorConfig
from netbench.workloads.config import WorkloadConfig

BUSY = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
IDLE = "import time\ntime.sleep(30)"


def observed(**kw) -> dict:
    base = {"cores": 2, "nodes": 2, "worker_wait_mean": 0.01, "host_busy": 0.5, "softirq": 0.02, "run_queue_mean": 1.5,
            "helpers": {"delay_line": {"cpu": 0.1, "wait": 0.0}}, "delay_line": {"passed": 1000, "late": 0, "late_max_s": 0.0}}
    return {**base, **kw}


def test_judge_names_each_cause() -> None:
    assert judge(observed()) == {"ok": True, "reasons": [], "observed": observed()}
    many = judge(observed(nodes=32, worker_wait_mean=0.8, host_busy=1.0, run_queue_mean=30))
    assert not many["ok"] and any("32 workers outnumber the host's 2 cores" in r for r in many["reasons"])
    assert any("host CPU saturated" in r for r in many["reasons"])
    other = judge(observed(worker_wait_mean=0.5))
    assert other["reasons"] == [f"CPU: other work on the host (delay line, capture, other processes) took the cores; each worker waited 50% of the run for a core (limit {THRESHOLDS['worker_wait']:.0%})"]
    late = judge(observed(delay_line={"passed": 1000, "late": 200, "late_max_s": 0.004}))
    assert late["reasons"][0].startswith("delay line fell behind: 20.0% of packets") and "max 4.0 ms" in late["reasons"][0]
    assert "softirq" in judge(observed(softirq=0.4))["reasons"][0]
    assert "delay line starved" in judge(observed(helpers={"delay_line": {"cpu": 0.5, "wait": 0.3}}))["reasons"][0]
    assert judge(None)["ok"]  # too short to observe: nothing to say against it


def _monitor(code: str, count: int, seconds: float = 2.5) -> dict:
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        monitor = FidelityMonitor([p.pid for p in procs], cores=len(os.sched_getaffinity(0)))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            monitor.on_progress(1)
            time.sleep(0.1)
        return judge(monitor.observed())
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_more_busy_workers_than_cores_is_flagged() -> None:
    cores = len(os.sched_getaffinity(0))
    verdict = _monitor(BUSY, 3 * cores)
    assert not verdict["ok"]
    assert any(f"{3 * cores} workers outnumber the host's {cores} cores" in r for r in verdict["reasons"]), verdict["reasons"]
    assert verdict["observed"]["worker_wait_mean"] > 0.5  # three per core: each runs about a third of the time


def test_workers_that_do_not_compete_are_not_flagged_for_cpu() -> None:
    verdict = _monitor(IDLE, 2)
    assert verdict["observed"]["worker_wait_mean"] < THRESHOLDS["worker_wait"]
    assert not any(r.startswith("CPU:") for r in verdict["reasons"])


def config(nodes: int = 16) -> RunConfig:
    cluster = ClusterSpec(nodes=nodes, up={"rate_bps": 1e9, "delay_s": 0.005}, down={"rate_bps": 1e9})
    work = WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=256", compute_ms=50)
    return RunConfig(cluster=cluster, replicator=ReplicatorConfig(name="dct"), workload=work, capture=False, timeout_s=30)


def test_dilation_slows_links_and_compute_and_divides_durations() -> None:
    slow = dilate(config(), 8)
    assert slow.cluster.up.rate_bps == pytest.approx(1.25e8) and slow.cluster.down.rate_bps == pytest.approx(1.25e8)
    assert slow.cluster.up.delay_s == pytest.approx(0.04) and slow.workload.compute_ms == pytest.approx(400) and slow.timeout_s == 240
    assert dilate(config(), 1.0) == config()
    records = {0: [{"event": "start"}, {"event": "step", "step_s": 8.0, "comm_s": 4.0, "compute_s": 0.4, "t_start": 100.0, "payload_bytes": 10}]}
    back = undilate_records(records, 8)[0]
    assert back[0] == {"event": "start"}
    assert back[1] == {"event": "step", "step_s": 1.0, "comm_s": 0.5, "compute_s": 0.05, "t_start": 100.0, "payload_bytes": 10}
    # CPU work counts as CPU time: divided by the measured stretch (here 4), the rest by k (8)
    cpu = {0: [{"event": "step", "step_s": 8.0, "comm_s": 4.0, "compute_s": 0.4, "compress_s": 2.0, "decode_s": 1.0}]}
    mixed = undilate_records(cpu, 8, stretch=4.0)[0][0]
    assert mixed["compress_s"] == 0.5 and mixed["decode_s"] == 0.25 and mixed["comm_s"] == 0.5 and mixed["compute_s"] == 0.05
    assert mixed["step_s"] == pytest.approx((8.0 - 3.0) / 8 + 3.0 / 4)
    assert cpu_stretch({"worker_cpu_mean": 0.01, "worker_wait_mean": 0.03}, 8) == pytest.approx(4.0)
    assert cpu_stretch({"worker_cpu_mean": 0.01, "worker_wait_mean": 0.5}, 8) == 8 and cpu_stretch(None, 8) == 8
    assert cpu_stretch({"worker_cpu_mean": 0.5, "worker_wait_mean": 0.0}, 8) == 1.0
    assert auto_factor(32, 2) == 16 and auto_factor(2, 4) == 1 and parse_dilation("auto", 16, 2) == 8 and parse_dilation("2.5", 2, 2) == 2.5
    for bad in ("0.5", "x", "nan", "1e9"):
        with pytest.raises(ValueError):
            parse_dilation(bad, 2, 2)


def test_bad_dilation_is_one_line_exit_2_before_anything_runs() -> None:
    done = subprocess.run(["netbench", "run", "--dilation", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "--dilation" in done.stderr


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_real_runs_six_nodes_on_two_cores_flagged_two_nodes_not(tmp_path) -> None:
    """The installed console script: six transformer nodes (real compute) on this host's cores wait for them."""
    cores = len(os.sched_getaffinity(0))

    def run(nodes: int) -> dict:
        done = subprocess.run(["netbench", "run", "--nodes", str(nodes), "--bw", "1gbit", "-r", "full", "--steps", "6", "--warmup", "1",
                               "--no-capture", "--json", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    crowded = run(3 * cores)
    assert crowded["fidelity"]["ok"] is False
    assert any(f"{3 * cores} workers outnumber" in r for r in crowded["fidelity"]["reasons"]), crowded["fidelity"]
    pair = run(2)
    assert not any("outnumber" in r for r in pair["fidelity"]["reasons"])  # other engineers' load may still be named
    run_json = json.loads((next(tmp_path.glob("*/run.json"))).read_text())
    assert {"ok", "reasons", "observed"} <= run_json["fidelity"].keys()
