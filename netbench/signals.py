"""Stop signals (SIGINT, SIGTERM, SIGHUP) wherever netbench holds host state: the one place that handles them.

Python's default SIGTERM and SIGHUP actions end the process without running ``finally`` blocks or
``__exit__``, which would leave namespaces or qdiscs behind; raising instead lets every cleanup
run, and the process still ends with 128 + signal, as the shell reports a signal death. While
cleanup itself runs the signals are held (blocked, or kept and raised afterwards) so a second
Ctrl-C cannot stop it halfway.

- :class:`StopSignals`: the state machine of a long-lived owner (the emulated cluster): signals
  raise while it runs, wait while it tears down, and are raised again once teardown has finished.
- :func:`exit_on` and :func:`signals_held`: the same for a ``with`` block (host shaping).
- :func:`kept_until_done`, :func:`block_in_child` and :func:`ignore`: forked helpers that must
  finish their step, and processes that only their owner may end (the shaping guard).
- :func:`as_fresh_interpreter`: a forked worker starts with the handlers a fresh interpreter has.
- :func:`handled`: any other handler for the length of a block (the worker's SIGTERM, the TCP sampler's
  stop, the delay line's drain and its SIGHUP reload).
- :func:`to_the_end`: a step that a signal may delay but not cut short (waiting for a forked child).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any, TypeVar

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], Any]
T = TypeVar("T")


def raise_for(signum: int) -> None:
    """As the usual handlers do: Ctrl-C raises KeyboardInterrupt, SIGTERM/SIGHUP exit with 128 + signal."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def raise_system_exit(signum: int, frame: FrameType | None) -> None:
    """Signal handler: unwind with exit status 128 + signal, as the shell reports a signal death."""
    raise SystemExit(128 + signum)


def through_interrupts(step: Callable[[], T]) -> tuple[T, BaseException | None]:
    """Call ``step`` again whenever a stop signal's exception cuts it short, until it returns.

    Returns its result and the first such exception, for the caller to raise once it is safe:
    a teardown or a wait for a forked child must not be left halfway.
    """
    interrupted: BaseException | None = None
    while True:
        try:
            return step(), interrupted
        except (KeyboardInterrupt, SystemExit) as exc:
            interrupted = interrupted or exc


def to_the_end(step: Callable[[], T]) -> T:
    """:func:`through_interrupts`, then raise the interruption (if any) once ``step`` has finished."""
    result, interrupted = through_interrupts(step)
    if interrupted is not None:
        raise interrupted
    return result


def _on_main_thread() -> bool:
    return (
        threading.current_thread() is threading.main_thread()
    )  # only the main thread may set handlers or receive signals


@contextmanager
def handled(signums: tuple[int, ...], handler: Handler) -> Iterator[None]:
    """Within the block, ``handler`` handles ``signums`` (main thread only); the previous handlers return afterwards."""
    if not _on_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def exit_on(signums: tuple[int, ...] = STOP_SIGNALS) -> AbstractContextManager[None]:
    """Within the block, ``signums`` raise SystemExit(128 + signal) (main thread only)."""
    return handled(signums, raise_system_exit)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold the stop signals while the block runs and deliver them afterwards, so teardown always finishes.

    Blocking them in this thread is not enough: the kernel may hand a signal sent to the process to
    another thread (torch's, a capture reader's), whose C-level handler still makes Python run the
    handler here at once. So the Python handlers are swapped for a recorder as well, and what it
    caught is raised again, through the previous handlers, when the block ends.
    """
    if not _on_main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: caught.append(signum)) for signum in STOP_SIGNALS}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a signal still pending in this thread arrives here
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


def block_in_child() -> None:
    """In a forked helper: block the stop signals for good; the parent decides, the helper finishes its step."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))


class _Keeping:
    """How many :func:`kept_until_done` blocks are open, and the stop signal an owner kept meanwhile."""

    depth = 0
    signum: int | None = None


@contextmanager
def kept_until_done() -> Iterator[None]:
    """Within the block, an owner's stop signal (:class:`StopSignals`) is kept, not raised; it is raised when the block
    ends.

    For a forked helper, from the fork until it is reaped: a signal raised between the fork and the parent storing
    the child's pid, or just after the wait had reaped the child, would leave the helper unwaited (a namespace made
    after the teardown looked) or the wait failing. A child forked inside the block inherits it, so its own copy of
    the handler keeps the signal too. The counter changes without a call in between, so no handler can run half-way
    through.
    """
    _Keeping.depth += 1
    try:
        yield
    finally:
        _Keeping.depth -= 1
        signum = _Keeping.signum if _Keeping.depth == 0 else None
        if _Keeping.depth == 0:
            _Keeping.signum = None
    if signum is not None:  # the block finished: nothing is left half-done
        raise_for(signum)


def ignore(signums: tuple[int, ...] = STOP_SIGNALS) -> None:
    """Ignore ``signums`` for good: a process that only its owner ends (closing a pipe), never a Ctrl-C; or a
    sampler's SIGTERM once it is writing its last record."""
    for signum in signums:
        signal.signal(signum, signal.SIG_IGN)


def as_fresh_interpreter() -> None:
    """The stop signals as a fresh interpreter has them (Ctrl-C raises KeyboardInterrupt, the others end the process):
    for a child forked from a process that handles them, before it runs code of its own."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


class StopSignals:
    """Stop signals for an owner of host state: raise while it runs, wait while it tears down.

    :meth:`install` on entry; while running, a stop signal raises (:func:`raise_for`) so the
    owner's work unwinds into teardown. :meth:`stop` marks the start of teardown: from then on a
    signal is kept, not raised. :meth:`finish` runs the teardown to its end (again, if a signal
    cut it short before :meth:`stop`), gives the previous handlers back and raises what is due.
    """

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._stopping = False  # from stop() on, signals wait for the teardown to finish
        self._raised: int | None = None  # the stop signal last raised from the handler
        self._deferred: int | None = None  # a signal that arrived while stopping, raised after teardown

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def raised(self) -> int | None:
        """The stop signal last raised from the handler, if any (raised once; kept for :meth:`raise_if_interrupted`)."""
        return self._raised

    def install(self) -> None:
        """Take over the stop signals (main thread only: elsewhere Python delivers none)."""
        if _on_main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Raise it so the work unwinds into teardown; once teardown began, keep it for later (see also
        :func:`kept_until_done`).
        """
        if self._stopping:
            self._deferred = self._deferred or signum
            return
        self._raised = signum
        if _Keeping.depth:  # a forked helper is between fork and reaping: raised when it is done
            _Keeping.signum = _Keeping.signum or signum
            return
        raise_for(signum)

    def raise_if_interrupted(self) -> None:
        """Raise again a stop signal whose exception Python swallowed.

        A handler's exception is only printed when it fires inside an at-fork hook (logging
        registers one), and forks are everywhere here: namespaces, helpers, every process a
        node starts. Building and watching call this between such steps.
        """
        if self._raised is not None and not self._stopping:
            raise_for(self._raised)

    def stop(self) -> None:
        """Teardown begins: signals from now on wait until :meth:`finish` has run it to the end."""
        self._stopping = True

    def finish(self, teardown: Callable[[], None], unwinding: BaseException | None) -> None:
        """Run ``teardown`` until it has run to the end, then give the signal handlers back.

        A signal whose exception cuts ``teardown`` short (before it called :meth:`stop`) is kept
        and ``teardown`` runs again; it is raised at the end. ``unwinding``: the exception that
        ended the owner's work, if any. When nothing is unwinding, a signal that was swallowed
        (see :meth:`raise_if_interrupted`) or deferred is raised. When an ordinary error is
        unwinding after a stop signal had raised, the signal is raised in its place: its
        exception was lost on the way (swallowed, or cut short a step whose retry failed, or
        killed a helper in the process group), and the error is its consequence, not the cause.
        """
        _, interrupted = through_interrupts(teardown)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        pending, self._deferred = self._raised or self._deferred, None
        if interrupted is not None:
            raise interrupted
        if pending is not None and unwinding is None:
            raise_for(pending)
        if self._raised is not None and isinstance(unwinding, Exception):
            raise_for(self._raised)
