"""`netbench exec`: any program, once per node, on the emulated cluster, measured without touching it.

The phases are `netbench run`'s (:mod:`netbench.orchestrator.phases`): a run directory, the
cluster and its capture, one process per node, a watch loop, teardown whatever happened, then
the same run directory. What differs is what runs: the user's COMMAND, started inside each
node's namespace with the torch.distributed environment (RANK, WORLD_SIZE, MASTER_ADDR, ...),
its output streamed with a node prefix and kept in ``workers/rankR.log``.

Per node, without the program's help: exit code, wall time, CPU time (the process and every
descendant it reaped, from ``wait4``), bytes and packets each way from the interface counters
and from the capture, and TCP retransmissions. Programs that opt in (``netbench.step``) add
per-step records in the worker's format, and ``steps.csv`` / the summary come from them as for
``run``, the model's prediction included when the program declared its payload.

Under a schedule whose nodes leave and join (``member`` rows, ``--churn``), a leave kills the node's program (SIGKILL
to its process group: a reclaimed machine says nothing first) and a join starts it again on the same node with the
same environment, its step records continuing from the last step the node recorded (``NETBENCH_FIRST_STEP``). A
program killed by a leave is not a failure; how often each node left is in run.json.

Exit status: the first failing node's (a node killed by a signal counts 128 + signal), 124 when
``--timeout`` expired, 130 on Ctrl-C (128 + signal for SIGTERM/SIGHUP), 125 when netbench itself
failed (the cluster could not be built).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from netbench import safe_files
from netbench.capture.pcap import parse_pcap
from netbench.counters import IfaceCounters, read_counters
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.node import Node
from netbench.orchestrator.config import RENDEZVOUS_PORT, RunConfig
from netbench.orchestrator.exec.churn_wire import node_churn_wire, windows
from netbench.orchestrator.exec.clocks import CLOCKS, clock_for
from netbench.orchestrator.exec.torchft_groups import TorchftGroups, own_hostname
from netbench.orchestrator.host_fit import check_host
from netbench.orchestrator.membership import Membership
from netbench.orchestrator.phases import Outcome, hold_cluster, leftover_warnings, start_capture, stop_capture
from netbench.orchestrator.run import results, scheduled
from netbench.orchestrator.run.node_output import OutputPump
from netbench.rundir.layout import RunDir
from netbench.rundir.steps_schema import Col
from netbench.trace import hooks as trace
from netbench.validation import error_text
from netbench.workloads.config import WorkloadConfig

EXIT_TIMEOUT = 124  # as coreutils' timeout(1)
EXIT_NETBENCH_FAILED = 125  # the cluster could not be built, or netbench failed while watching
EXIT_INTERRUPTED = 130
FAILURE_GRACE_S = 5.0  # after a node fails, its peers get this long to end on their own before they are stopped
STOP_GRACE_S = 2.0  # SIGTERM, then SIGKILL after this long


class CommandError(ValueError):
    """COMMAND cannot be started (missing or not executable); checked before anything is built."""


def check_command(command: tuple[str, ...] | list[str]) -> None:
    """Refuse an empty COMMAND, or one whose program is not found the way the node's exec would look it up."""
    if not command:
        raise CommandError("no COMMAND given (usage: netbench exec [OPTIONS] -- COMMAND [ARGS...])")
    program = command[0]
    if "/" in program:
        if not os.path.isfile(program) or not os.access(program, os.X_OK):
            raise CommandError(f"COMMAND: {program!r} is not an executable file")
    elif shutil.which(program) is None:
        raise CommandError(f"COMMAND: {program!r} not found on PATH")


@dataclass(frozen=True)
class ExecConfig:
    """A validated exec: the cluster and output settings (as a RunConfig), the command, its deadline."""

    run: RunConfig  # cluster, capture, keep_pcap, out_dir, threads, warmup_steps (for step records)
    command: tuple[str, ...]
    timeout_s: float | None = None  # wall-clock limit for COMMAND; None: none
    master_port: int = RENDEZVOUS_PORT
    torchft: bool = False  # each node a torchft replica group of one (a lighthouse, group stores: torchft_groups)
    schedule_clock: str = CLOCKS[0]  # the schedule's time 0, one of CLOCKS (:mod:`netbench.orchestrator.exec.clocks`)


@dataclass
class NodeProcess:
    """COMMAND on one node, reaped here with ``wait4`` so its CPU time (children included) is known."""

    node: Node
    proc: Any  # subprocess.Popen
    pump: OutputPump
    before: IfaceCounters | None
    started: float
    ended: float | None = None
    cpu_s: float | None = None
    stopped_by: str | None = None  # why netbench stopped it ("timeout", "peer failed", ...)
    after: IfaceCounters | None = None
    rank: int = 0  # its rank (the node's slot in the placement)
    leaves: int = 0  # how often the node left the run (its program killed, then started again on a join)
    away: bool = False  # it has left and not joined again
    earlier_cpu_s: float = 0.0  # CPU time of the node's programs before its last join
    earlier_pumps: list[OutputPump] = field(default_factory=list)
    joined_at: list[float] = field(default_factory=list)  # wall time of each start on a join

    def leave(self) -> None:
        """The node leaves: its program's process group killed at once, reaped."""
        if not self.reap():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.reap(block=True)
        self.stopped_by, self.away, self.leaves = "left", True, self.leaves + 1

    def rejoin(self, proc: Any, pump: OutputPump) -> None:
        """The node joins again, running ``proc`` (its output copied by ``pump``)."""
        self.joined_at.append(time.time())
        self.earlier_cpu_s += self.cpu_s or 0.0
        self.earlier_pumps.append(self.pump)
        self.proc, self.pump, self.away = proc, pump, False
        self.ended = self.cpu_s = self.stopped_by = None

    def join_output(self) -> None:
        """Wait for every copy of the node's output, its earlier programs' included."""
        for pump in (*self.earlier_pumps, self.pump):
            pump.join()

    @property
    def total_cpu_s(self) -> float | None:
        """CPU time of every program the node ran (None: the last one's is unknown)."""
        return None if self.cpu_s is None else self.earlier_cpu_s + self.cpu_s

    def reap(self, block: bool = False) -> bool:
        """True once the process has exited (recording its status and rusage)."""
        if self.proc.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: status known to Popen, rusage lost
            self.proc.poll()
            self.ended = self.ended or time.monotonic()
            return self.proc.returncode is not None
        if pid == 0:
            return False
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.ended = time.monotonic()
        return True

    def stop(self, why: str) -> None:
        """SIGTERM to its process group, SIGKILL after STOP_GRACE_S; reaped either way."""
        if self.reap():
            return
        self.stopped_by = why
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            if grace is None:
                self.reap(block=True)
                return
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                if self.reap():
                    return
                time.sleep(0.02)

    @property
    def exit_code(self) -> int | None:
        """As a shell reports it: the exit status, or 128 + signal."""
        code = self.proc.returncode
        return None if code is None else (128 - code if code < 0 else code)


@dataclass
class ExecResult:
    run_dir: Path
    run_id: str
    status: str
    reason: str | None
    exit_code: int
    wall_time_s: float
    nodes: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecOutcome(Outcome):
    """An exec's outcome: also the processes it started, and the exit status `netbench exec` ends with."""

    procs: list[NodeProcess] = field(default_factory=list)
    code: int = 0
    launched_at: float | None = None  # wall time the programs were started

    def exit_status(self) -> int:
        """The watch's exit status, unless the user stopped the run (130, or 128 + signal) or netbench failed (125)."""
        if self.interrupted is not None:
            return (
                EXIT_INTERRUPTED
                if isinstance(self.interrupted, KeyboardInterrupt)
                else int(getattr(self.interrupted, "code", 1) or 1)
            )
        return EXIT_NETBENCH_FAILED if self.error is not None else self.code


def rank_of(cluster: Cluster, node: Node) -> int:
    """The rank ``node`` runs: its slot in the cluster's placement (``--rank-order``), as `netbench run` places
    ranks.
    """
    return cluster.spec.placement.index(node.index)


def node_env(config: ExecConfig, cluster: Cluster, node: Node, run_dir: RunDir) -> dict[str, str]:
    """torch.distributed's environment for one node, plus where the step API writes (rank r on node
    ``placement[r]``).
    """
    world, rank = len(cluster.nodes), rank_of(cluster, node)
    master = cluster.nodes[cluster.spec.placement[0]]
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
        "MASTER_ADDR": master.address,
        "MASTER_PORT": str(config.master_port),
        "GLOO_SOCKET_IFNAME": node.iface,
        "NCCL_SOCKET_IFNAME": node.iface,
        "OMP_NUM_THREADS": str(config.run.threads),
        "PYTHONUNBUFFERED": "1",
        "NETBENCH_RUN_ID": cluster.names.run_id,
        "NETBENCH_RUN_DIR": str(run_dir.path.resolve()),
        "NETBENCH_RECORDS": str(run_dir.records_path(rank).resolve()),
        "NETBENCH_RANK": str(rank),
        "NETBENCH_WORLD_SIZE": str(world),
        "NETBENCH_IFACE": node.iface,
        "NETBENCH_WARMUP_STEPS": str(config.run.warmup_steps),
    }


def _start(
    config: ExecConfig,
    cluster: Cluster,
    node: Node,
    run_dir: RunDir,
    echo: TextIO | None,
    groups: TorchftGroups | None,
    first_step: int | None = None,
) -> tuple[Any, OutputPump]:
    """COMMAND on ``node``, its output copied to the node's log; ``groups``: under ``--torchft``, the node's replica
    group environment and hostname; ``first_step``: a joining node's steps so far, where its step records go on (in
    the file its earlier program wrote)."""
    rank = rank_of(cluster, node)
    env = node_env(config, cluster, node, run_dir)
    if groups is not None:
        env.update(groups.env(rank))
    if first_step is not None:
        env["NETBENCH_FIRST_STEP"] = str(first_step)
    proc = node.popen(
        list(config.command),
        env=env,
        then=own_hostname(node.address) if groups is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return proc, OutputPump(rank, proc.stdout, run_dir.log_path(rank), echo)


def _launch(
    config: ExecConfig, cluster: Cluster, run_dir: RunDir, echo: TextIO | None, groups: TorchftGroups | None
) -> list[NodeProcess]:

    launched = []
    for index in cluster.spec.placement:  # in rank order: the node list, the logs and the records are by rank
        node = cluster.nodes[index]
        before = node.call(read_counters, node.iface)
        proc, pump = _start(config, cluster, node, run_dir, echo, groups)
        launched.append(NodeProcess(node, proc, pump, before, time.monotonic(), rank=rank_of(cluster, node)))
    return launched


def _membership(
    config: ExecConfig,
    cluster: Cluster,
    run_dir: RunDir,
    echo: TextIO | None,
    procs: list[NodeProcess],
    groups: TorchftGroups | None,
) -> Membership:
    """A schedule's leaves and joins on the exec's processes (``procs``, by rank, filled once launched)."""

    def join(rank: int, first_step: int) -> None:
        p = procs[rank]
        p.rejoin(*_start(config, cluster, p.node, run_dir, echo, groups, first_step=first_step))

    return Membership(run_dir, lambda index: rank_of(cluster, cluster.nodes[index]), lambda r: procs[r].leave(), join)


def _watch(procs: list[NodeProcess], timeout_s: float | None, poll: Callable[[], None]) -> tuple[str, str | None, int]:
    """Wait for every node; returns (status, reason, exit code). A failure gives peers FAILURE_GRACE_S, then stops
    them.
    """
    started = time.monotonic()
    first_failure: NodeProcess | None = None
    failed_code: int | None = 1  # its exit code then: a node that later leaves and joins runs another program
    failed_at = 0.0
    while True:
        poll()
        for p in procs:
            if p.reap() and p.exit_code != 0 and not p.away and first_failure is None:
                first_failure, failed_at, failed_code = p, time.monotonic(), p.exit_code
        if all(p.proc.returncode is not None for p in procs):
            break
        now = time.monotonic()
        if first_failure is not None and now - failed_at > FAILURE_GRACE_S:
            for p in procs:
                p.stop(f"node {first_failure.rank} failed")
            break
        if timeout_s is not None and now - started > timeout_s:
            for p in procs:
                p.stop("timeout")
            running = [str(p.rank) for p in procs if p.stopped_by == "timeout"]
            return (
                "failed",
                f"timed out after {timeout_s:g} s (node(s) {', '.join(running)} still running)",
                EXIT_TIMEOUT,
            )
        time.sleep(0.05)
    if first_failure is None:
        return "ok", None, 0
    code = failed_code or 1
    how = (
        f"was killed by {signal.Signals(code - 128).name}"
        if code > 128 and code - 128 in signal.valid_signals()
        else f"exited with code {code}"
    )
    return "failed", f"node {first_failure.rank} {how}", code


def _read_after(procs: list[NodeProcess]) -> None:
    for p in procs:
        try:
            p.after = p.node.call(read_counters, p.node.iface)
        except Exception:  # noqa: BLE001 - a counter read must not cost the run its other results
            p.after = None


def execute(
    config: ExecConfig, echo: TextIO | None = sys.stdout, on_cluster: Callable[[Cluster], None] | None = None
) -> ExecResult:
    """Run COMMAND on every node of a fresh cluster; always tears down and writes the run directory.

    HostUnfit (a ValueError), before anything is created, where this host cannot hold the run (its ``out_dir``)."""
    check_host(config.run)
    names = RunNames.new()
    run_dir = RunDir.create(config.run.out_dir, "exec", names.run_id)
    warnings = leftover_warnings()
    outcome = ExecOutcome()
    started, clock = time.time(), time.monotonic()

    def phases(cluster: Cluster) -> None:
        outcome.cluster = {**cluster.describe(), "capabilities": cluster.capabilities.as_dict()}
        launched: list[NodeProcess] = []
        groups = TorchftGroups(cluster, run_dir.workers / "lighthouse.log") if config.torchft else None
        members = _membership(config, cluster, run_dir, echo, launched, groups)
        time0 = clock_for(config.schedule_clock, cluster.nodes[cluster.spec.placement[0]])
        live = scheduled.start(config.run, cluster, run_dir, 1.0, members, time0)  # a link schedule's time-0 changes
        capture = start_capture(cluster, run_dir.capture, config.run.capture)
        sampling = trace.start_sampling(config.run.trace, cluster.nodes, run_dir.path)  # TCP, for trace.json
        try:
            launched[:] = _launch(config, cluster, run_dir, echo, groups)
            outcome.launched_at = time.time()
            if time0 is not None:
                time0.start()
            outcome.procs = launched
            if on_cluster:
                on_cluster(cluster)
            outcome.status, outcome.reason, outcome.code = _watch(
                outcome.procs, config.timeout_s, scheduled.polling(cluster.check, live)
            )
        finally:
            for p in outcome.procs:  # a signal or an error cut the watch short: nothing may outlive it
                p.stop("netbench stopped")
            if groups is not None:
                outcome.cluster.update(groups.describe())
                groups.stop()
            _read_after(outcome.procs)
            trace.stop_sampling(sampling)
            stop_capture(capture, cluster, outcome)
            outcome.cluster.update(scheduled.describe(live))
            if live is not None:
                t0 = time0.t0 if time0 is not None else live.clock.poll() if live.clock is not None else None
                outcome.cluster["schedule"]["clock"] = {"from": config.schedule_clock, "time0_wall": t0}
        outcome.measured = True

    hold_cluster(config.run.cluster, names, outcome, "the command had finished", phases)
    wall = time.monotonic() - clock
    for p in outcome.procs:
        p.join_output()
    try:
        result = _collect(config, run_dir, names, outcome, started, wall, warnings)
        nodes = range(config.run.cluster.nodes)
        trace.write(
            config.run.trace,
            run_dir.path,
            {n: n for n in nodes},
            outcome.pcaps,
            {n: names.address(n) for n in outcome.pcaps},
        )
        return result
    finally:
        if not config.run.keep_pcap:
            shutil.rmtree(run_dir.capture, ignore_errors=True)


# ------------------------------------------------------------------------------------------ collect


def _capture_totals(path: Path, address: str) -> dict[str, float]:
    """Whole-run capture figures of one node: wire and payload bytes and packets each way, retransmitted bytes."""

    packets = parse_pcap(path, address)
    out: dict[str, float] = {}
    for direction in ("tx", "rx"):
        mine = packets[packets["direction"] == direction]
        out[f"capture_wire_{direction}_bytes"] = int(mine["wire_bytes"].sum())
        out[f"capture_payload_{direction}_bytes"] = int(mine["payload_bytes"].sum())
        out[f"capture_{direction}_packets"] = int(mine["frames"].sum())
        out[f"capture_retrans_{direction}_bytes"] = int(mine["retrans_bytes"].sum())
    return out


def _node_result(
    p: NodeProcess, pcap: Path | None, spans: list[tuple[int | None, float, float]] | None = None
) -> dict[str, Any]:
    """A node's figures; ``spans``: the schedule's windows (:func:`churn_wire.windows`), where it changed anything."""
    counters = (p.after - p.before).as_dict() if p.after is not None and p.before is not None else {}
    entry: dict[str, Any] = {
        "rank": p.rank,
        "node": p.node.index,
        "address": p.node.address,
        "exit_code": p.exit_code,
        "stopped_by": p.stopped_by,
        "wall_time_s": (p.ended or time.monotonic()) - p.started,
        "cpu_time_s": p.total_cpu_s,
        "leaves": p.leaves,
        "wire_tx_bytes": counters.get("tx_bytes"),
        "wire_rx_bytes": counters.get("rx_bytes"),
        "wire_tx_packets": counters.get("tx_packets"),
        "wire_rx_packets": counters.get("rx_packets"),
        "retransmissions": counters.get("retrans_segs"),
        "capture_wire_tx_bytes": None,
        "capture_wire_rx_bytes": None,
    }
    if pcap is not None and pcap.exists():
        try:
            entry.update(_capture_totals(pcap, p.node.address))
            if spans:
                entry.update(node_churn_wire(pcap, p.node.address, spans, p.joined_at))
        except Exception as exc:  # noqa: BLE001 - an unreadable capture leaves the counters' figures
            entry["capture_error"] = error_text(exc)
    return entry


def _declared(records: dict[int, list[dict]]) -> dict[str, Any] | None:
    """The payload a node declared (``netbench.declare_payload`` or a replicator), rank 0's first."""
    for rank in sorted(records):
        found = next((r for r in records[rank] if r.get("event") == "payload"), None)
        if found:
            return found
    return None


def _model_config(
    config: ExecConfig, run_dir: RunDir, records: dict[int, list[dict]]
) -> tuple[RunConfig, dict[str, Any] | None]:
    """The RunConfig the writer and the model see: the declared replicator on the declared shapes (saved as
    ``payload_shapes.json``, a shapes workload with no stand-in compute), or the defaults when nothing was declared."""

    measured = max((sum(1 for r in recs if r.get("event") == "step") for recs in records.values()), default=0)
    update: dict[str, Any] = {"steps": max(1, measured - config.run.warmup_steps)}
    declared = _declared(records)
    if declared:
        try:
            shapes_path = run_dir.payload_shapes
            safe_files.write_text(shapes_path, json.dumps({"shapes": declared["shapes"]}, indent=1) + "\n")
            update["replicator"] = ReplicatorConfig.model_validate(declared["replicator"])
            update["workload"] = WorkloadConfig(kind="shapes", shapes=str(shapes_path), compute_ms=0.0)
        except Exception as exc:  # noqa: BLE001 - a bad declaration costs the prediction, never the measurement
            declared = {**declared, "error": error_text(exc)}
    return config.run.model_copy(update=update), declared


def _fill_payload(records: dict[int, list[dict]], model_config: RunConfig, declared: dict[str, Any] | None) -> None:
    """Steps that did not report their payload (no replicator in them) get the declared one, else NaN (unknown)."""
    decl = None
    if declared and "error" not in declared:
        decl = declared_payload(model_config.workload.shape_list(), model_config.replicator, model_config.cluster.nodes)
    for recs in records.values():
        for r in recs:
            if r.get("event") == "step" and r.get(Col.PAYLOAD_BYTES) is None:
                r[Col.PAYLOAD_BYTES] = decl.bytes_on(r[Col.STEP] + 1) if decl else float("nan")


def _collect(
    config: ExecConfig,
    run_dir: RunDir,
    names: RunNames,
    outcome: ExecOutcome,
    started: float,
    wall: float,
    warnings: list[str],
) -> ExecResult:
    """run.json and steps.csv through the run writer, with the per-node results under ``exec``."""
    applied = outcome.cluster.get("schedule", {}).get("applied", [])
    spans = windows(applied, outcome.launched_at or started, time.time()) if applied else None
    nodes = [_node_result(p, outcome.pcaps.get(p.node.index), spans) for p in outcome.procs]
    placement = config.run.cluster.placement
    pcaps = {placement.index(node): path for node, path in outcome.pcaps.items()}  # a node's capture goes with its rank
    records = run_dir.all_records(config.run.cluster.nodes)
    model_config, declared = _model_config(config, run_dir, records)
    usable = declared is not None and "error" not in declared
    _fill_payload(records, model_config, declared)
    code = outcome.exit_status()
    extra = {
        "launcher": "netbench exec",
        "exec": {
            "command": list(config.command),
            "exit_code": code,
            "wall_time_s": wall,
            "timeout_s": config.timeout_s,
            "launched_wall": outcome.launched_at,
            "nodes": nodes,
            "payload": declared,
        },
    }
    summary, run_json = results.write_run(
        run_dir,
        results.RunOutput(
            config=model_config,
            records=records,
            run_id=names.run_id,
            status=outcome.status,
            reason=outcome.reason,
            started=started,
            warnings=warnings,
            cluster=outcome.cluster,
            extra=extra,
            pcaps=pcaps,
            addresses={rank: names.address(placement[rank]) for rank in pcaps},
            capture={"dropped_by_port": outcome.capture_drops},
            predict=usable,
        ),
    )
    summary["replicator"] = model_config.replicator.name if usable else "none"
    run_json["summary"] = summary
    results.write_run_json(run_dir.run_json, run_json)
    return ExecResult(run_dir.path, names.run_id, outcome.status, outcome.reason, code, wall, nodes, summary)
