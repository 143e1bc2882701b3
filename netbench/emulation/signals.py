"""Signals while netbench holds host state: termination becomes an exception, and is held off during cleanup.

Python's default SIGTERM and SIGHUP actions end the process without running ``finally`` blocks or
``__exit__``, which would leave namespaces or qdiscs behind; raising SystemExit instead lets every
cleanup run. While cleanup itself runs, SIGINT, SIGTERM and SIGHUP are blocked (and delivered
afterwards) so a second Ctrl-C cannot stop it halfway.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def raise_system_exit(signum: int, frame: FrameType | None) -> None:
    """Signal handler: unwind with exit status 128 + signal, as the shell reports a signal death."""
    raise SystemExit(128 + signum)


@contextmanager
def exit_on(signums: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Within the block, ``signums`` raise SystemExit (main thread only); previous handlers return afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, raise_system_exit) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """Block SIGINT/SIGTERM/SIGHUP (delivered afterwards) so teardown always finishes."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
