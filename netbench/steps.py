"""Per-step records from inside any training program: ``with netbench.step(): ...``.

Under ``netbench exec`` each node's program finds where to write in its environment
(``NETBENCH_RECORDS``, ``NETBENCH_IFACE``, ``NETBENCH_RANK``, ...), and every step becomes one
record in the same format ``netbench run``'s workers write: wall time, the node's interface
counters (bytes and packets each way, TCP retransmissions) and, where known, how the step's time
split into compute, compress, communicate, decode and apply. Outside ``netbench exec`` every
call here does nothing, so a script keeps working unchanged on a laptop or a real cluster.

Counter readings tile the run: the reading that ends one step begins the next, so bytes sent
between two steps (evaluation, logging) count towards the next step, and the records' sum is the
node's whole traffic from the first step's start to the last step's end -- as with ``run``.

This module imports only the standard library (``import netbench`` stays cheap); a netbench
replicator used inside a step reports its phases and payload here by itself (``observe``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from netbench.rundir.steps_schema import Col, step_record
from netbench.trace import spans

__all__ = ["step", "mark_step", "phase", "declare", "shapes_of", "active", "observe", "Step", "PHASES"]

_PHASE_COLUMNS = {  # each phase and the steps.csv column its time is booked in
    "compute": Col.COMPUTE_S,
    "compress": Col.COMPRESS_S,
    "comm": Col.COMM_S,
    "decode": Col.DECODE_S,
    "apply": Col.APPLY_S,
}
PHASES = tuple(_PHASE_COLUMNS)
SPAN_NAMES = {"compress": "encode", "comm": "communicate"}  # a phase as the run's timeline names it
ENV_RECORDS = "NETBENCH_RECORDS"  # this node's record file; set by `netbench exec` only
ENV_FIRST_STEP = "NETBENCH_FIRST_STEP"  # the first step's index: the node's steps so far, when it joins again


class Step:
    """One open step: its clock, its counter reading, and the phase times booked into it."""

    def __init__(self, index: int, before: Any) -> None:
        self.index = index
        self.before = before
        self.t_start = time.time()
        self.began = time.perf_counter()
        spans.begin(self.began)  # the step's timeline (trace.json)
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.payload_bytes: int | None = None
        self.collectives = 0
        self.loss: float | None = None  # set it (``s.loss = loss.item()``) to see the loss curve in steps.csv

    def book(self, name: str, seconds: float) -> None:
        if name not in self.phases:
            raise ValueError(f"netbench.phase: unknown phase {name!r} (choose from {', '.join(PHASES)})")
        self.phases[name] += seconds


class _Recorder:
    """The node's record file and counters, opened on first use."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        from netbench.rundir.records import RecordWriter  # late: standard library only

        self.rank = int(environ.get("NETBENCH_RANK", environ.get("RANK", "0")))
        self.world_size = int(environ.get("NETBENCH_WORLD_SIZE", environ.get("WORLD_SIZE", "1")))
        self.iface = environ.get("NETBENCH_IFACE", "eth0")
        self.warmup = int(environ.get("NETBENCH_WARMUP_STEPS", "0"))
        self.writer = RecordWriter(_path(environ[ENV_RECORDS]), go_on=ENV_FIRST_STEP in environ)
        self.next_index = int(environ.get(ENV_FIRST_STEP, "0"))
        self.last = None  # the reading that ended the previous step
        self.declared = False
        self.writer.write(
            {
                "event": "start",
                "rank": self.rank,
                "world_size": self.world_size,
                "t": time.time(),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "iface": self.iface,
                "launcher": "netbench exec",
            }
        )

    def counters(self) -> Any:
        from netbench.counters import read_counters  # late: a user's program loads only what its steps use

        return read_counters(self.iface)

    def open(self) -> Step:
        before = self.last if self.last is not None else self.counters()
        opened = Step(self.next_index, before)
        self.next_index += 1
        return opened

    def close(self, s: Step) -> None:
        ended, t_end = time.perf_counter(), time.time()
        after = self.counters()
        self.last = after
        timeline = spans.take()
        step_s = ended - s.began
        timed = sum(v for k, v in s.phases.items() if k != "compute")
        compute = s.phases["compute"] or max(0.0, step_s - timed)  # unmarked time is the program's own work
        values = {
            Col.RANK: self.rank,
            Col.STEP: s.index,
            Col.WARMUP: s.index < self.warmup,
            Col.T_START: s.t_start,
            Col.T_END: t_end,
            Col.COMPUTE_S: compute,
            **{_PHASE_COLUMNS[k]: v for k, v in s.phases.items() if k != "compute"},
            Col.PAYLOAD_BYTES: s.payload_bytes,
            Col.COLLECTIVES: s.collectives,
            Col.STEP_S: step_s,
            Col.LOSS: s.loss,
            **(after - s.before).as_dict(),
        }
        record = step_record("exec", values, spans=timeline)
        self.writer.write(record)

    def declare(self, replicator: Mapping[str, Any], shapes: Mapping[str, list[int]], source: str) -> None:
        if self.declared:
            return
        self.declared = True
        self.writer.write(
            {
                "event": "payload",
                "rank": self.rank,
                "replicator": dict(replicator),
                "shapes": dict(shapes),
                "n_params": sum(_numel(d) for d in shapes.values()),
                "source": source,
            }
        )


def _path(text: str) -> Any:
    from pathlib import Path  # late: a user's program loads only what its steps use

    return Path(text)


def _numel(dims: Iterable[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


_recorder: _Recorder | None = None
_loaded = False
_current: Step | None = None  # the open step (``step()`` or ``mark_step()``)


def active() -> bool:
    """True when running under ``netbench exec`` (records are being written)."""
    return _get() is not None


def _get() -> _Recorder | None:
    global _recorder, _loaded
    if not _loaded:
        _loaded = True
        if os.environ.get(ENV_RECORDS):
            _recorder = _Recorder(os.environ)
    return _recorder


@contextmanager
def step() -> Iterator[Step | None]:
    """Time one training step and record it (under ``netbench exec``); yields the Step, or None elsewhere.

    A step that raises is not recorded: the exception goes on as if this were not here.
    """
    global _current
    rec = _get()
    if rec is None:
        yield None
        return
    if _current is not None:
        raise RuntimeError("netbench.step: steps do not nest (a step is already open)")
    _current = rec.open()
    opened = _current
    try:
        yield opened
    except BaseException:
        _current = None
        raise
    _current = None
    rec.close(opened)


def mark_step() -> None:
    """For loops a ``with`` block does not fit: call once per iteration; step k runs from call k to call k+1."""
    global _current
    rec = _get()
    if rec is None:
        return
    if _current is not None:
        rec.close(_current)
    _current = rec.open()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Book the block's wall time to one phase of the open step: compute, compress, comm, decode or apply.

    Without phases a step's time counts as compute (the model then predicts its communication on
    top); wrap the collectives in ``phase("comm")`` so the model's local work is the rest.
    """
    began = time.perf_counter()
    try:
        yield
    finally:
        if _current is not None:
            ended = time.perf_counter()
            _current.book(name, ended - began)
            spans.add(SPAN_NAMES.get(name, name), began, ended)


def shapes_of(what: Any) -> dict[str, list[int]]:
    """name -> dims from a module (``named_parameters``), a mapping of names to shapes or tensors, or tensors."""
    if hasattr(what, "named_parameters"):
        items = [(n, p.shape) for n, p in what.named_parameters() if getattr(p, "requires_grad", True)]
    elif isinstance(what, Mapping):
        items = [(str(n), getattr(v, "shape", v)) for n, v in what.items()]
    else:
        items = [(f"p{i}", getattr(v, "shape", v)) for i, v in enumerate(what)]
    shapes = {name: [int(d) for d in (dims if isinstance(dims, Iterable) else [dims])] for name, dims in items}
    if not shapes or any(not dims or min(dims) < 1 for dims in shapes.values()):
        raise ValueError("netbench.declare_payload: give a module, tensors, or {name: shape} with positive sizes")
    return shapes


def declare(settings: dict[str, Any], what: Any, source: str) -> None:
    """Record a step's payload: a replicator's validated ``settings`` and the shapes of ``what``.

    ``what``: a model (``nn.Module``), its tensors, or ``{name: shape}``; checked at once. Recorded only under
    ``netbench exec``; :func:`netbench.declarations.declare.declare_payload` is the public form.
    """
    shapes = shapes_of(what)
    rec = _get()
    if rec is not None:
        rec.declare(settings, shapes, source)


def observe(replicator: Any, stats: Any) -> None:
    """Called by every netbench replicator's ``step()``: its phases and bytes join the open step.

    The first call also declares the replicator's payload (its settings and parameter shapes).
    """
    rec = _get()
    if rec is None:
        return
    if not rec.declared:
        rec.declare(
            replicator.config.model_dump(),
            {s.name: list(s.shape) for s in replicator.shapes},
            f"replicator {replicator.name}",
        )
    if _current is None:
        return
    for name in ("compress", "comm", "decode", "apply"):
        _current.book(name, getattr(stats, _PHASE_COLUMNS[name]))
    _current.payload_bytes = (_current.payload_bytes or 0) + stats.payload_bytes
    _current.collectives += stats.collectives
