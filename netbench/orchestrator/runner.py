"""`netbench run`: build the cluster, start a worker per node, watch, collect, tear down.

Data flows one way: RunConfig -> Cluster (+ capture) -> workers (JSONL records) -> steps.csv,
run.json, summary. A failing run keeps every step measured so far (workers flush each record)
and still writes both files, with ``status: failed`` and the reason naming the node.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench import safe_files
from netbench.capture.tcpdump import Capture
from netbench.emulation.cleanup import find_leftovers
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.model.host import host_cpus
from netbench.model.hostcache import HostCalibration, host_calibration
from netbench.orchestrator import dilation as dil
from netbench.orchestrator import fidelity as fid
from netbench.orchestrator import results
from netbench.orchestrator.config import RENDEZVOUS_PORT, RunConfig
from netbench.orchestrator.intranode import INTRA_IFACE, shape_intra
from netbench.orchestrator.timeouts import collective_timeout_s
from netbench.worker.spec import WorkerSpec

Progress = Callable[[int, int], None]  # (steps done by the slowest node, total steps)


@dataclass
class RunResult:
    run_dir: Path
    status: str
    reason: str | None
    summary: dict[str, Any]
    run_json: dict[str, Any] = field(repr=False, default_factory=dict)


class WorkerFailure(RuntimeError):
    """A worker ended badly; the message names the node."""


def _worker_specs(config: RunConfig, cluster: Cluster, run_dir: Path, timeout_s: float) -> list[Path]:
    """One spec per worker: G per node, rank = node * G + local rank (G = 1: one per node, rank = node)."""
    paths = []
    g = config.gpus_per_node
    for node in cluster.nodes:
        for local in range(g):
            rank = node.index * g + local
            spec = WorkerSpec(
                rank=rank, world_size=len(cluster.nodes) * g, master_addr=cluster.nodes[0].address, master_port=RENDEZVOUS_PORT,
                iface=node.iface, steps=config.steps, warmup_steps=config.warmup_steps, replicator=config.replicator,
                workload=config.workload, out_path=str(run_dir / "workers" / f"rank{rank}.jsonl"),
                timeout_s=timeout_s, threads=config.threads,
                **({"gpus_per_node": g, "intra_iface": INTRA_IFACE} if g > 1 else {}),
            )
            path = run_dir / "workers" / f"rank{rank}.spec.json"
            safe_files.write_text(path, spec.model_dump_json(indent=2))
            paths.append(path)
    return paths


class StepCounter:
    """Steps a worker has recorded so far, reading only what its record file gained since the last call.

    The watcher polls every 0.1 s; re-reading whole files made a long run's polling quadratic.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.steps = 0

    def __call__(self) -> int:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return self.steps
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        self.steps += sum(1 for line in complete.splitlines() if line.startswith(b'{"event": "step"'))  # "event" comes first
        return self.steps


def _finished(path: Path) -> bool:
    """True when the worker wrote its done event: every step it owed is on disk."""
    return any(r.get("event") == "done" for r in results.read_records(path))


def _root_cause(procs: list, record_paths: list[Path], settle_s: float = 2.0) -> str:
    """Name the node that caused a failure, not the peers that merely lost it.

    When one worker dies, its peers fail too (a gloo read error) and may exit first; so wait a
    moment, then prefer a node killed by a signal, then one that exited without an error event.
    """
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    failed = []
    for rank, proc in enumerate(procs):
        code = proc.poll()
        if code in (None, 0) or _finished(record_paths[rank]):
            continue
        error = next((r["error"] for r in reversed(results.read_records(record_paths[rank])) if r.get("event") == "error"), None)
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        failed.append((code >= 0, error is not None, rank, f"node {rank} {how}" + (f": {error}" if error else "")))
    return min(failed)[3] if failed else "a worker failed"


def _watch(procs: list, record_paths: list[Path], total: int, deadline_s: float, progress: Progress | None,
           poll: Callable[[], None] = lambda: None) -> None:
    """Wait for every worker; raise WorkerFailure naming the first node that failed or stalled. ``poll`` runs every round."""
    last_progress, last_done = time.monotonic(), -1
    counters = [StepCounter(path) for path in record_paths]
    while True:
        poll()
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0) and _finished(record_paths[rank]):
                codes[rank] = 0  # crashed on the way out (gloo teardown) after recording everything
        if any(code not in (None, 0) for code in codes):
            raise WorkerFailure(_root_cause(procs, record_paths))
        counts = [count() for count in counters]
        done = min(counts)
        if progress:
            progress(done, total)
        if all(code == 0 for code in codes):
            return
        now = time.monotonic()
        if done != last_done:
            last_done, last_progress = done, now
        elif now - last_progress > deadline_s:
            slow = counts.index(done)
            raise WorkerFailure(f"no progress for {deadline_s:.0f} s (node {slow} is at step {done})")
        time.sleep(0.1)


def new_run_dir(out_dir: Path, label: str, names: RunNames) -> Path:
    """``OUT/STAMP-LABEL-RUNID`` with its workers/ folder: the layout every launcher (run, exec) shares."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = safe_files.make_folder(out_dir) / f"{stamp}-{label}-{names.run_id}"
    (run_dir / "workers").mkdir(parents=True)  # a fresh folder of our own: nobody else could have planted files in it
    return run_dir


def leftover_warnings() -> list[str]:
    """One warning line when earlier runs left namespaces behind (a new run still goes ahead)."""
    leftovers = find_leftovers()
    return [f"found leftovers of {len(leftovers.run_ids)} earlier run(s) ({', '.join(leftovers.run_ids)}): "
            f"{len(leftovers.namespaces)} namespace(s), {len(leftovers.pids)} process(es); run `netbench clean`"] if leftovers.namespaces else []


def start_capture(cluster: Cluster, pcap_dir: Path, enabled: bool) -> Capture | None:
    """tcpdump on every switch port (None when disabled or tcpdump is missing)."""
    capture = Capture(cluster.switch, [n.port for n in cluster.nodes], pcap_dir) if enabled and Capture.available() else None
    if capture:
        capture.start()
    return capture


def stop_capture(capture: Capture | None, cluster: Cluster) -> tuple[dict[int, Path], dict[str, int]]:
    """Stop the capture; each node's pcap by rank, and the packets each port dropped."""
    if not capture:
        return {}, {}
    paths, drops = capture.stop()
    return {node.index: paths[node.port] for node in cluster.nodes}, drops


def interrupted_reason(exc: BaseException) -> str:
    """How the user stopped a run: Ctrl-C, or SIGTERM/SIGHUP (SystemExit 128 + signal)."""
    return "interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt) else f"terminated (exit {getattr(exc, 'code', '?')})"


def _fidelity(monitor: fid.FidelityMonitor, cluster: Cluster) -> dict[str, Any]:
    """The fidelity verdict from the monitor's samples, the delay line's counters and the shapers' statistics."""
    try:
        line = json.loads(Path(cluster.delay_line_stats_path).read_text())
    except (OSError, ValueError):
        line = None
    qdiscs = fid.qdisc_stats([cluster.switch.netns, *(n.netns for n in cluster.nodes)])
    return fid.judge(monitor.observed(line, qdiscs))


def run(config: RunConfig, progress: Progress | None = None, on_cluster: Callable[[Cluster], None] | None = None,
        calibration: HostCalibration | None = None, dilation: float = 1.0) -> RunResult:
    """Run one configuration end to end. ``on_cluster`` lets tests inject faults once workers start.

    ``calibration``: the model constants its prediction uses (default: this host's, measured
    first when the cache has none -- before anything is built). ``dilation``: time dilation
    factor k (:mod:`netbench.orchestrator.dilation`); results are reported for ``config``.
    """
    calibration = calibration or host_calibration(replicators=(config.replicator,))
    real, config = config, dil.dilate(config, dilation)
    names = RunNames.new()
    run_dir = new_run_dir(config.out_dir, config.replicator.name, names)
    warnings = leftover_warnings()
    status, reason = "ok", None
    cluster_info: dict[str, Any] = {}
    fidelity: dict[str, Any] | None = None
    pcaps: dict[int, Path] = {}
    capture_drops: dict[str, int] = {}
    started = time.time()
    timeout_s = collective_timeout_s(config)
    trained = False  # the workers finished (or failed) and the capture stopped: only teardown is left
    pcap_dir = run_dir / "capture"  # inside the run's own folder: an interrupted run leaves nothing elsewhere
    cluster: Cluster | None = None
    try:
        cluster = Cluster(config.cluster, names=names)
        with cluster:
            cluster_info = cluster.describe()
            cluster_info["capabilities"] = cluster.capabilities.as_dict()
            g = config.gpus_per_node
            if g > 1:
                cluster_info["intra_node"] = shape_intra(cluster.nodes, config.intra_bw_bps)
            capture = start_capture(cluster, pcap_dir, config.capture)
            spec_paths = _worker_specs(config, cluster, run_dir, timeout_s)
            record_paths = [run_dir / "workers" / f"rank{i}.jsonl" for i in range(len(cluster.nodes) * g)]
            procs = []
            for rank, spec_path in enumerate(spec_paths):
                node = cluster.nodes[rank // g]
                with (run_dir / "workers" / f"rank{rank}.log").open("x") as log:  # the worker keeps its own copy
                    procs.append(node.python("netbench.worker", "--spec", str(spec_path), env={"OMP_NUM_THREADS": str(config.threads)},
                                             stdout=log, stderr=log))
            if on_cluster:
                on_cluster(cluster)
            helpers = {"delay_line": cluster.delay_line_pid} if cluster.delay_line_pid else {}
            monitor = fid.FidelityMonitor([p.pid for p in procs], host_cpus(), helpers)

            def watched(done: int, total: int) -> None:
                monitor.on_progress(done)
                if progress:
                    progress(done, total)

            try:
                _watch(procs, record_paths, config.warmup_steps + config.steps, deadline_s=timeout_s * 2 + 30, progress=watched,
                       poll=cluster.check)
            except WorkerFailure as exc:
                status, reason = "failed", str(exc)
            finally:
                fidelity = _fidelity(monitor, cluster)
                pcaps, capture_drops = stop_capture(capture, cluster)
            trained = True
            cluster.down()  # here, not in __exit__: a signal from now on waits for the teardown (see Cluster)
    except (KeyboardInterrupt, SystemExit) as exc:
        if cluster is not None:
            cluster.down()  # a no-op, unless a second signal landed just as __exit__ began
        how = interrupted_reason(exc)
        if trained:  # every step was measured: keep the status; the reason still says the user stopped it
            reason = reason or f"{how} during teardown; every step was measured"
        else:
            status, reason, pcaps = "failed", how, {}  # the user wants out: skip parsing the capture
    except Exception as exc:  # noqa: BLE001 - recorded in run.json, then re-raised below for the CLI
        status, reason = "failed", f"{type(exc).__name__}: {exc}"
    try:
        if fidelity is not None:
            fidelity["dilation"] = dilation
        return _collect(real, run_dir, names, cluster_info, pcaps, capture_drops, status, reason, started, warnings, timeout_s,
                        calibration, fidelity, dilation)
    finally:
        if not config.keep_pcap:
            shutil.rmtree(pcap_dir, ignore_errors=True)


def _collect(config: RunConfig, run_dir: Path, names: RunNames, cluster_info: dict, pcaps: dict[int, Path],
             capture_drops: dict[str, int], status: str, reason: str | None, started: float, warnings: list[str],
             timeout_s: float, calibration: HostCalibration | None = None, fidelity: dict[str, Any] | None = None,
             dilation: float = 1.0) -> RunResult:
    """Whatever happened, write steps.csv and run.json from what was measured (durations divided by the dilation)."""
    g = config.gpus_per_node
    records = {rank: results.read_records(run_dir / "workers" / f"rank{rank}.jsonl") for rank in range(config.cluster.nodes * g)}
    pcaps = {node * g: path for node, path in pcaps.items()}  # a node's capture goes with its first worker's steps
    if dilation != 1.0:  # CPU work counts as CPU time: divided by the stretch the run measured, the rest by k
        stretch = dil.cpu_stretch((fidelity or {}).get("observed"), dilation)
        cpu_fields = dil.CPU_FIELDS + (("compute_s",) if config.workload.kind != "shapes" else ())
        records = dil.undilate_records(records, dilation, stretch, cpu_fields)
        if fidelity is not None:
            fidelity["cpu_stretch"] = stretch
    cpus = max(1, round(host_cpus() * dilation)) if dilation != 1.0 else None  # dilated: each node has k times the CPU per second
    summary, run_json = results.write_run(
        run_dir, config, records, run_id=names.run_id, status=status, reason=reason, started=started, warnings=warnings,
        cluster=cluster_info, extra={"collective_timeout_s": timeout_s, "launcher": "netbench run", "dilation": dilation}, pcaps=pcaps,
        addresses={rank: names.address(rank // g) for rank in pcaps}, capture={"dropped_by_port": capture_drops},
        calibration=calibration, fidelity=fidelity, cpus=cpus)
    return RunResult(run_dir, status, reason, summary, run_json)
