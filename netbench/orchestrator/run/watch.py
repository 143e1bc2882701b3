"""Watching a run's workers: until every one is done, or one fails or stalls, with a reason that names the rank.

A worker's life has two stages, and each has its own signal of progress:

* joining: from its start to its ``start`` record (the interpreter, the model, the process group). Its progress is
  a worker joining, or a worker still joining using the CPU (importing, building): on a host with fewer cores than
  workers the last one joins minutes after the first, and that is not a stall. The clock runs only while none of
  them works, up to ``join_limit_s``: longer than the workers' own rendezvous timeout, so that a worker that cannot
  join says why itself.
* stepping: once all have joined. Its progress is the slowest worker's step count, up to ``step_limit_s``.

The wait ends when every worker has exited well or recorded its ``done`` event (its last record): leaving the
process group and exiting take a worker a few tenths of a second more, which the caller overlaps with writing the
results (a sweep's next point waits for them: :meth:`~netbench.orchestrator.cluster_reuse.ClusterReuse.hold`).

A worker that exits badly fails the run at once; the reason names the worker that caused it (see
:func:`root_cause`), with its own error, not a peer that merely lost it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from netbench.orchestrator.activity import Activity
from netbench.rundir.layout import RunDir, StepCounter, last_error

Progress = Callable[[int, int], None]  # (steps done by the slowest worker, total steps)
POLL_S = 0.1  # while the workers step
EDGE_POLL_S = 0.02  # while they join, and once every step is recorded: a run's start and end wait on this loop


class WorkerFailure(RuntimeError):
    """A worker ended badly or stalled; the message names its rank and node."""


@dataclass(frozen=True)
class Limits:
    """How long each stage may go without progress (seconds)."""

    join_limit_s: float
    step_limit_s: float


def who(rank: int, node_of: Callable[[int], int]) -> str:
    """``rank R`` with its node where they differ (several workers per node, or a placement)."""
    node = node_of(rank)
    return f"rank {rank}" if node == rank else f"rank {rank} (node {node})"


def wait_for_workers(
    procs: list[subprocess.Popen],
    run_dir: RunDir,
    total: int,
    limits: Limits,
    node_of: Callable[[int], int],
    progress: Progress | None = None,
    poll: Callable[[], None] = lambda: None,
    joined: Callable[[], None] | None = None,
    away: Collection[int] = (),
    rejoining: Callable[[], Collection[int]] = frozenset,
) -> None:
    """Wait for every worker; raise WorkerFailure naming the worker that failed or stalled. ``poll`` runs every round;
    ``joined`` once, when every worker has recorded its start (joined the process group). ``away``: the ranks whose
    node has left the run (churn): their worker was killed on purpose, and the others do not wait for it; ``procs``
    may change while the wait runs (a node that joins again runs a fresh worker). ``rejoining``: the ranks of nodes that
    joined again and have not stepped yet: once every other worker has finished, the run does not wait for them."""
    counters = [StepCounter(run_dir.records_path(rank)) for rank in range(len(procs))]
    activity, last_done, all_joined, waiting = Activity(), -1, False, len(procs)
    while True:
        poll()
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0) and (run_dir.finished(rank) or rank in away):
                codes[rank] = 0  # crashed on the way out (gloo teardown) after recording everything, or left
        if any(code not in (None, 0) for code in codes):
            raise WorkerFailure(root_cause(procs, run_dir, node_of, away=away))
        counts = [count() for count in counters]
        present = [rank for rank in range(len(procs)) if rank not in away]
        done = min((counts[rank] for rank in present), default=0)
        if progress:
            progress(done, total)
        finished = [rank for rank in present if codes[rank] == 0 or counters[rank].done]
        if len(finished) == len(present) or (finished and set(present) - set(finished) <= set(rejoining())):
            return  # what is left of a worker that recorded its end is leaving the process group and exiting
        joining = [rank for rank, count in enumerate(counters) if not count.started]
        if len(joining) != waiting:  # a worker joined
            waiting = len(joining)
            activity.mark()
        if not joining and not all_joined:
            all_joined, last_done = True, done
            activity.mark()
            if joined is not None:
                joined()
        if all_joined:
            if done != last_done:
                last_done = done
                activity.mark()
            idle = time.monotonic() - activity.since
            if idle > limits.step_limit_s:
                slow = counts.index(done)
                raise WorkerFailure(f"{who(slow, node_of)} made no progress for {idle:.0f} s at step {done}")
        else:
            idle = activity.idle_s(procs[rank].pid for rank in joining)  # a worker joining or working resets it
            if idle > limits.join_limit_s:
                raise WorkerFailure(
                    f"{who(joining[0], node_of)} did not join the process group: no worker that was still joining "
                    f"used the CPU for {idle:.0f} s ({len(joining)} of {len(procs)} had not joined)"
                )
        time.sleep(EDGE_POLL_S if joining or done >= total else POLL_S)


def root_cause(
    procs: list[subprocess.Popen],
    run_dir: RunDir,
    node_of: Callable[[int], int],
    settle_s: float = 2.0,
    away: Collection[int] = (),
) -> str:
    """Name the worker that caused a failure, not the peers that merely lost it.

    When one worker dies, its peers fail too (a gloo read error) and may exit first; so wait a
    moment, then prefer a worker killed by a signal, then one that exited without an error event.
    """
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    failed = []
    for rank, proc in enumerate(procs):
        code = proc.poll()
        if code in (None, 0) or run_dir.finished(rank) or rank in away:
            continue
        error = last_error(run_dir.records(rank))
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        said = f": {error}" if error else ""
        failed.append((code >= 0, error is not None, rank, f"{who(rank, node_of)} {how}{said}"))
    return min(failed)[3] if failed else "a worker failed"
