"""The per-node training loop: join the group, then compute, replicate and record every step.

Timing boundaries of a step (one JSONL record each):

* ``t_start`` / ``t_end``: ``time.time()`` wall clock, to line steps up with packet captures;
* ``compute_s``: the workload's forward+backward (or the shapes kind's stand-in); ``compute_scale``:
  how many times as long this node's CPU phases were made to take (a straggler above 1, :mod:`netbench.pacing`);
* ``compress_s, comm_s, decode_s, apply_s, payload_bytes, collectives``: the replicator's own
  ``StepStats`` for its synchronisation and optimizer step; ``compress_cpu_s, decode_cpu_s``: the
  thread CPU time of its encode and decode (the fidelity check compares them with the calibration);
* ``step_s``: compute plus replicator step, by the monotonic clock;
* ``spans``: when each phase and collective ran, in seconds from the step's start
  (:mod:`netbench.trace.spans`; the run's trace.json is built from them);
* ``tx_bytes, rx_bytes, tx_packets, rx_packets``: interface counter deltas, and ``retrans_segs``,
  the namespace's TCP retransmissions (loss on the link shows here). The reading that ends
  one step begins the next, so the deltas tile the run: their sum is exactly the interface's
  traffic from the first step's start to the last step's end, even when a faster peer's next
  step lands between two of this rank's steps. The last step's record also carries ``tail_tx_bytes`` and
  ``tail_rx_bytes``: what the interface moved after it ended, until a barrier saw every rank done, so the run's
  counters add up to every byte its steps sent.

Under ``netbench run`` the worker waits, between joining the process group and step 0, for the orchestrator's start
gate (a file it creates once every worker has joined and it has read the trunks' counters), so the rendezvous's
traffic stays out of the trunks' bytes per step.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from netbench import pacing, signals
from netbench.counters import IfaceCounters, read_counters
from netbench.rundir.drift import sketch_text
from netbench.rundir.records import RecordWriter
from netbench.rundir.steps_schema import Col, step_record, step_row
from netbench.trace import spans
from netbench.validation import error_text
from netbench.worker.spec import ResolvedSpec, WorkerSpec
from netbench.worker.start import start_event, wait_for_gate
from netbench.workloads import Workload, build_workload
from netbench.workloads.config import BACKWARD_OVERLAP_WORKLOADS  # one backward per step: a hook's gradient is final

# the replicator's StepStats, field for column
STAT_FIELDS = (Col.COMPRESS_S, Col.COMM_S, Col.DECODE_S, Col.APPLY_S, Col.PAYLOAD_BYTES, Col.COLLECTIVES)
# thread CPU time of the codec phases: the fidelity check's codec speed
CPU_FIELDS = (Col.COMPRESS_CPU_S, Col.DECODE_CPU_S)
COUNTER_FIELDS = (Col.TX_BYTES, Col.RX_BYTES, Col.TX_PACKETS, Col.RX_PACKETS, Col.RETRANS_SEGS)
SUMMED_FIELDS = (Col.COMPUTE_S, *STAT_FIELDS, Col.STEP_S, *COUNTER_FIELDS)


class Terminated(Exception):
    """SIGTERM arrived: raised from the handler so the error event is still written."""


def _on_sigterm(signum: int, _frame: object) -> None:
    raise Terminated(f"terminated by signal {signum}")


class WorkerRun:
    """One worker's lifetime: setup, the barrier, the steps, and the done event."""

    def __init__(self, resolved: ResolvedSpec, writer: RecordWriter) -> None:
        self.resolved = resolved
        self.spec = resolved.spec
        self.writer = writer
        self.step = -1  # the step in progress, for the error event
        self.measured: list[dict[str, Any]] = []
        self.backward = None  # set in _setup when buckets launch from backward
        self.measuring_since: float | None = None  # wall time the first measured step began (a schedule's time 0)

    def run(self) -> None:
        """Everything up to the done event; any failure propagates to :func:`run_worker`."""
        workload, replicator = self._setup()
        self.replicator = replicator
        wait_for_gate(self.spec.start_gate, self.spec.join_timeout_s)
        dist.barrier()  # step 0 starts together on every rank
        before = read_counters(self.spec.iface)
        self.intra_before = read_counters(self.spec.intra_iface) if self.spec.intra_iface else None
        for step in range(self.spec.total_steps):
            self.step = step
            record, before = self._one_step(step, workload, replicator, before)
            if step == self.spec.total_steps - 1:
                record.update(self._tail(before))
            self.writer.write(record)
            if not record[Col.WARMUP]:
                self.measured.append(record)
        self.writer.write(self._done_record())

    def _setup(self) -> tuple[Workload, Any]:
        """Threads, interface, workload, process group and replicator; then the start event."""
        spec = self.spec
        torch.set_num_threads(spec.threads)
        pacing.set_factor(spec.cpu_dilation)
        pacing.set_compute_scale(spec.compute_scale)
        read_counters(spec.iface)  # a missing interface fails here, before the rendezvous
        os.environ["GLOO_SOCKET_IFNAME"] = spec.iface
        workload = build_workload(spec.workload, spec.rank, spec.world_size)
        if self.resolved.init_method == "env":
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = spec.master_addr, str(spec.master_port)
        joining = timedelta(seconds=spec.join_timeout_s)
        meeting = self.resolved.store_file  # workers on one host meet at a file; under torchrun, at its store
        if meeting is not None:
            store = dist.FileStore(str(meeting), spec.world_size)
            store.set_timeout(joining)  # every wait of the rendezvous within the join limit, as a URL's store has
            joined: dict[str, Any] = {"store": store}
        else:
            joined = {"init_method": self.resolved.url}
        dist.init_process_group("gloo", **joined, rank=spec.rank, world_size=spec.world_size, timeout=joining)
        collective_timeout(spec.timeout_s)
        # Imported here so that a replicator that fails to import becomes an error event.
        from netbench.replicators.build import build_replicator  # late: a worker loads only what its run uses

        names = [s.name for s in workload.param_shapes()]  # as the model's shape list names them
        if spec.sharded:
            from netbench.worker.sharding import sharded_replicator  # late: a worker loads only what its run uses

            replicator = sharded_replicator(workload, spec, build_replicator, names)
        else:
            replicator = build_replicator(workload.parameters(), spec.replicator, names=names)
        self.backward = None  # replicators/backward.py: buckets launched from backward's hooks
        if (
            spec.replicator.overlap_backward
            and spec.workload.kind in BACKWARD_OVERLAP_WORKLOADS
            and hasattr(replicator, "attach_backward_hooks")
        ):
            self.backward = replicator.attach_backward_hooks()
        self.writer.write(start_event(spec, workload, self.resolved.url, self.backward is not None))
        return workload, replicator

    def _one_step(
        self, step: int, workload: Workload, replicator: Any, before: IfaceCounters
    ) -> tuple[dict[str, Any], IfaceCounters]:
        """Run and measure one step; returns its record and the counter reading it ended on."""
        t_start, began, began_cpu = time.time(), time.perf_counter(), time.thread_time()
        self._follow_schedule(step, t_start)
        spans.begin(began)  # the step's timeline, placed on the wall clock by t_start
        loss = workload.compute_step()
        pacing.pace(time.perf_counter() - began, time.thread_time() - began_cpu)  # a real model's CPU, under dilation
        computed = time.perf_counter()
        spans.add("compute", began, computed)
        stats = replicator.step()
        ended, t_end = time.perf_counter(), time.time()
        timeline = spans.take()
        after = read_counters(self.spec.iface)
        # Codec work that ran inside backward's hooks is booked in compress_s/decode_s, not compute_s.
        hooked = self.backward.last_hooked_s if self.backward is not None else 0.0
        if self.spec.sharded:  # a sharded replicator's StepStats: FSDP's gathers and reduce-scatters, booked as intra_*
            hooked += stats.intra_in_compute_s
        values: dict[str, Any] = {
            Col.RANK: self.spec.rank,
            Col.STEP: step,
            Col.WARMUP: step < self.spec.warmup_steps,
            Col.T_START: t_start,
            Col.T_END: t_end,
            Col.COMPUTE_S: computed - began - hooked,
            Col.COMPUTE_SCALE: pacing.compute_scale(),  # above 1: a straggler's phases, stretched (netbench.pacing)
            Col.STEP_S: ended - began,
            Col.LOSS: loss,
            **{name: getattr(stats, name) for name in (*STAT_FIELDS, *CPU_FIELDS)},
            **(after - before).as_dict(),
            Col.REPLICA_SKETCH: sketch_text(torch.as_tensor(stats.sketch).tolist()),
        }
        record = step_record("worker", values, spans=timeline)
        if self.spec.sharded:
            from netbench.worker.sharding import intra_fields  # late: a worker loads only what its run uses

            record.update(step_row("sharded", intra_fields(self, stats, (began, computed))))
        return record, after

    def _tail(self, before: IfaceCounters) -> dict[str, Any]:
        """What the interface moved after the last step ended until every rank had ended its steps (a barrier: then
        every message of every step has arrived). A rank that finishes first may still be sending its last messages
        to a slow hop; the counters of its steps alone would miss them. Empty if the barrier fails (a peer gone after
        its last step): the steps are recorded all the same."""
        try:
            dist.barrier()
        except RuntimeError as exc:  # gloo's errors (a peer gone, a timeout): the measured steps stand without it
            print(f"netbench worker: no tail after the last step: {exc}", file=sys.stderr)
            return {}
        moved = read_counters(self.spec.iface) - before
        return {Col.TAIL_TX_BYTES: moved.tx_bytes, Col.TAIL_RX_BYTES: moved.rx_bytes}

    def _follow_schedule(self, step: int, t_start: float) -> None:
        """A schedule's straggler phases: the compute scale in force from this step on (netbench.pacing.scale_at)."""
        if not self.spec.compute_phases or step < self.spec.warmup_steps:
            return
        if self.measuring_since is None:
            self.measuring_since = t_start
        pacing.set_compute_scale(
            pacing.scale_at(self.spec.compute_phases, t_start - self.measuring_since, self.spec.compute_scale)
        )

    def _done_record(self) -> dict[str, Any]:
        """Totals over the measured (non-warmup) steps."""
        spec, steps = self.spec, self.measured
        done: dict[str, Any] = {
            "event": "done",
            "rank": spec.rank,
            "steps": len(steps),
            "warmup_steps": spec.warmup_steps,
            "t_start": steps[0][Col.T_START],
            "t_end": steps[-1][Col.T_END],
            "wall_s": steps[-1][Col.T_END] - steps[0][Col.T_START],
        }
        done.update({name.value: sum(r[name] for r in steps) for name in SUMMED_FIELDS})
        done["mean_step_s"] = done[Col.STEP_S] / len(steps)
        done["final_loss"] = steps[-1][Col.LOSS]
        if spec.sharded:
            from netbench.worker.sharding import done_fields  # late: a worker loads only what its run uses

            done.update(done_fields(self))
        return done


def collective_timeout(timeout_s: float) -> None:
    """The default group's timeout from here on: joining it may take longer (every peer's start and handshake) than a
    collective may. Where torch cannot change it, the joining limit stays in force."""
    setter = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
    if setter is not None:
        setter(timedelta(seconds=timeout_s))


def run_worker(resolved: ResolvedSpec, after_steps: Callable[[], None] | None = None) -> int:
    """Run one worker to completion; returns the exit code (0: done event, 1: error event written).

    ``after_steps`` runs once the done event is written, while the process group is still up:
    `netbench worker` gathers every rank's records to rank 0 there. If it fails, the run fails.
    """
    spec = resolved.spec
    with RecordWriter(spec.output_file(), go_on=_joins_again(spec)) as writer:
        worker: Any = WorkerRun(resolved, writer)
        if spec.quorum is not None:  # nodes may leave and join: torchft's quorum (late: only such runs load it)
            from netbench.worker.fault_tolerant import FaultTolerantRun  # late: torchft loads only for churn

            worker = FaultTolerantRun(resolved, writer)
        try:
            with signals.handled((signal.SIGTERM,), _on_sigterm):  # until the error event is written
                try:
                    worker.run()
                    if after_steps is not None:
                        after_steps()
                    code = 0
                except BaseException as exc:  # noqa: BLE001 - every failure, SIGTERM and Ctrl-C included, leaves an error event
                    traceback.print_exc(file=sys.stderr)
                    writer.write(
                        {
                            "event": "error",
                            "rank": spec.rank,
                            "step": worker.step if worker.step >= 0 else None,
                            "t": time.time(),
                            "error": error_text(exc),  # the class goes to the log, with the traceback
                        }
                    )
                    code = 1
        finally:
            if hasattr(worker, "close"):
                worker.close()
            _leave_group()
    return code


def _leave_group() -> None:
    """destroy_process_group if one exists; a failing teardown must not mask the run's outcome."""
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001
        print(f"netbench worker: destroy_process_group failed: {exc}", file=sys.stderr)


def _joins_again(spec: WorkerSpec) -> bool:
    """A node that trains through churn and joins again goes on writing the record file its earlier worker wrote."""
    return spec.quorum is not None and spec.output_file().exists()
