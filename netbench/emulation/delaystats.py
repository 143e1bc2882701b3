"""Where the delay line keeps its counters, and how they are written and read without being redirected.

The delay line runs as root and rewrites its counters every second; the orchestrator reads them for
the run's fidelity verdict. Each run's delay line keeps them in a private folder of its own
(:mod:`netbench.emulation.tmpfolders`: ``netbench-<run_id>-delayline-XXXXXXXX``, made fresh, mode 0700, found by
``netbench clean`` where a killed run left it); the counters are written to a fresh name in it and renamed into place
(the C delay line does the same with ``mkstemp``); and they are read as any file netbench did not write in this
process is (:mod:`netbench.untrusted`: no link, no FIFO, a size cap), so a planted file gives no verdict rather than
a forged one.

The kernel's own queue counters go in beside the delay line's (:func:`kernel_queue_counters`):
packets the kernel dropped before the delay line saw them, because its queue was full
(``queue_dropped``) or the delay line's receive buffer was (``queue_user_dropped``, which
NETLINK_NO_ENOBUFS keeps from reaching the delay line as an error).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from netbench import untrusted
from netbench.emulation import tmpfolders

__all__ = [
    "STATS_NAME",
    "make_folder",
    "stats_file",
    "write",
    "read",
    "kernel_queue_counters",
]

STATS_NAME = "stats.json"
QUEUE_PROC = "/proc/self/net/netfilter/nfnetlink_queue"  # per network namespace: the reader's own


def make_folder(run_id: str) -> Path:
    """A fresh folder for ``run_id``'s counters: a name no one could have planted, mode 0700."""
    return tmpfolders.make(run_id, "delayline")


def stats_file(folder: Path) -> Path:
    return folder / STATS_NAME


def write(path: str | Path, counters: dict[str, Any]) -> None:
    """Replace ``path`` with ``counters`` (a fresh temporary name renamed into place: never through a link, never half a
    file).
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(counters, fh)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read(path: str | Path | None) -> dict[str, Any] | None:
    """The counters at ``path``, or None where there are none: not written yet, or not the counters.

    Read as every file netbench did not write in this process is (:mod:`netbench.untrusted`). The folder is this
    run's own (mode 0700), so only the delay line writes there; a file that is not its counters (a link, a FIFO,
    too large, not a JSON object) gives no verdict rather than a wrong one, and never fails the run that measured.
    """
    if path is None or not os.path.lexists(path):
        return None
    try:
        data = untrusted.read_json(path, untrusted.COUNTERS)
    except untrusted.BadInput:
        return None
    return data if isinstance(data, dict) else None


def kernel_queue_counters(queue_num: int) -> dict[str, int]:
    """``queue_dropped`` and ``queue_user_dropped`` of NFQUEUE ``queue_num`` in the caller's network namespace, or {}.

    A line of the kernel's table: queue, peer port id, queued now, copy mode, copy range,
    dropped (queue full), user dropped (netlink receive buffer full), id sequence, 1.
    """
    try:
        with open(QUEUE_PROC) as fh:
            rows = [line.split() for line in fh]
    except OSError:
        return {}
    for row in rows:
        if len(row) >= 7 and row[0] == str(queue_num):
            return {"queue_dropped": int(row[5]), "queue_user_dropped": int(row[6])}
    return {}
