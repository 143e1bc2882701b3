"""The only place replicators touch ``torch.distributed``: time the collectives, count their bytes.

Counting happens on the tensors actually passed, so ``StepStats.payload_bytes`` is a measurement
that tests can hold against the declared formula. Without an initialised process group the
replicators still run (world size 1): the collectives become local identities but are counted
the same way, so payload accounting does not depend on how many ranks there are.

Devices: the replicators keep their tensors on the parameters' device and hand them here as they
are. NCCL (and any backend that serves the tensors' device) runs the collective in place. gloo
serves CPU tensors only, so for accelerator tensors on a gloo group -- and only then -- each call
copies its buffer to a reused host buffer and back (:func:`needs_host_copy`): one round trip per
collective (per bucket when pipelined), never inside encode or decode.

Lanes: gloo runs at most two collectives of one process group at a time (two worker threads per
group), so a pipeline of more buckets queues them and each waits out the whole latency of the
ones before it -- on a delayed link every bucket's all-gather costs two one-way delays
(ready-to-receive, then data) no matter how small it is. :meth:`GroupComm.open_lanes` adds process
groups over the same ranks; async collectives rotate over them in the order they are started
(the same on every rank), so up to two buckets per lane travel at once and their latencies overlap.

Finished collectives are kept until the step after next (:meth:`GroupComm.take` retires them). gloo's
worker thread drops its own reference to a collective just after marking it done; were that the
last reference, the thread would free the collective's tensors itself and need the GIL for it. In
a program that ends right after its last step (``destroy_process_group`` leaves gloo's threads
running wherever something else still holds the group), that thread can meet an interpreter that
is shutting down and abort the process ("terminate called without an active exception"). Holding
the handles makes the main thread the one that frees them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from netbench.declarations.buckets import lanes_for, travel_at_once
from netbench.trace import spans

__all__ = ["GroupComm", "Pending", "needs_host_copy"]

# torch renamed all_gather_into_tensor to all_gather_single; older releases lack the new name.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def needs_host_copy(backend: str, device_type: str) -> bool:
    """Whether ``device_type`` tensors must be staged on the host for a group of ``backend``.

    ``backend`` is what ``dist.get_backend`` names: one backend (``"gloo"``, ``"nccl"``) or one
    per device type (``"cpu:gloo,cuda:nccl"``). Only gloo serving a non-CPU device needs it.
    """
    if device_type == "cpu":
        return False
    if ":" in backend:
        served = dict(part.split(":", 1) for part in backend.split(",") if ":" in part)
        backend = served.get(device_type, "")
    return backend == "gloo"


def _group_timeout(group):
    """The collective timeout ``group`` was created with (None, torch's default, where it does not say)."""
    try:
        return (group or dist.group.WORLD)._get_backend(torch.device("cpu")).options._timeout
    except (AttributeError, RuntimeError):
        return None


class GroupComm:
    """A process group plus per-step accounting of collective time, bytes and calls."""

    def __init__(self, group=None) -> None:
        self.group = group
        self.distributed = dist.is_available() and dist.is_initialized()
        if group is not None and not self.distributed:
            raise ValueError("a process group was given but torch.distributed is not initialised")
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.backend = str(dist.get_backend(group)) if self.distributed else ""
        self._host: dict[tuple[int, int, torch.dtype], torch.Tensor] = {}  # staging buffers, one per device buffer
        self._lanes: list = [group]  # process groups the async collectives rotate over
        self._held: list = []  # this step's collectives (torch Work handles), freed by this thread
        self._held_before: list = []  # the previous step's
        self._next_lane = 0
        self._comm_s = 0.0
        self._bytes = 0
        self._calls = 0

    def open_lanes(self, buckets: int) -> int:
        """Create the process groups a pipeline of ``buckets`` collectives runs on (:func:`lanes_for`).

        ``dist.new_group`` is collective over the whole world, so lanes are opened only where this
        comm's group is the world (every rank builds the same replicator, so every rank makes the
        same calls in the same order); a subgroup (sharded nodes' replication group) keeps one
        lane. Returns the number of lanes.
        """
        wanted = lanes_for(buckets)
        if (
            not self.distributed
            or self.world_size < 2
            or self.group not in (None, dist.group.WORLD)
            or len(self._lanes) >= wanted
        ):
            return len(self._lanes)
        ranks, timeout = list(range(self.world_size)), _group_timeout(self.group)
        while len(self._lanes) < wanted:  # the world's collective timeout, not torch's 30-minute default
            self._lanes.append(
                dist.new_group(ranks, timeout=timeout, backend=self.backend if ":" not in self.backend else None)
            )
        return len(self._lanes)

    def concurrent(self, buckets: int) -> bool:
        """Whether ``buckets`` async collectives travel at once here (a lane per two buckets)."""
        return travel_at_once(buckets, len(self._lanes))

    def lane_timeouts(self) -> list:
        """Each lane's collective timeout (the first is the group's own)."""
        return [_group_timeout(g) for g in self._lanes]

    @property
    def lanes(self) -> int:
        """Process groups the async collectives rotate over (1 unless :meth:`open_lanes` added some)."""
        return len(self._lanes)

    def _lane(self):
        """The group the next async collective runs on (round robin, in the order started)."""
        group = self._lanes[self._next_lane % len(self._lanes)]
        self._next_lane += 1
        return group

    def _count(self, tensor: torch.Tensor) -> None:
        """Book one collective call handing ``tensor``'s bytes to the wire."""
        self._bytes += tensor.numel() * tensor.element_size()
        self._calls += 1

    def _account(self, tensor: torch.Tensor, started: float, op: str) -> None:
        ended = time.perf_counter()
        self._comm_s += ended - started
        spans.add(
            "communicate", started, ended, op=op, bucket=self._calls, bytes=tensor.numel() * tensor.element_size()
        )
        self._count(tensor)

    def _staged(self, tensor: torch.Tensor, fill: bool = True) -> torch.Tensor:
        """The tensor the collective runs on: ``tensor`` itself, or its reused host copy under gloo."""
        if not (self.distributed and needs_host_copy(self.backend, tensor.device.type)):
            return tensor
        key = (tensor.data_ptr(), tensor.numel(), tensor.dtype)
        host = self._host.get(key)
        if host is None:
            host = self._host[key] = torch.empty(
                tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=tensor.device.type == "cuda"
            )
        if fill:
            host.copy_(tensor)
        return host.view(tensor.shape)

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Average ``tensor`` in place across the group (sum on the wire, divide locally).

        The division is local and identical on every rank, so all ranks end bit-identical.
        """
        started = time.perf_counter()
        if self.distributed:
            wire = self._staged(tensor)
            self._finish(dist.all_reduce(wire, op=dist.ReduceOp.SUM, group=self.group, async_op=True))
            if wire is not tensor:
                tensor.copy_(wire)
        self._account(tensor, started, "all_reduce")
        if self.world_size > 1:
            tensor.div_(self.world_size)
        return tensor

    def all_gather(self, tensor: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Gather equal-sized 1-D tensors into ``out`` of shape (world_size, n), rank order."""
        if out is None:
            out = torch.empty((self.world_size, tensor.numel()), dtype=tensor.dtype, device=tensor.device)
        return self._into(_all_gather_single, tensor, out, "all_gather")

    def all_to_all(self, tensor: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Send chunk j of the 1-D ``tensor`` (N equal chunks) to rank j and receive rank i's chunk for this rank as
        row i of ``out`` (N, n / N); the whole of ``tensor`` counts as handed to the collective."""
        return self._into(dist.all_to_all_single, tensor, out, "all_to_all")

    def _into(self, collective: Callable[..., Any], tensor: torch.Tensor, out: torch.Tensor, kind: str) -> torch.Tensor:
        """One collective from the 1-D ``tensor`` into ``out`` (a single process keeps its own), through the wire
        dtype's staging buffers, timed and counted as ``kind``."""
        started = time.perf_counter()
        if self.distributed:
            wire_out = self._staged(out, fill=False)
            self._finish(collective(wire_out.view(-1), self._staged(tensor).view(-1), group=self.group, async_op=True))
            if wire_out is not out:
                out.copy_(wire_out)
        else:
            out.view(-1).copy_(tensor.view(-1))
        self._account(tensor, started, kind)
        return out

    def all_reduce_mean_async(self, tensor: torch.Tensor, **tag: object) -> Pending:
        """Start averaging ``tensor`` in place; the returned :class:`Pending` finishes it.

        gloo runs the collective on its own threads, so the caller can encode or decode other
        buckets meanwhile (with one torch thread too), or train on (Streaming DiLoCo). Bytes and
        calls are booked now; time is booked as what :meth:`Pending.wait` blocks for (the
        communication left exposed). ``tag`` (``fragment=2``) labels the collective on the timeline.
        """
        wire = self._staged(tensor) if self.distributed else tensor
        started = time.perf_counter()
        work = (
            dist.all_reduce(wire, op=dist.ReduceOp.SUM, group=self._lane(), async_op=True) if self.distributed else None
        )
        self._hold(work)
        self._count(tensor)

        def after() -> None:
            if wire is not tensor:
                tensor.copy_(wire)
            if self.world_size > 1:
                tensor.div_(self.world_size)

        return Pending(
            self,
            work,
            after if (wire is not tensor or self.world_size > 1) else None,
            _Travel("all_reduce", self._calls - 1, tensor, started, tag),
        )

    def all_gather_async(self, tensor: torch.Tensor, out: torch.Tensor, **tag: object) -> Pending:
        """Start gathering ``tensor`` into ``out`` (world_size, n); see :meth:`all_reduce_mean_async`."""
        after, started = None, time.perf_counter()
        if self.distributed:
            wire_out = self._staged(out, fill=False)
            work = _all_gather_single(
                wire_out.view(-1), self._staged(tensor).view(-1), group=self._lane(), async_op=True
            )
            self._hold(work)
            if wire_out is not out:
                after = lambda: out.copy_(wire_out)  # noqa: E731
        else:
            out.view(-1).copy_(tensor.view(-1))
            work = None
        self._count(tensor)
        return Pending(self, work, after, _Travel("all_gather", self._calls - 1, tensor, started, tag))

    def point_to_point_async(self, body: Callable[[], None], handed: torch.Tensor, op: str, **tag: object) -> Pending:
        """Run ``body`` on a thread of its own and return its :class:`Pending`: a collective built from
        point-to-point sends and receives on this group, with the work between them (a quantized ring's
        decode-add-encode per hop), which gloo cannot run as one call. ``handed`` is booked now as the
        collective's buffer (one call), its time as what :meth:`Pending.wait` blocks for, as for the async
        collectives above; ``op`` names it on the timeline."""
        started = time.perf_counter()
        work = _ThreadWork(body)
        self._count(handed)
        return Pending(self, work, None, _Travel(op, self._calls - 1, handed, started, tag))

    def peer(self, group_rank: int) -> int:
        """The global rank of this group's ``group_rank`` (what point-to-point sends address)."""
        if not self.distributed or self.group in (None, dist.group.WORLD):
            return group_rank
        return dist.get_global_rank(self.group, group_rank)

    def book(self, nbytes: int, seconds: float) -> None:
        """Account one collective made outside this class (the sharded step's ring of point-to-point sends)."""
        self._comm_s += seconds
        ended = time.perf_counter()
        spans.add("communicate", ended - seconds, ended, op="ring", bucket=self._calls, bytes=nbytes)
        self._bytes += nbytes
        self._calls += 1

    def _hold(self, work) -> None:
        """Keep ``work`` referenced here until the step after next (see the module's docstring)."""
        if work is not None:
            self._held.append(work)

    def _finish(self, work) -> None:
        """Wait for a collective started here and keep its handle (a synchronous call, held like the rest)."""
        work.wait()
        self._hold(work)

    def take(self) -> tuple[float, int, int]:
        """Return and reset (collective seconds, bytes handed, collective calls) since the last take.

        The step's collectives are done by now; the ones of the step before are released.
        """
        self._held_before, self._held = self._held, []
        result = (self._comm_s, self._bytes, self._calls)
        self._comm_s, self._bytes, self._calls = 0.0, 0, 0
        return result


class _ThreadWork:
    """A body running on its own thread, behind a collective's handle (``wait``, ``is_completed``,
    ``get_future().add_done_callback``); ``wait`` raises what the body raised."""

    def __init__(self, body: Callable[[], None]) -> None:
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[object], None]] = []
        self._lock = threading.Lock()
        self._done = False
        self._thread = threading.Thread(target=self._run, args=(body,), name="netbench-point-to-point", daemon=True)
        self._thread.start()

    def _run(self, body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:  # re-raised on the waiting thread
            self._error = exc
        with self._lock:
            self._done, callbacks = True, list(self._callbacks)
        for callback in callbacks:
            callback(self)

    def get_future(self) -> _ThreadWork:
        return self

    def add_done_callback(self, callback: Callable[[object], None]) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def is_completed(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


class _Travel:
    """An async collective on the run's timeline: which call of the step it is, and when it started and completed.

    The completion time comes from the work's future (gloo's thread marks it); where that has not
    been seen yet, the end of the wait that ensured it stands in (an upper bound).
    """

    def __init__(
        self, op: str, bucket: int, tensor: torch.Tensor, started: float, tag: dict[str, object] | None = None
    ) -> None:
        self.op, self.bucket, self.started, self.tag = op, bucket, started, tag or {}
        self.nbytes = tensor.numel() * tensor.element_size()
        self.completed: float | None = None

    def watch(self, work) -> None:
        """Note the moment ``work`` completes (where its backend gives it a future)."""
        try:
            work.get_future().add_done_callback(self._done)
        except (AttributeError, RuntimeError):
            pass

    def _done(self, _future: object) -> None:
        self.completed = time.perf_counter()

    def record(self, waited_from: float, waited_to: float) -> None:
        spans.add("wait", waited_from, waited_to, op=self.op, bucket=self.bucket, **self.tag)
        end = self.completed if self.completed is not None else waited_to
        spans.add(
            "collective",
            self.started,
            min(end, waited_to),
            op=self.op,
            bucket=self.bucket,
            bytes=self.nbytes,
            **self.tag,
        )


class Pending:
    """A started collective: :meth:`wait` blocks until it is done and books the blocked time."""

    def __init__(self, comm: GroupComm, work, after, travel: _Travel | None = None) -> None:
        self._comm, self._work, self._after, self._travel = comm, work, after, travel
        if travel is not None and work is not None:
            travel.watch(work)

    def done(self) -> bool:
        """Whether the collective has completed (never blocks)."""
        return self._work is None or self._work.is_completed()

    def wait(self) -> None:
        started = time.perf_counter()
        if self._work is not None:
            self._work.wait()
        ended = time.perf_counter()
        self._comm._comm_s += ended - started
        if self._travel is not None:
            self._travel.record(started, ended)
        if self._after is not None:
            self._after()
