"""`netbench run` in phases: prepare, build, capture, spawn, watch, tear down, collect.

Data flows one way: RunConfig -> Cluster (+ capture) -> workers (JSONL records) -> steps.csv,
run.json, summary. As in Mininet's build/start/stop, each phase is one function; what the run
learns goes into one :class:`RunOutcome`, so however far it got, ``collect`` writes the same run
directory from it. Building and tearing down the cluster around the middle phases is
:func:`~netbench.orchestrator.phases.hold_cluster`, shared with `netbench exec`:

    prepare    resolve the config (compression, automatic buckets), check this host can hold it,
               calibrate, dilate, name the run, make its RunDir: nothing is built yet, so bad
               input fails here
    build      the Cluster (namespaces, shaped links, delay line), then intra-node shaping
    capture    tcpdump on every switch port
    spawn      a worker per rank in its node's namespace
    watch      until every worker is done, or one fails or stalls (the reason names the rank);
               then the fidelity verdict and the capture's files, whatever happened
    tear down  ``cluster.down()``: every process, qdisc, link and namespace, on Ctrl-C/SIGTERM too
    collect    steps.csv, run.json and the summary from what was measured; pcaps removed unless kept

A failing run keeps every step measured so far (workers flush each record) and still writes both
files, with ``status: failed`` and the reason naming the rank.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench import safe_files
from netbench.calibrate.host import host_cpus
from netbench.calibrate.hostcache import HostCalibration, host_calibration
from netbench.capture.switches import SwitchCaptures
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.trunks import TrunkCounters
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.forked_workers import ForkedWorker, Launcher
from netbench.orchestrator.host_fit import check_host
from netbench.orchestrator.phases import Outcome, hold_cluster, leftover_warnings, start_capture, stop_capture
from netbench.orchestrator.prediction import period_warnings, workload_shapes
from netbench.orchestrator.run import churn, results, scheduled
from netbench.orchestrator.run import dilation as dil
from netbench.orchestrator.run import fidelity as fid
from netbench.orchestrator.run.resolve import check_payload, resolve
from netbench.orchestrator.run.sharding import INTRA_IFACE, shape_intra
from netbench.orchestrator.run.timeouts import FLOOR_S, collective_timeout_s, setup_timeout_s, stall_limit_s
from netbench.orchestrator.run.watch import Limits, WorkerFailure, wait_for_workers
from netbench.rundir.layout import RunDir
from netbench.trace import hooks as trace
from netbench.worker.spec import WorkerSpec

if TYPE_CHECKING:
    from netbench.orchestrator.cluster_reuse import ClusterReuse

Progress = Callable[[int, int], None]  # (steps done by the slowest node, total steps)


@dataclass
class RunResult:
    """What `netbench run` hands back: where the run directory is, how the run ended, its summary and run.json."""

    run_dir: Path
    status: str
    reason: str | None
    summary: dict[str, Any]
    run_json: dict[str, Any] = field(repr=False, default_factory=dict)


# ----------------------------------------------------------------------------- what the phases share


@dataclass(frozen=True)
class RunPlan:
    """What ``prepare`` settles before anything is created; every later phase reads it."""

    config: RunConfig  # as asked: results are reported for it
    dilated: RunConfig  # what runs: time dilation k (netbench.orchestrator.run.dilation) slows links and timeouts
    dilation: float
    names: RunNames
    run_dir: RunDir
    calibration: HostCalibration  # the model constants the prediction uses
    timeout_s: float  # the workers' collective timeout
    setup_timeout_s: float  # how long the workers may take to join the process group
    warnings: list[str]
    started: float
    launcher: Launcher  # the fork server that starts the workers (a sweep's, held across its runs, or the run's own)
    reuse: ClusterReuse | None = None  # a sweep's cluster, held across its runs
    exchange_timeout_s: float | None = None  # through churn: one of torchft's waits on peers (churn.exchange_timeout_s)

    @property
    def world_size(self) -> int:
        return self.dilated.cluster.nodes * self.dilated.gpus_per_node

    def node_of(self, rank: int) -> int:
        """The node that runs ``rank``."""
        return self.config.cluster.placement[rank // self.config.gpus_per_node]


@dataclass
class RunOutcome(Outcome):
    """A `netbench run`'s outcome: also the run's verdict on its own emulation."""

    fidelity: dict[str, Any] | None = None


# ------------------------------------------------------------------------------------------ the run


def run(config: RunConfig, *args: Any, **kwargs: Any) -> RunResult:
    """Run one configuration end to end: :func:`measure` (its arguments), then write the run directory."""
    return measure(config, *args, **kwargs).collect()


@dataclass
class Measured:
    """A run whose workers are done: what it measured, and its run directory still to write (:meth:`collect`)."""

    plan: RunPlan
    outcome: RunOutcome

    def collect(self) -> RunResult:
        return collect(self.plan, self.outcome)


def measure(
    config: RunConfig,
    progress: Progress | None = None,
    on_cluster: Callable[[Cluster], None] | None = None,
    calibration: HostCalibration | None = None,
    dilation: float | None = 1.0,
    reuse: ClusterReuse | None = None,
    launcher: Launcher | None = None,
) -> Measured:
    """Run one configuration up to writing its run directory (a sweep writes one point's while its next point
    starts). ``on_cluster`` lets tests inject faults once workers start.

    ``calibration``: the model constants its prediction uses (default: this host's, measured
    first when the cache has none -- before anything is built). ``dilation``: time dilation
    factor k (:mod:`netbench.orchestrator.run.dilation`; None: auto, from the run's prediction); results are
    reported for ``config``. ``reuse``: a sweep's held cluster (:mod:`netbench.orchestrator.cluster_reuse`), used
    where the run shares its network. ``launcher``: a sweep's worker fork server (default: the held cluster's, else
    one of the run's own, whose imports overlap the cluster's build).
    """
    with contextlib.ExitStack() as own:
        if launcher is None:
            launcher = reuse.launcher if reuse is not None else own.enter_context(Launcher())
        plan = prepare(config, calibration, dilation, launcher, reuse)
        launcher.start_server(plan.dilated.threads)
        outcome = RunOutcome()
        train(plan, outcome, progress, on_cluster)
    return Measured(plan, outcome)


def prepare(
    config: RunConfig,
    calibration: HostCalibration | None,
    dilation: float | None,
    launcher: Launcher,
    reuse: ClusterReuse | None = None,
) -> RunPlan:
    """Resolve the config's intents, check this host can hold it, calibrate (when the cache has none), dilate, name
    the run and make its folder; nothing is built yet. HostUnfit (a ValueError) before anything is created."""
    config = resolve(config)  # --compression and --bucket-mb auto, for library callers as for the CLI
    churn.check_churn(config)  # nodes that leave and join: a replicator that trains through it
    check_payload(config)  # settings the model's shapes rule out (SettingError, a ValueError)
    check_host(config)
    calibration = calibration or host_calibration(replicators=(config.replicator,))
    dilation = dil.resolve(dilation, config, calibration.calibration, host_cpus())
    dilated = dil.dilate(config, dilation)
    names = reuse.names_for(dilated.cluster) if reuse is not None else RunNames.new()
    run_dir = RunDir.create(dilated.out_dir, dilated.replicator.name, names.run_id)
    nodes = config.cluster.nodes
    shapes = workload_shapes(config.workload, nodes)
    periods = period_warnings(config.replicator, nodes, config.steps, shapes, config.warmup_steps)
    warnings = leftover_warnings() + periods
    return RunPlan(
        config=config,
        dilated=dilated,
        dilation=dilation,
        names=names,
        run_dir=run_dir,
        calibration=calibration,
        timeout_s=collective_timeout_s(dilated, dilation, host_cpus()),
        setup_timeout_s=setup_timeout_s(dilated, host_cpus()),
        warnings=warnings,
        started=time.time(),
        launcher=launcher,
        reuse=reuse,
        exchange_timeout_s=(
            churn.exchange_timeout_s(config, dilated, dilation, host_cpus())
            if churn.trains_through_churn(config)
            else None
        ),
    )


def train(
    plan: RunPlan, outcome: RunOutcome, progress: Progress | None, on_cluster: Callable[[Cluster], None] | None
) -> None:
    """Build, capture, spawn, watch, tear down (:func:`hold_cluster`). Never raises: ``outcome`` says how far it got and
    why it stopped.
    """

    def phases(cluster: Cluster) -> None:
        build(plan, cluster, outcome)
        procs: list[ForkedWorker] = []
        lighthouse, members = None, None
        if churn.trains_through_churn(plan.config):  # a quorum per step or sync, a lighthouse to form it
            lighthouse = churn.Lighthouse(  # a node heard but not asking is in one of its bounded waits
                cluster,
                plan.dilation,
                plan.run_dir.workers / "lighthouse.log",
                join_timeout_s=(plan.exchange_timeout_s or plan.timeout_s) / plan.dilation,
            )
            nice = outcome.cluster.get("worker_nice", 0)
            server = lambda: plan.launcher.start_server(plan.dilated.threads)  # noqa: E731
            members = churn.worker_membership(plan.run_dir, cluster, procs, server, nice)
        # a link schedule's time-0 changes
        live = scheduled.start(plan.config, cluster, plan.run_dir, plan.dilation, members)
        capture = start_capture(cluster, plan.run_dir.capture, plan.dilated.capture)
        # TCP, for trace.json
        sampling = trace.start_sampling(plan.dilated.trace, cluster.nodes, plan.run_dir.path, plan.dilation)
        try:
            procs[:] = spawn(plan, cluster, outcome.cluster.get("worker_nice", 0), lighthouse)
            if on_cluster:
                on_cluster(cluster)
            churned = (members.away, members.waiting) if members is not None else (frozenset(), frozenset)
            watch(plan, cluster, procs, capture, outcome, progress, scheduled.polling(cluster.check, live), churned)
            if plan.reuse is not None:  # the next run on the cluster waits for them; else the teardown ends them
                plan.reuse.leaving(procs)
        finally:
            trace.stop_sampling(sampling)
            outcome.cluster.update(scheduled.describe(live))
            outcome.cluster.update(churn.describe(members, lighthouse))
            if lighthouse is not None:
                for p in procs:  # the workers first: a worker that lost its lighthouse waits for it
                    p.kill()
                lighthouse.stop()

    if plan.reuse is not None:
        plan.reuse.hold(plan.dilated.cluster, plan.names, outcome, "every step was measured", phases)
    else:
        hold_cluster(plan.dilated.cluster, plan.names, outcome, "every step was measured", phases)


def build(plan: RunPlan, cluster: Cluster, outcome: RunOutcome) -> None:
    """With the cluster up: record what was built, and shape the intra-node link of nodes with several workers."""
    outcome.cluster = {**cluster.describe(), "capabilities": cluster.capabilities.as_dict()}
    nice = worker_nice(list(cluster.helper_pids.values()))
    if nice:
        outcome.cluster["worker_nice"] = nice
    if plan.dilated.gpus_per_node > 1:
        outcome.cluster["intra_node"] = shape_intra(cluster.nodes, plan.dilated.intra_bw_bps)


WORKER_NICE = 10  # a user namespace may lower a process, never raise one: at +10 a worker weighs 1/9 of the delay line


def worker_nice(delay_line_pids: list[int]) -> int:
    """How far the workers lower their priority: WORKER_NICE where some delay line (one per switch) runs without a
    raised one.

    The delay line must run the moment a packet is due. As root it takes SCHED_FIFO (or nice -10); in a user
    namespace it can do neither, only ask for a short slice, and a rootless pipelined run found it waiting 13-15 % of
    the run for a core behind the workers (4-5 % with the short slice, 2 % with the workers at +10 as well, no late
    release). Lowering the workers is allowed everywhere.
    """
    for pid in delay_line_pids:
        try:
            raised = os.sched_getscheduler(pid) != os.SCHED_OTHER or os.getpriority(os.PRIO_PROCESS, pid) < 0
        except OSError:  # gone already: the run fails on its own, naming the delay line
            continue
        if not raised:
            return WORKER_NICE
    return 0


def spawn(
    plan: RunPlan, cluster: Cluster, nice: int = 0, lighthouse: churn.Lighthouse | None = None
) -> list[ForkedWorker]:
    """A worker per rank in its node's namespace, forked by the run's fork server (torch imported once): G per node,
    rank = node * G + local rank; spec and log in workers/. ``nice``: how far each worker lowers its priority before
    it starts (:func:`worker_nice`); ``lighthouse``: where the workers of a run through churn form their quorum."""
    config = plan.dilated
    specs = _worker_specs(
        config,
        cluster,
        plan.run_dir,
        (plan.timeout_s, plan.setup_timeout_s),
        plan.dilation,
        lighthouse,
        plan.exchange_timeout_s or plan.timeout_s,
    )
    placement = cluster.spec.placement
    workers = [
        (cluster.nodes[placement[rank // config.gpus_per_node]].netns, path, plan.run_dir.log_path(rank))
        for rank, path in enumerate(specs)
    ]
    return plan.launcher.start_workers(workers, config.threads, nice)


def _worker_specs(
    config: RunConfig,
    cluster: Cluster,
    run_dir: RunDir,
    timeouts: tuple[float, float],
    dilation: float,
    lighthouse: churn.Lighthouse | None = None,
    exchange_s: float = 0.0,
) -> list[Path]:
    """One spec file per worker (G = 1: one per node, rank r on node ``placement[r]``); ``timeouts``: (collectives,
    joining the group); ``dilation`` paces their CPU phases. They meet at the run's rendezvous file, not at a port;
    with a ``lighthouse`` each node is a replica group of its own, in the quorum the lighthouse forms.
    """
    timeout_s, setup_s = timeouts
    paths = []
    g, layout = config.gpus_per_node, config.shard_layout()
    placement = cluster.spec.placement
    for slot, index in enumerate(placement):
        node = cluster.nodes[index]
        for local in range(g):
            rank = slot * g + local
            spec = WorkerSpec(
                rank=rank,
                world_size=len(cluster.nodes) * g,
                iface=node.iface,
                steps=config.steps,
                warmup_steps=config.warmup_steps,
                replicator=config.replicator,
                workload=config.workload,
                out_path=str(run_dir.records_path(rank)),
                timeout_s=timeout_s,
                setup_timeout_s=setup_s,
                threads=config.threads,
                cpu_dilation=dilation,
                compute_scale=config.cluster.topology.nodes[index].compute_scale,
                compute_phases=scheduled.compute_phases(config, index, dilation),
                start_gate=str(run_dir.start_gate),
                **(
                    {"quorum": churn.quorum_for(lighthouse.url, index, node.address, exchange_s)}
                    if lighthouse is not None
                    else {"rendezvous_file": str(run_dir.rendezvous)}
                ),
                **({"gpus_per_node": g, "intra_iface": INTRA_IFACE} if g > 1 else {}),
                **({"shard_groups": layout.shards} if layout is not None else {}),
                **({"shard_weights": True} if config.shard != "none" else {}),
            )
            path = run_dir.spec_path(rank)
            safe_files.write_text(path, spec.model_dump_json(indent=2))
            paths.append(path)
    return paths


def watch(
    plan: RunPlan,
    cluster: Cluster,
    procs: list[subprocess.Popen],
    capture: SwitchCaptures | None,
    outcome: RunOutcome,
    progress: Progress | None,
    poll: Callable[[], None] | None = None,
    churned: tuple[Collection[int], Callable[[], Collection[int]]] = (frozenset(), frozenset),
) -> None:
    """Until every worker is done, or one fails or stalls; then, whatever happened, the fidelity verdict and the
    pcaps. ``churned``: the ranks whose node has left, and those whose node joined again and has not stepped yet
    (:func:`~netbench.orchestrator.run.watch.wait_for_workers`).
    """
    helpers = cluster.helper_pids  # every switch's delay line
    monitor = fid.FidelityMonitor([p.pid for p in procs], host_cpus(), helpers, dilation=plan.dilation)

    trunks = TrunkCounters(cluster.fabric) if cluster.fabric.graph.trunks else None

    def watched(done: int, total: int) -> None:
        monitor.on_progress(done)
        if trunks is not None:
            trunks.sample(done)
        if progress:
            progress(done, total)

    def joined() -> None:
        """Every worker has joined: the trunks' counters from here on, then the steps may begin (once the sweep's last
        point's results are written: nothing of it shares the CPU with this point's steps)."""
        if plan.reuse is not None:
            plan.reuse.await_writing()
        if trunks is not None:
            trunks.restart()
        safe_files.write_text(plan.run_dir.start_gate, "")

    total = plan.dilated.warmup_steps + plan.dilated.steps
    try:
        wait_for_workers(
            procs,
            plan.run_dir,
            total,
            Limits(join_limit_s=plan.setup_timeout_s + FLOOR_S, step_limit_s=_step_limit_s(plan)),
            plan.node_of,
            progress=watched,
            poll=poll or cluster.check,
            joined=joined,
            away=churned[0],
            rejoining=churned[1],
        )
    except WorkerFailure as exc:
        outcome.fail(str(exc))
    finally:
        outcome.fidelity = {**_fidelity(monitor, cluster), "dilation": plan.dilation}
        if trunks is not None:
            trunks.write(plan.run_dir.trunks_csv)
        stop_capture(capture, cluster, outcome)
    outcome.measured = True


def _fidelity(monitor: fid.FidelityMonitor, cluster: Cluster) -> dict[str, Any]:
    """The fidelity verdict from the monitor's samples, the delay line's counters and the shapers' statistics."""
    line = cluster.impairment.stats()
    qdiscs = fid.qdisc_stats([*(s.netns for s in cluster.switches), *(n.netns for n in cluster.nodes)])
    return fid.judge(monitor.observed(line, qdiscs))


def collect(plan: RunPlan, outcome: RunOutcome) -> RunResult:
    """steps.csv, run.json and the summary from what was measured, whatever happened; the pcaps go unless kept."""
    try:
        result = _write(plan, outcome)
        g, placement = plan.config.gpus_per_node, plan.config.cluster.placement
        trace.write(
            plan.config.trace,
            plan.run_dir.path,
            {r: placement[r // g] for r in range(plan.world_size)},
            outcome.pcaps,
            {node: plan.names.address(node) for node in outcome.pcaps},
        )
        return result
    finally:
        if not plan.config.keep_pcap:
            shutil.rmtree(plan.run_dir.capture, ignore_errors=True)


def _write(plan: RunPlan, outcome: RunOutcome) -> RunResult:
    """The run directory through the run writer, for the configuration as asked (durations divided by the dilation)."""
    config, k, g = plan.config, plan.dilation, plan.config.gpus_per_node
    records = plan.run_dir.all_records(plan.world_size)
    slot = {node: s for s, node in enumerate(config.cluster.placement)}
    pcaps = {
        slot[node] * g: path for node, path in outcome.pcaps.items()
    }  # a node's capture goes with its first worker's steps
    fidelity = outcome.fidelity
    if k != 1.0:  # the workers paced their CPU phases to k times their CPU time: every duration is divided by k
        records = dil.undilate_records(records, k)
        if fidelity is not None:
            fidelity["cpu_stretch"] = dil.cpu_stretch(
                fidelity.get("observed"), k
            )  # informs: the wait beside the pacing
    summary, run_json = results.write_run(
        plan.run_dir,
        results.RunOutput(
            config=config,
            records=records,
            run_id=plan.names.run_id,
            status=outcome.status,
            reason=outcome.reason,
            started=plan.started,
            warnings=plan.warnings,
            cluster=outcome.cluster,
            extra={"collective_timeout_s": plan.timeout_s, "launcher": "netbench run", "dilation": k},
            pcaps=pcaps,
            addresses={rank: plan.names.address(config.cluster.placement[rank // g]) for rank in pcaps},
            capture={"dropped_by_port": outcome.capture_drops},
            calibration=plan.calibration,
            fidelity=fidelity,
            trunks_csv=plan.run_dir.trunks_csv,
            cpus=max(1, round(host_cpus() * k)) if k != 1.0 else None,
        ),
    )  # dilated: each node has k times the CPU per second
    return RunResult(plan.run_dir.path, outcome.status, outcome.reason, summary, run_json)


def _step_limit_s(plan: RunPlan) -> float:
    """How long the watcher waits for any step before it calls the run stalled: after a worker's own bound, which
    names its error. Through churn that bound is the quorum's (its loss, :data:`churn.LOST_AFTER_EXCHANGES`
    exchange timeouts), which can be longer than two collective timeouts."""
    limit = stall_limit_s(plan.timeout_s)
    if plan.exchange_timeout_s is not None:
        limit = max(limit, churn.LOST_AFTER_EXCHANGES * plan.exchange_timeout_s + FLOOR_S)
    return limit
