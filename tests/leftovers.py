"""What one run may leave behind, found by its run id (for fault and signal tests).

Other runs -- other test sessions, other people -- may be building clusters on the same host at
the same time, so "nothing left" must never mean "no netbench namespace at all": every check here
is scoped to one run id, or to the namespace inodes that run had while it was alive
(:func:`netbench.emulation.cleanup.traces_of`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

import psutil

from netbench.emulation import naming
from netbench.emulation.cleanup import inodes_of as inodes
from netbench.emulation.cleanup import namespaces_of as namespaces
from netbench.emulation.cleanup import processes_of as processes
from netbench.emulation.cleanup import running, traces_of

__all__ = [
    "wait_until",
    "run_id_of_pid",
    "command_line",
    "clean",
    "inodes",
    "namespaces",
    "processes",
    "running",
    "traces",
]


def wait_until(predicate: Callable[[], object], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it is truthy or ``timeout_s`` passes; returns whether it became true."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def run_id_of_pid(pid: int) -> str | None:
    """The run id a live orchestrator registered (None while it has not started building its cluster)."""
    for run_id in naming.registered_run_ids():
        try:
            if f'"pid": {pid},' in (naming.REGISTRY_DIR / f"{run_id}.json").read_text():
                return run_id
        except OSError:
            continue
    return None


def command_line(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def clean(run_id: str, known_inodes: Iterable[int] = ()) -> bool:
    """True when ``run_id`` left nothing: no namespace, no registration, no process."""
    return not any(traces(run_id, known_inodes).values())


def traces(run_id: str, known_inodes: Iterable[int] = ()) -> dict[str, object]:
    """:func:`traces_of`, with each process's command line and network namespace inode (for failure messages)."""
    found = traces_of(run_id, known_inodes)
    found["processes"] = [(pid, _netns_inode(pid), command_line(pid)[:200]) for pid in found["processes"]]
    return found


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None
