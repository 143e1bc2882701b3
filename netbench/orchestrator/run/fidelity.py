"""Is a run's measurement what a real cluster would have seen? Watch the host while the workers train.

An emulated cluster is N processes on one host's C cores behind a userspace delay line. Its step
time stops meaning anything about a real cluster when:

* **the workers wait for a core** -- nodes outnumber cores, or other load takes them. Read from
  each worker's ``/proc/<pid>/schedstat`` (its main thread) and ``/proc/<pid>/task/*/schedstat``
  (all its threads): time runnable but not running.
* **a ring's hops wait for a core** -- gloo runs a collective on its own threads (the process
  group's and the TCP transport's), while the main thread blocks on it. With more nodes than
  cores, every hop of a ring needs the next rank's thread woken on a core that another node's
  thread may hold; at little or no link delay those waits, not the wire, set the collective's
  time. So with ``nodes > cores`` the wait that counts is all of a worker's threads' together
  (same 10 % limit). The main thread's wait alone missed it: ``full 8n 1gbit 0ms`` of the
  fidelity grid measured its step 1.5-1.8x the model (communication 59-95 ms against 22 ms) while its main
  threads waited 7-9 %; all its threads waited 25 % (docs/concepts/fidelity.md). With ``nodes <= cores``
  each node has a core, and a worker's threads handing work to each other wait briefly on a real
  node too (2 nodes, 1gbit, no delay: 11 % summed over threads, step within 4 % of the model), so
  there the main thread's wait still decides (it sees other load taking the cores). A run dilated k
  times (:mod:`netbench.orchestrator.run.dilation`) has ``cores x k`` core-seconds per emulated second:
  its ring outnumbers them only when ``nodes > cores x k`` (32 nodes, k = 16: measured 0.98x the
  model while their threads waited 12 %, summed, for hops 16 times longer).
* **the host's CPU is saturated** -- ``/proc/stat`` busy share and run queue (``procs_running``),
  sampled from the orchestrator's watch loop (one file read every 0.2 s).
* **packet processing is saturated** -- the softirq share of the host's CPU (``/proc/stat``).
* **the delay line falls behind** -- it counts packets released more than 1 ms after their due
  time (:mod:`netbench.emulation.delayline`), and it waits for a core like a worker does.
* **the delay line loses packets** -- the kernel's queue counters (read by the delay line): packets
  dropped because its queue or its receive buffer was full, before it could delay them.

Shaper drops and overlimits (``tc -s qdisc``) are recorded but are not a reason: a real switch
port drops when its buffer fills too.

Thresholds (``THRESHOLDS``) were set from runs on a 2-core host (docs/benchmarks/2026-11-cpu-2core.md): a
2-node run there has its workers wait under 2 % of the time and no late packets; 16 and 32
nodes wait 50-90 %.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.emulation import acksfirst
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["THRESHOLDS", "FidelityMonitor", "qdisc_stats", "judge", "unfinished", "codec_speed", "codec_reason"]

THRESHOLDS = {
    # share of the run a worker (main thread; all threads when nodes > cores) spent runnable without a core
    "worker_wait": 0.10,
    "host_busy": 0.97,  # busy share of all cores (with the run queue above the cores)
    "softirq": 0.25,  # softirq share of all cores: packet processing is the bottleneck
    "late_packets": 0.01,  # share of delayed packets released more than 1 ms late
    "delay_line_wait": 0.10,  # share of the run the delay line waited for a core
    "queue_drops": 0,  # packets the kernel dropped before the delay line saw them: loss nobody asked for
}
SAMPLE_EVERY_S = 0.2


def _schedstat(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting) of the process's main thread -- the one that
    computes, encodes and decodes; None when the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
    except OSError:
        return None
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def _threads_schedstat(pid: int) -> dict[int, tuple[float, float, int]]:
    """Per thread of the process: (seconds on a CPU, seconds runnable but waiting, time slices run).
    gloo's collectives run on the process group's and the transport's own threads, not the main one."""
    out: dict[int, tuple[float, float, int]] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return out
    for tid in tids:
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except OSError:
            continue
        out[tid] = (int(fields[0]) / 1e9, int(fields[1]) / 1e9, int(fields[2]))
    return out


def _proc_stat() -> tuple[list[int], int]:
    """(aggregate cpu jiffies: user nice system idle iowait irq softirq steal, procs_running)."""
    cpu, running = [], 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu "):
            cpu = [int(x) for x in line.split()[1:9]]
        elif line.startswith("procs_running"):
            running = int(line.split()[1])
    return cpu, running


def qdisc_stats(netns_names: list[str]) -> dict[str, int]:
    """Sum of drops, overlimits, packets and the largest backlog over every shaping qdisc in these namespaces.

    The ACKs-first tree beneath a tbf (:mod:`netbench.emulation.acksfirst`) is left out: its htb sees the
    same packets and drops as the tbf above it."""
    total = {"drops": 0, "overlimits": 0, "packets": 0, "backlog_max": 0}
    for ns in netns_names:
        try:
            out = subprocess.run(
                ["tc", "-n", ns, "-s", "-j", "qdisc", "show"], capture_output=True, text=True, timeout=5, check=False
            ).stdout
            qdiscs = json.loads(out or "[]")
        except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
            continue
        for q in qdiscs:
            if q.get("kind") not in ("tbf", "netem", "htb") or q.get("handle") == acksfirst.ROOT:
                continue
            total["drops"] += int(q.get("drops", 0))
            total["overlimits"] += int(q.get("overlimits", 0))
            total["packets"] += int(q.get("packets", 0))
            total["backlog_max"] = max(total["backlog_max"], int(q.get("backlog", 0)))
    return total


@dataclass
class FidelityMonitor:
    """Samples taken while the workers train; ``observed()`` turns them into figures.

    The window opens once every worker has finished its first step (torch imports and gloo's
    rendezvous are not the training the run measures) and closes at the last sample. Counters
    are sampled every SAMPLE_EVERY_S, since a worker that has exited takes its counters with it.
    """

    worker_pids: list[int]
    cores: int
    helper_pids: dict[str, int] = field(default_factory=dict)
    dilation: float = 1.0
    _first: dict[int, tuple[float, float]] = field(default_factory=dict)
    _last: dict[int, tuple[float, tuple[float, float]]] = field(default_factory=dict)
    _cpu: list[list[int]] = field(default_factory=list)
    _times: list[float] = field(default_factory=list)
    _running: list[int] = field(default_factory=list)
    _next_sample: float = 0.0
    _threads_first: dict[int, dict[int, tuple[float, float, int]]] = field(default_factory=dict)
    _threads_last: dict[int, tuple[float, dict[int, tuple[float, float, int]]]] = field(default_factory=dict)

    def on_progress(self, done: int) -> None:
        """Called from the watch loop (every 0.1 s) with the slowest node's step count."""
        now = time.monotonic()
        if done < 1 or now < self._next_sample:
            return
        self._next_sample = now + SAMPLE_EVERY_S
        try:
            cpu, running = _proc_stat()
        except OSError:
            return
        self._cpu.append(cpu)
        self._times.append(now)
        if len(self._times) > 1:
            self._running.append(running)
        for pid in [*self.worker_pids, *self.helper_pids.values()]:
            stat = _schedstat(pid)
            if stat is None:
                continue
            self._first.setdefault(pid, stat)
            self._last[pid] = (now, stat)
        for pid in self.worker_pids:
            threads = _threads_schedstat(pid)
            if threads:
                first = self._threads_first.setdefault(pid, {})
                for tid, stat3 in threads.items():
                    first.setdefault(tid, stat3)
                self._threads_last[pid] = (now, threads)

    def _share(self, pid: int) -> tuple[float, float] | None:
        """(CPU, wait) of ``pid`` as shares of the window it was seen in."""
        if pid not in self._first or pid not in self._last:
            return None
        span = self._last[pid][0] - self._times[0]
        if span <= 0:
            return None
        (run0, wait0), (run1, wait1) = self._first[pid], self._last[pid][1]
        return (run1 - run0) / span, (wait1 - wait0) / span

    def _threads_share(self, pid: int) -> tuple[float, float, float] | None:
        """(CPU, wait, time slices per second) of all of ``pid``'s threads together, over the window it was seen in.
        A thread first seen after the window opened counts from its start (its counters began at zero)."""
        if pid not in self._threads_last:
            return None
        span = self._threads_last[pid][0] - self._times[0]
        if span <= 0:
            return None
        first = self._threads_first[pid]
        run = wait = slices = 0.0
        for tid, (r1, w1, n1) in self._threads_last[pid][1].items():
            r0, w0, n0 = first.get(tid, (0.0, 0.0, 0))
            run, wait, slices = run + r1 - r0, wait + w1 - w0, slices + n1 - n0
        return run / span, wait / span, slices / span

    def observed(
        self, delay_line: dict[str, Any] | None = None, qdiscs: dict[str, int] | None = None
    ) -> dict[str, Any] | None:
        """Figures of the window, or None when it held fewer than two samples (a run too short to judge)."""
        if len(self._times) < 2:
            return None
        shares = [s for pid in self.worker_pids if (s := self._share(pid)) is not None]
        waits = [w for _, w in shares]
        helpers = {
            name: {"cpu": s[0], "wait": s[1]}
            for name, pid in self.helper_pids.items()
            if (s := self._share(pid)) is not None
        }
        delta = [b - a for a, b in zip(self._cpu[0], self._cpu[-1])]
        total = sum(delta) or 1
        threads = [s for pid in self.worker_pids if (s := self._threads_share(pid)) is not None]
        return {
            "cores": self.cores,
            "nodes": len(self.worker_pids),
            "dilation": self.dilation,
            "seconds": self._times[-1] - self._times[0],
            "worker_wait_mean": statistics.fmean(waits) if waits else None,
            "worker_wait_max": max(waits) if waits else None,
            "worker_cpu_mean": statistics.fmean(c for c, _ in shares) if shares else None,
            "threads_cpu_mean": statistics.fmean(c for c, _, _ in threads) if threads else None,
            "threads_wait_mean": statistics.fmean(w for _, w, _ in threads) if threads else None,
            "threads_wait_max": max(w for _, w, _ in threads) if threads else None,
            "threads_slices_per_s_mean": statistics.fmean(n for _, _, n in threads) if threads else None,
            "host_busy": 1 - (delta[3] + delta[4]) / total,
            "softirq": delta[6] / total,
            "host_system": delta[2] / total,
            "host_user": (delta[0] + delta[1]) / total,
            "run_queue_mean": statistics.fmean(self._running) if self._running else None,
            "run_queue_max": max(self._running) if self._running else None,
            "helpers": helpers,
            "delay_line": delay_line,
            "shaper": qdiscs,
        }


OWN_WORK_SHARE = (
    0.7  # workers busier than this share of the cores: their own work, not a neighbour, is what crowds the host
)


def dilation_hint(observed: dict[str, Any]) -> str:
    """``; try --dilation K``: the factor that brings the host's busy share to dilation.HOST_SHARE (the share
    ``auto`` aims for), if above this run's. Dilated k times, the run's busy share is 1/k of the undilated one."""
    from netbench.orchestrator.run.dilation import (  # late: keeps networkx, numpy, psutil, pyroute2 off
        factor_for_busy,
    )  # late: keeps networkx, numpy, psutil, pyroute2 off this module's import

    k = observed.get("dilation", 1.0)
    wanted = factor_for_busy(k * observed["host_busy"])
    if wanted <= k:
        return ""
    return f"; try --dilation {wanted:g} (DieCast: links, delays and each node's CPU slowed alike, times divided back)"


def judge(observed: dict[str, Any] | None) -> dict[str, Any]:
    """``{"ok": bool, "reasons": [...], "observed": ...}``: each reason names its cause and its figure."""
    if observed is None:
        return {"ok": True, "reasons": [], "observed": None, "note": "run too short to observe"}
    t = THRESHOLDS
    reasons: list[str] = []
    nodes, cores = observed["nodes"], observed["cores"]
    wait = observed.get("worker_wait_mean")
    ring_wait = observed.get("threads_wait_mean")
    # dilated k times, the host's cores give k core-seconds per emulated second: the ring outnumbers them only past
    # cores x k
    if nodes > cores * observed.get("dilation", 1.0) and ring_wait is not None and ring_wait > t["worker_wait"]:
        reasons.append(
            f"CPU: {nodes} workers outnumber the host's {cores} cores; each worker's threads (gloo's included) waited "
            f"{ring_wait:.0%} of the run for a core (limit {t['worker_wait']:.0%}): every hop of a ring waits "
            "for a core"
        )
    elif wait is not None and wait > t["worker_wait"]:
        own = nodes * (observed.get("worker_cpu_mean") or 0.0)  # cores the workers' own CPU work kept busy
        if nodes > cores:
            cause = f"{nodes} workers outnumber the host's {cores} cores"
        elif own > OWN_WORK_SHARE * cores:
            cause = (
                f"the workers' own CPU work kept {own:.1f} of the host's {cores} cores busy, too few left "
                "for the emulation"
            )
        else:
            cause = "other work on the host (delay line, capture, other processes) took the cores"
        reasons.append(
            f"CPU: {cause}; each worker waited {wait:.0%} of the run for a core (limit {t['worker_wait']:.0%})"
            f"{dilation_hint(observed)}"
        )
    rq = observed.get("run_queue_mean")
    if observed["host_busy"] > t["host_busy"] and rq is not None and rq > cores:
        reasons.append(
            f"host CPU saturated: {observed['host_busy']:.0%} busy, {rq:.1f} runnable tasks on {cores} cores"
        )
    if observed["softirq"] > t["softirq"]:
        reasons.append(
            f"packet processing saturated: softirq took {observed['softirq']:.0%} of the CPU (limit {t['softirq']:.0%})"
        )
    line = observed.get("delay_line") or {}
    if line.get("passed"):
        late = line.get("late", 0) / line["passed"]
        if late > t["late_packets"]:
            reasons.append(
                f"delay line fell behind: {late:.1%} of packets released over 1 ms late "
                f"(max {line.get('late_max_s', 0) * 1e3:.1f} ms; limit {t['late_packets']:.0%})"
            )
    reasons.extend(queue_drop_reasons(line))
    lines = {
        name: h["wait"]
        for name, h in (observed.get("helpers") or {}).items()
        if name.startswith("delay_line") and h.get("wait") is not None
    }
    starved = max(lines, key=lines.__getitem__) if lines else None
    if starved is not None and lines[starved] > t["delay_line_wait"]:
        which = (
            ""
            if len(lines) == 1
            else f" ({starved.removeprefix('delay_line_') if starved != 'delay_line' else 'first switch'}, the "
            f"most of {len(lines)})"
        )
        reasons.append(f"delay line starved{which}: it waited {lines[starved]:.0%} of the run for a core")
    return {"ok": not reasons, "reasons": reasons, "observed": observed}


UNFINISHED = "the run did not finish: what it measured is not a faithful run of the scenario"


def unfinished(verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a run that failed or was stopped: never ok, whatever its emulation looked like meanwhile."""
    return {**verdict, "ok": False, "reasons": [UNFINISHED, *verdict.get("reasons", [])]}


def queue_drop_reasons(line: dict[str, Any]) -> list[str]:
    """A reason when the kernel dropped packets on their way to the delay line (its counters, delaystats)."""
    full, buffer = int(line.get("queue_dropped") or 0), int(line.get("queue_user_dropped") or 0)
    if full + buffer <= THRESHOLDS["queue_drops"]:
        return []
    return [
        f"delay line lost {full + buffer} packet(s) before it could delay them: {full} to its full kernel queue, "
        f"{buffer} to its full receive buffer (ENOBUFS); the links dropped packets the scenario did not ask for"
    ]


CODEC_STEP_SHARE = (
    0.05  # the nodes' encode + decode took more CPU time than calibrated by this share of the predicted step
)
CODEC_MIN_S = 0.005  # below this calibrated codec time per step the comparison is noise


def codec_speed(steps: pd.DataFrame, calibrated_s: float | None, step_s: float | None) -> dict[str, float] | None:
    """The nodes' encode + decode CPU time per step (median over steps, then over nodes) against the calibration's,
    and how much of the predicted step (``step_s``) the difference is.

    CPU time, not wall time: waiting for a core is the other checks' business. A ratio above 1 means the
    cores ran slower than when calibrated (other work sharing the physical cores or memory, or a stale
    calibration), so the run measured slower machines than the model describes. What matters is how
    far that moves the step: 1.3x of a 7 ms codec in a 200 ms step does not, 1.14x of a 170 ms codec in
    a 190 ms step moved it 14 % (the ratio limit of 1.15x this replaced flagged the first and passed the
    second). None where it cannot be told.
    """
    if not calibrated_s or calibrated_s < CODEC_MIN_S or not step_s or steps.empty or Col.COMPRESS_CPU_S not in steps:
        return None

    measured = measured_steps(steps)
    per_node = (measured[Col.COMPRESS_CPU_S] + measured[Col.DECODE_CPU_S]).groupby(measured[Col.RANK]).median()
    if per_node.empty or not per_node.median() > 0:
        return None
    value = float(per_node.median())
    return {
        "measured_s": value,
        "calibrated_s": calibrated_s,
        "ratio": value / calibrated_s,
        "step_share": (value - calibrated_s) / step_s,
    }


def codec_reason(speed: dict[str, float] | None) -> str | None:
    """The fidelity reason for a codec that ran slower than calibrated by more than CODEC_STEP_SHARE of the step, or
    None.
    """
    if speed is None or speed["step_share"] <= CODEC_STEP_SHARE:
        return None
    return (
        f"CPU: the nodes' encode + decode took {speed['ratio']:.2f}x the CPU time calibrated on this host "
        f"({speed['measured_s'] * 1e3:.0f} vs {speed['calibrated_s'] * 1e3:.0f} ms a step, "
        f"{speed['step_share']:.0%} of the "
        f"predicted step; limit {CODEC_STEP_SHARE:.0%}): "
        f"the cores ran slower than when calibrated (shared with other work, or the calibration is stale)"
    )
