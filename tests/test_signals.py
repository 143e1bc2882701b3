"""The stop-signal state machine (netbench.signals), driven by real signals in this process."""

from __future__ import annotations

import ast
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

import netbench
from netbench import signals
from netbench.emulation import netns
from netbench.signals import STOP_SIGNALS, StopSignals


def _handlers() -> dict[int, object]:
    return {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}


@pytest.mark.parametrize(
    ("sig", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit), (signal.SIGHUP, SystemExit)]
)
def test_a_stop_signal_raises_while_running_and_the_handlers_come_back(sig: int, raised: type[BaseException]) -> None:
    before = _handlers()
    stops = StopSignals()
    stops.install()
    torn_down = []
    with pytest.raises(raised) as info:
        try:
            signal.raise_signal(sig)
        except BaseException as exc:
            stops.finish(lambda: torn_down.append(True), unwinding=exc)
            raise
    if raised is SystemExit:
        assert info.value.code == 128 + sig
    assert torn_down == [True] and _handlers() == before


def test_a_signal_during_teardown_waits_until_it_has_finished() -> None:
    stops = StopSignals()
    stops.install()
    steps = []

    def teardown() -> None:
        stops.stop()
        steps.append("started")
        signal.raise_signal(signal.SIGTERM)  # kept, not raised: the teardown goes on
        steps.append("finished")

    with pytest.raises(SystemExit) as info:
        stops.finish(teardown, unwinding=None)
    assert steps == ["started", "finished"] and info.value.code == 128 + signal.SIGTERM


def test_a_teardown_cut_short_before_it_began_stopping_runs_again() -> None:
    stops = StopSignals()
    stops.install()
    calls = []

    def teardown() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # before stop(): raises out of the first attempt
        stops.stop()

    with pytest.raises(KeyboardInterrupt):
        stops.finish(teardown, unwinding=None)
    assert calls == [0, 1]


def test_a_swallowed_signal_is_raised_again() -> None:
    stops = StopSignals()
    stops.install()
    try:
        try:
            signal.raise_signal(signal.SIGHUP)
        except SystemExit:
            pass  # as an at-fork hook would swallow it
        with pytest.raises(SystemExit):
            stops.raise_if_interrupted()
    finally:
        with pytest.raises(SystemExit):  # nothing unwinding: the swallowed signal still ends the owner
            stops.finish(stops.stop, unwinding=None)


def test_to_the_end_finishes_the_step_then_raises() -> None:
    calls = []

    def step() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise KeyboardInterrupt
        return 7

    with pytest.raises(KeyboardInterrupt):
        signals.to_the_end(step)
    assert len(calls) == 3
    assert signals.to_the_end(lambda: 5) == 5


def test_signals_held_delivers_afterwards() -> None:
    """A stop signal for this thread waits, blocked, until the block ends.

    Sent to the thread itself: a signal sent to the process (os.kill) may go to any thread of it,
    and one that another thread takes is handled whenever that thread next runs -- on a busy host
    after the block had ended (this test failed once in CI that way; the next test covers that path).
    """
    with signals.exit_on():
        with pytest.raises(SystemExit) as info:
            with signals.signals_held():
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
                held = True  # still here: blocked
        assert held and info.value.code == 128 + signal.SIGTERM


def test_signals_held_keeps_what_another_thread_caught_and_delivers_it_afterwards() -> None:
    """Another thread's C handler makes Python run the handler here at once; the block records it instead."""
    idle = threading.Event()
    other = threading.Thread(target=idle.wait, daemon=True)
    other.start()
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous_fd = signal.set_wakeup_fd(writer.fileno())
    try:
        with signals.exit_on():
            with pytest.raises(SystemExit) as info:
                with signals.signals_held():
                    signal.pthread_kill(other.ident, signal.SIGTERM)
                    reader.settimeout(10)
                    assert reader.recv(1) == bytes([signal.SIGTERM])  # the other thread's C handler ran
                    time.sleep(0.01)  # Python runs the handler (the recorder) between bytecodes here
                    held = True  # still here: recorded, not raised
            assert held and info.value.code == 128 + signal.SIGTERM
    finally:
        signal.set_wakeup_fd(previous_fd)
        idle.set()
        reader.close()
        writer.close()


def test_handled_restores_the_previous_handler() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen = []
    with signals.handled((signal.SIGTERM,), lambda signum, frame: seen.append(signum)):
        signal.raise_signal(signal.SIGTERM)
    assert seen == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is before


# --------------------------------------------------------------------------- forked helpers


def _child(exit_code: int, release_fd: int) -> int:
    """A forked child that exits with ``exit_code`` once a byte arrives on ``release_fd``."""
    pid = os.fork()
    if pid == 0:
        os.read(release_fd, 1)
        os._exit(exit_code)
    return pid


def test_wait_for_child_reports_the_exit_code() -> None:
    release_r, release_w = os.pipe()
    try:
        exits, killed = _child(3, release_r), _child(0, release_r)
        os.kill(killed, signal.SIGKILL)
        # dead before the byte is written: a killed child woken by the byte could still take it on its way out, and
        # leave the other blocked for good (left unreaped, for wait_for_child)
        os.waitid(os.P_PID, killed, os.WEXITED | os.WNOWAIT)
        os.write(release_w, b"x")
        assert netns.wait_for_child(exits) == 3
        assert netns.wait_for_child(killed) == -signal.SIGKILL
    finally:
        os.close(release_r)
        os.close(release_w)


def test_a_ctrl_c_handled_just_after_the_wait_reaped_the_child_is_raised_as_such() -> None:
    """The wait returns, the child is reaped, and only then does Python run the handler that raises.

    That happens whenever another thread's C handler took the signal while this thread waited in
    the kernel (here, as on a terminal's Ctrl-C to a process with threads). The wait is then
    repeated and must not fail for want of a child (ECHILD): the Ctrl-C is what the caller sees.
    """
    release_r, release_w = os.pipe()
    pid = _child(0, release_r)

    def press_ctrl_c_elsewhere() -> None:
        time.sleep(0.3)  # the main thread is in the wait by now
        signal.pthread_kill(
            threading.get_ident(), signal.SIGINT
        )  # this thread's C handler runs; Python's waits for the main thread
        time.sleep(0.05)
        os.write(release_w, b"x")  # the child exits only after that

    other = threading.Thread(target=press_ctrl_c_elsewhere)
    try:
        with signals.handled((signal.SIGINT,), signal.default_int_handler):
            other.start()
            with pytest.raises(KeyboardInterrupt):
                netns.wait_for_child(pid)
        with pytest.raises(ChildProcessError):  # reaped: no zombie left
            os.waitpid(pid, os.WNOHANG)
    finally:
        other.join()
        os.close(release_r)
        os.close(release_w)


def test_an_owners_stop_signal_waits_until_a_forked_helper_is_done() -> None:
    """Between the fork and the reaping nothing raises, in the parent or (inheriting the block) in the child."""
    stops = StopSignals()
    stops.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals.kept_until_done():
                pid = os.fork()
                if pid == 0:
                    signal.raise_signal(signal.SIGINT)  # kept in the child too: it finishes its step
                    os._exit(7)
                signal.raise_signal(signal.SIGINT)
                code = netns.wait_for_child(pid)  # still here: kept, not raised
        assert code == 7
    finally:
        stops.finish(stops.stop, unwinding=KeyboardInterrupt())


def test_a_stop_signal_that_raised_outranks_the_error_that_followed_it() -> None:
    """Its exception was lost (swallowed, or a step it cut short failed when repeated): the error is its consequence."""
    stops = StopSignals()
    stops.install()
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass  # as an at-fork hook would swallow it
    with pytest.raises(KeyboardInterrupt):
        stops.finish(stops.stop, unwinding=ChildProcessError("No child processes"))


def test_an_error_without_a_stop_signal_is_left_to_unwind() -> None:
    stops = StopSignals()
    stops.install()
    stops.finish(stops.stop, unwinding=RuntimeError("could not build"))  # raises nothing: the caller's error goes on


def test_only_the_signals_module_installs_signal_handlers() -> None:
    """Every handler netbench installs goes through netbench.signals, so one module holds how stop signals behave."""
    package = Path(netbench.__file__).parent
    installers = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "signals.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "signal"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "signal"
            ):
                installers.append(f"{path.relative_to(package)}:{node.lineno}")
    assert installers == []


def test_as_fresh_interpreter_gives_ctrl_c_its_exception_and_the_others_their_default() -> None:
    before = _handlers()
    try:
        signals.ignore()
        signals.as_fresh_interpreter()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
