"""Chrome trace-event records (the JSON that Perfetto and chrome://tracing open), in microseconds from one origin.

Every event's ``ts`` is microseconds since ``origin`` (a Unix time in seconds: the earliest step
start of the run), so all sources -- worker spans, packet captures, TCP samples -- land on one
axis. Processes (``pid``) group tracks: one per rank, one for the links, one per node's TCP, one
for the model, one for the membership where nodes leave and join.
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]

RANK_PID = 1  # rank r is pid RANK_PID + r
LINKS_PID = 1000
TCP_PID = 2000  # node n's connections are pid TCP_PID + n
MODEL_PID = 3000
MEMBERSHIP_PID = 4000


def us(seconds: float) -> float:
    """Seconds as the trace's microseconds, to a tenth of one."""
    return round(seconds * 1e6, 1)


def process(pid: int, name: str, order: int) -> list[Event]:
    """Name a process (a group of tracks) and fix its place in the viewer."""
    return [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": order}},
    ]


def thread(pid: int, tid: int, name: str) -> list[Event]:
    """Name a track (a thread) of process ``pid``."""
    return [
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}},
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}},
    ]


def span(pid: int, tid: int, name: str, start_s: float, end_s: float, cat: str, **args: Any) -> Event:
    """A complete event: ``name`` from ``start_s`` to ``end_s`` (seconds from the origin)."""
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "cat": cat,
        "ts": us(start_s),
        "dur": us(max(0.0, end_s - start_s)),
        "args": args,
    }


def instant(pid: int, tid: int, name: str, t_s: float, cat: str, **args: Any) -> Event:
    """A moment on track ``tid`` of process ``pid``: ``name`` at ``t_s`` (seconds from the origin)."""
    return {"ph": "i", "s": "t", "pid": pid, "tid": tid, "name": name, "cat": cat, "ts": us(t_s), "args": args}


def counter(pid: int, name: str, t_s: float, **values: float) -> Event:
    """A counter sample: each of ``values`` holds from ``t_s`` until the track's next sample."""
    return {"ph": "C", "pid": pid, "name": name, "ts": us(t_s), "args": values}
