"""The per-node training loop: join the group, then compute, replicate and record every step.

Timing boundaries per step (one JSONL record each):

* ``t_start`` / ``t_end``: ``time.time()`` wall clock, to line steps up with packet captures;
* ``compute_s``: the workload's forward+backward (or the shapes kind's stand-in);
* ``compress_s, comm_s, decode_s, apply_s, payload_bytes, collectives``: the replicator's own
  ``StepStats`` for its synchronisation and optimizer step;
* ``step_s``: both together, by the monotonic clock;
* ``tx_bytes, rx_bytes, tx_packets, rx_packets``: interface counter deltas. The reading that ends
  one step begins the next, so the deltas tile the run: their sum is exactly the interface's
  traffic from the first step's start to the last step's end, even when a faster peer's next
  step lands between two of this rank's steps.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from netbench.worker.counters import IfaceCounters, read_counters
from netbench.worker.records import RecordWriter
from netbench.worker.spec import ResolvedSpec
from netbench.workloads import build_workload

STAT_FIELDS = ("compress_s", "comm_s", "decode_s", "apply_s", "payload_bytes", "collectives")
SUMMED_FIELDS = ("compute_s", *STAT_FIELDS, "step_s", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets")


class Terminated(Exception):
    """SIGTERM arrived: turned into an exception so the error event is still written."""


def _on_sigterm(signum: int, _frame: object) -> None:
    raise Terminated(f"terminated by signal {signum}")


def _step_record(rank: int, step: int, warmup: bool, loss: float, times: tuple[float, float, float, float],
                 stats: Any, delta: IfaceCounters) -> dict[str, Any]:
    """One step's JSONL record (see the module docstring for what each field measures)."""
    t_start, t_end, compute_s, step_s = times
    record: dict[str, Any] = {"event": "step", "rank": rank, "step": step, "warmup": warmup,
                              "t_start": t_start, "t_end": t_end, "compute_s": compute_s}
    for name in STAT_FIELDS:
        record[name] = getattr(stats, name)
    record.update(step_s=step_s, loss=loss, **delta.as_dict())
    return record


class WorkerRun:
    """One worker's lifetime: setup, the barrier, the steps, and the final event."""

    def __init__(self, resolved: ResolvedSpec, writer: RecordWriter) -> None:
        self.resolved = resolved
        self.spec = resolved.spec
        self.writer = writer
        self.step = -1
        self.totals = dict.fromkeys(SUMMED_FIELDS, 0.0)
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.last_loss: float | None = None

    def run(self) -> None:
        """Everything up to the done event; any failure propagates to :func:`run_worker`."""
        spec = self.spec
        torch.set_num_threads(spec.threads)
        read_counters(spec.iface)  # a missing interface fails here, before anyone waits on us
        os.environ["GLOO_SOCKET_IFNAME"] = spec.iface
        workload = build_workload(spec.workload, spec.rank, spec.world_size)
        if self.resolved.init_method == "env":
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = spec.master_addr, str(spec.master_port)
        dist.init_process_group("gloo", init_method=self.resolved.url, rank=spec.rank,
                                world_size=spec.world_size, timeout=timedelta(seconds=spec.timeout_s))
        from netbench.replicators import build_replicator  # written alongside; imported late so a gap is an error event

        replicator = build_replicator(workload.parameters(), spec.replicator)
        self.writer.write({
            "event": "start", "rank": spec.rank, "world_size": spec.world_size, "t": time.time(),
            "host": socket.gethostname(), "pid": os.getpid(), "iface": spec.iface, "init_method": self.resolved.url,
            "threads": spec.threads, "steps": spec.steps, "warmup_steps": spec.warmup_steps,
            "n_params": workload.num_params(), "n_tensors": len(workload.parameters()),
            "workload": spec.workload.model_dump(), "replicator": spec.replicator.model_dump(),
        })
        dist.barrier()
        before = read_counters(spec.iface)
        for step in range(spec.total_steps):
            self.step = step
            t_start, began = time.time(), time.perf_counter()
            loss = workload.compute_step()
            computed = time.perf_counter()
            stats = replicator.step()
            ended, t_end = time.perf_counter(), time.time()
            after = read_counters(spec.iface)
            record = _step_record(spec.rank, step, step < spec.warmup_steps, loss,
                                  (t_start, t_end, computed - began, ended - began), stats, after - before)
            self.writer.write(record)
            before = after
            if step >= spec.warmup_steps:
                self._accumulate(record)
        self.writer.write(self._done_record())

    def _accumulate(self, record: dict[str, Any]) -> None:
        if self.first_start is None:
            self.first_start = record["t_start"]
        for name in SUMMED_FIELDS:
            self.totals[name] += record[name]
        self.last_loss = record["loss"]
        self.last_end = record["t_end"]

    def _done_record(self) -> dict[str, Any]:
        """Totals over the measured (non-warmup) steps."""
        spec = self.spec
        done: dict[str, Any] = {"event": "done", "rank": spec.rank, "steps": spec.steps, "warmup_steps": spec.warmup_steps,
                                "t_start": self.first_start, "t_end": self.last_end,
                                "wall_s": self.last_end - self.first_start if self.first_start is not None else 0.0}
        for name, value in self.totals.items():
            done[name] = int(value) if name in ("payload_bytes", "collectives") or name.endswith(("_bytes", "_packets")) else value
        done["mean_step_s"] = self.totals["step_s"] / spec.steps
        done["final_loss"] = self.last_loss
        return done


def run_worker(resolved: ResolvedSpec) -> int:
    """Run one worker to completion; returns the process exit code (0 done, 1 error event written)."""
    spec = resolved.spec
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    with RecordWriter(spec.output_file()) as writer:
        worker = WorkerRun(resolved, writer)
        try:
            worker.run()
            code = 0
        except BaseException as exc:  # noqa: BLE001 - every failure must leave an error event
            traceback.print_exc(file=sys.stderr)
            writer.write({"event": "error", "rank": spec.rank, "step": worker.step if worker.step >= 0 else None,
                          "t": time.time(), "error": f"{type(exc).__name__}: {exc}".strip()})
            code = 1
        finally:
            signal.signal(signal.SIGTERM, previous)
            _leave_group()
    return code


def _leave_group() -> None:
    """destroy_process_group if one exists; failing to tear down must not mask the real outcome."""
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001
        print(f"netbench worker: destroy_process_group failed: {exc}", file=sys.stderr)
