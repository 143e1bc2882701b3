"""Writing a matplotlib figure as a PNG the way every netbench figure is written: safely, as root; and drawing a set
of figures in a second process, beside this one's."""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from netbench import safe_files
from netbench.reports.drawing import plt

DPI = 110
T = TypeVar("T")


def save(fig, path: Path) -> Path:
    """Draw ``fig`` into memory, then write it under a fresh name renamed over ``path`` (never through a link planted
    there).
    """
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=DPI)  # every figure lays itself out (constrained or tight)
    finally:
        plt.close(fig)
    safe_files.write_bytes(path, buffer.getvalue())
    return path


def drawn_beside(draw: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start ``draw(*args)`` in a forked child, to draw on another core while this process draws its own figures;
    the function returned waits for the child and gives back what ``draw`` returned, or raises what it raised. Call
    it whatever happens, or the child is never reaped. Where the fork fails, ``draw`` runs here at once."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        value = draw(*args)
        return lambda: value
    if pid == 0:
        os.close(read_fd)
        try:
            payload = pickle.dumps((True, draw(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
            payload = pickle.dumps((False, exc))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
        os._exit(0)
    os.close(write_fd)

    def collect() -> T:
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        os.waitpid(pid, 0)
        if not data:
            raise RuntimeError("the process drawing the figures ended without an answer")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value

    return collect
