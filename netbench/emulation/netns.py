"""Entering network namespaces: for child processes, for short in-process jobs, and sysctls.

pyroute2 talks netlink into a namespace by itself; these helpers cover the rest: starting a
process inside a node (``preexec_fn``), running a small Python function there (fork + setns), and
per-namespace sysctls, which live under /proc/sys/net of whichever namespace the writer is in.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import psutil
from pyroute2 import netns as pr_netns

from netbench import signals
from netbench.validation import error_text

T = TypeVar("T")
NETNS_DIR = Path(pr_netns.NETNS_RUN_DIR)


def netns_path(name: str) -> Path:
    return NETNS_DIR / name


def enter(name: str) -> None:
    """Move the calling process (or thread) into namespace ``name``; never creates one."""
    pr_netns.setns(str(netns_path(name)), flags=0, fork=False)


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: dlopen() in a child forked from a threaded parent may deadlock


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL the calling process when its parent dies (``prctl(PR_SET_PDEATHSIG)``).

    A node's processes (workers, tcpdump, the delay line) are in process groups of their own, so
    nothing else reaches them when the orchestrator is SIGKILLed; without this they would keep
    training and capturing in namespaces nobody owns until `netbench clean`. The signal follows
    the *thread* that started the child, which is the one that runs (and tears down) the cluster.
    """
    _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def preexec(name: str) -> Callable[[], None]:
    """A ``preexec_fn``: own process group (for clean kills), dies with its parent, enters ``name``."""
    parent = os.getpid()

    def _enter() -> None:
        os.setpgid(0, 0)
        die_with_parent(parent)
        enter(name)

    return _enter


def call_in(name: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a forked child inside namespace ``name`` and return its result.

    A fork keeps the caller's namespace untouched, even if ``fn`` fails halfway.
    """
    read_fd, write_fd = os.pipe()
    with signals.kept_until_done():  # from the fork to the reaping, a stop signal waits
        pid = os.fork()
        if pid == 0:
            _report_call(read_fd, write_fd, name, fn, args)
        os.close(write_fd)
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                data = pipe.read()
        finally:
            wait_for_child(pid)  # reaped even when interrupted: no zombie, nothing still half-built
    ok, value = pickle.loads(data)
    if not ok:
        raise RuntimeError(f"in namespace {name}: {value}")
    return value


def call_each(calls: Sequence[tuple[str, Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    """Run each ``fn(*args)`` of ``calls`` inside its namespace ``name``, in order, in one forked child; their results.

    One fork instead of one per namespace (each fork copies the caller's page tables: tens of ms for a large
    orchestrator, seconds for a 64-node cluster). For jobs that touch only the namespace the child is in at the time:
    netlink sockets opened after entering it, sysctls under /proc/sys/net. Not for jobs that mount a sysfs (it would
    keep showing the first namespace's devices).
    """
    if not calls:
        return []
    results, failed = call_in(calls[0][0], _call_each_inside, list(calls))
    if failed is not None:
        raise RuntimeError(f"in namespace {failed[0]}: {failed[1]}")
    return results


def _call_each_inside(
    calls: list[tuple[str, Callable[..., Any], tuple[Any, ...]]],
) -> tuple[list[Any], tuple[str, str] | None]:
    """The results so far, and (namespace, error) of the call that failed (None: none did)."""
    results = []
    for name, fn, args in calls:
        try:
            enter(name)
            results.append(fn(*args))
        except Exception as exc:  # noqa: BLE001 - the parent names the namespace it failed in
            return results, (name, error_text(exc))
    return results, None


def _report_call(read_fd: int, write_fd: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> NoReturn:
    """In :func:`call_in`'s child: finish the job whatever the caller does, send the outcome, never return into its
    code.
    """
    try:
        signals.block_in_child()
        os.close(read_fd)
        try:
            enter(name)
            payload = pickle.dumps((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            payload = pickle.dumps((False, error_text(exc)))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)  # BrokenPipeError when the caller gave up waiting: nobody to tell
    finally:
        os._exit(0)


def write_sysctls(values: dict[str, str]) -> None:
    """Write ``net.*`` sysctls of the namespace the caller is in."""
    for key, value in values.items():
        Path("/proc/sys", *key.split(".")).write_text(value)


def set_sysctls(name: str, values: dict[str, str]) -> None:
    """Write ``net.*`` sysctls inside namespace ``name``."""
    call_in(name, write_sysctls, values)


def set_sysctls_each(names: Sequence[str], values: dict[str, str]) -> None:
    """Write the same ``net.*`` sysctls inside each namespace of ``names`` (one fork for all)."""
    call_each([(name, write_sysctls, (values,)) for name in names])


@contextmanager
def open_fd(name: str) -> Iterator[int]:
    """A file descriptor of namespace ``name`` (for moving links into it), closed afterwards."""
    fd = os.open(netns_path(name), os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


def inode_of(name: str) -> int | None:
    try:
        return netns_path(name).stat().st_ino
    except OSError:
        return None


def pids_in(names: list[str]) -> list[int]:
    """Processes whose network namespace is one of ``names`` (found via /proc/PID/ns/net)."""
    inodes = {ino for ino in map(inode_of, names) if ino is not None}
    if not inodes:
        return []
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.stat(f"/proc/{proc.pid}/ns/net").st_ino in inodes:
                found.append(proc.pid)
        except OSError:
            continue
    return found


def kill_pids(pids: list[int], grace_s: float = 1.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL whatever is left."""
    procs = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            proc = psutil.Process(pid)
            proc.terminate()
            procs.append(proc)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace_s)


def list_netns() -> list[str]:
    return sorted(pr_netns.listnetns())


def create(name: str) -> None:
    """Create namespace ``name`` as iproute2 does: a forked child unshares and bind-mounts it.

    pyroute2's own ``netns.create`` gives its helper process a timeout and kills it when the
    machine is busy, which can leave the mount point without a namespace behind it.
    """
    with signals.kept_until_done():  # a Ctrl-C must not leave a mount point without a namespace
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signals.block_in_child()
                pr_netns._create(name)  # unshare(CLONE_NEWNET) in this child, bind /proc/self/ns/net
                code = 0
            except BaseException:  # noqa: BLE001 - reported through the exit status
                traceback.print_exc()
            finally:
                os._exit(code)
        exit_code = wait_for_child(pid)
    if exit_code != 0 or inode_of(name) is None:
        raise OSError(f"could not create network namespace {name}")


def wait_for_child(pid: int) -> int:
    """The exit code of forked child ``pid`` (negative: the signal that killed it), waited for to the end.

    A Ctrl-C cannot cut the wait short: the child finishes first, then the signal is raised.
    Otherwise a child still creating a namespace could finish *after* the teardown that the
    Ctrl-C started had looked for it, and leave it behind. The wait leaves the child unreaped
    (``WNOWAIT``) so that it can be repeated: a signal's exception may land just after the call
    returned, and a repeated ``waitpid`` on a child already reaped fails with ECHILD.
    """
    exited, interrupted = signals.through_interrupts(lambda: os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT))
    _, reaping_interrupted = signals.through_interrupts(lambda: _reap(pid))
    cut_short = interrupted or reaping_interrupted
    if cut_short is not None:
        raise cut_short
    return exited.si_status if exited.si_code == os.CLD_EXITED else -exited.si_status


def _reap(pid: int) -> None:
    """Reap child ``pid``, which has exited; a try cut short just after it had reaped the child leaves nothing to do."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def remove(name: str) -> None:
    try:
        pr_netns.remove(name)
    except FileNotFoundError:
        pass
