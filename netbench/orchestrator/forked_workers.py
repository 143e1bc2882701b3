"""The orchestrator's side of the worker fork server (:mod:`netbench.orchestrator.forkserver`): start it, ask for
workers.

Every run's workers are forked by a server that imported torch once (:class:`Launcher`): `netbench run` starts one
for its run, a sweep one for all its points. A worker forked by the server is not the orchestrator's child, so
:class:`ForkedWorker` stands in for its ``subprocess.Popen``: the server reports each child's exit code on its
output, which a reader thread collects. Everything the runner's watch loop uses (``pid``, ``poll``, ``wait``) and a
kill work as they do on a Popen.

Waiting on the server is waiting on setup: its preload takes seconds of CPU, longer on a crowded host. So each wait
ends on the server's answer or its exit, and gives up only when the server uses no CPU for a long while
(:mod:`netbench.orchestrator.activity`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netbench.child import netbench_module_argv
from netbench.emulation import netns
from netbench.emulation.errors import ClusterError
from netbench.orchestrator.activity import Stalled, wait_while_working


class ForkedWorker:
    """A worker the fork server forked: Popen's ``pid``/``poll``/``wait``/``kill``/``returncode``."""

    def __init__(self, pid: int, server: ForkServer) -> None:
        self.pid = pid
        self._server = server

    @property
    def returncode(self) -> int | None:
        return self._server.exit_code(self.pid)

    def poll(self) -> int | None:
        code = self.returncode
        if code is None and not self._server.alive():
            return -signal.SIGKILL  # the server died and took its children with it (they die with their parent)
        return code

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            time.sleep(0.02)
        return code

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    terminate = kill


class ForkServer:
    """The fork server: started beside the orchestrator (its own process group; it dies with the orchestrator)."""

    def __init__(self, threads: int, workdir: str) -> None:
        parent = os.getpid()

        def own_group() -> None:
            os.setpgid(0, 0)
            netns.die_with_parent(parent)

        self.proc = subprocess.Popen(
            netbench_module_argv("netbench.orchestrator.forkserver", workdir=workdir),
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
            preexec_fn=own_group,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.threads = threads
        self._codes: dict[int, int] = {}
        self._started: list[int] = []
        self._lock = threading.Condition()
        self._reading = False

    def wait_ready(self) -> None:
        """Wait for the server's ``ready``: its imports done; a ClusterError with its last words if it does not come
        (it exited, or it used no CPU for a long while)."""
        if self._reading:
            return
        try:
            answered = lambda: bool(select.select([self.proc.stdout], [], [], 0.05)[0])  # noqa: E731
            wait_while_working(answered, self.proc.pid, self.alive, poll_s=0.0)
            line = self.proc.stdout.readline().strip()
        except Stalled as exc:
            line = f"no answer ({exc})"
        if line != "ready":
            self.proc.kill()
            err = (self.proc.stderr.read() or "").strip().splitlines() if self.proc.wait() is not None else []
            raise ClusterError(f"the worker fork server did not start: {err[-1] if err else line or 'no answer'}")
        self._reading = True
        threading.Thread(target=self._read, name="forkserver", daemon=True).start()
        threading.Thread(target=self._drain, name="forkserver-stderr", daemon=True).start()

    def _drain(self) -> None:
        """Read the server's own error output (its workers write to their logs), so that it can never fill the pipe."""
        for _ in self.proc.stderr:
            pass

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "started" in message:
                    self._started.append(int(message["started"]))
                elif "exited" in message:
                    self._codes[int(message["exited"])] = int(message["code"])
                self._lock.notify_all()
        with self._lock:
            self._lock.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            return self._codes.get(pid)

    def start(self, netns_name: str, spec: Path, log: Path, nice: int) -> ForkedWorker:
        """Fork a worker in namespace ``netns_name`` that runs ``spec``, its output into ``log`` (which must exist)."""
        return self._fork(
            {"netns": netns_name, "spec": str(spec), "log": str(log), "threads": self.threads, "nice": nice}
        )

    def call(self, target: str, args: list[Any], log: Path) -> ForkedWorker:
        """Fork a child that calls netbench's ``module:function`` with ``args`` (JSON), its output into ``log``."""
        return self._fork({"call": target, "args": args, "log": str(log), "threads": self.threads})

    def _fork(self, request: dict[str, Any]) -> ForkedWorker:
        """Send one request; the child the server forked for it."""
        self.wait_ready()
        with self._lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        try:
            wait_while_working(self._answered, self.proc.pid, self.alive, poll_s=0.0)
        except Stalled as exc:
            raise ClusterError(f"the worker fork server did not answer: {exc}") from None
        with self._lock:
            return ForkedWorker(self._started.pop(0), self)

    def _answered(self) -> bool:
        """Whether the server has answered (waits a moment for it)."""
        with self._lock:
            if not self._started:
                self._lock.wait(timeout=0.05)
            return bool(self._started)

    def close(self, grace_s: float = 2.0) -> None:
        """Ask the server to leave (its input closes), then kill its process group if it has not within ``grace_s``."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


class Launcher:
    """Starts a run's workers: forked by a fork server (started once, kept for the runs that follow), rank 0 first.

    A context manager: leaving it stops the server (whose workers the cluster's teardown has ended by then).
    """

    def __init__(self) -> None:
        self.server: ForkServer | None = None

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start_server(self, threads: int) -> ForkServer:
        """The fork server for workers of ``threads`` threads, started if there is none (it imports torch meanwhile)."""
        if self.server is None or self.server.threads != threads or not self.server.alive():
            self.close()
            self.server = ForkServer(threads, os.getcwd())
        return self.server

    def start_workers(self, workers: list[tuple[str, Path, Path]], threads: int, nice: int) -> list[ForkedWorker]:
        """A worker per ``(node namespace, spec, log)``, in rank order, forked by the server; logs are made here.

        All at once: they meet at a file store in the run's folder (:attr:`netbench.rundir.layout.RunDir.rendezvous`),
        which needs no rank to listen before the others join.
        """
        server = self.start_server(threads)
        started: list[ForkedWorker] = []
        for node_netns, spec, log in workers:
            log.open("x").close()
            started.append(server.start(node_netns, spec, log, nice))
        return started

    def forker(self, threads: int) -> Callable[[str, list[Any], Path], ForkedWorker]:
        """What :func:`netbench.calibrate.measure.measure` takes as ``fork``: a call forked by the server."""
        return lambda target, args, log: self.start_server(threads).call(target, args, log)

    def close(self) -> None:
        """Stop the server, if one runs."""
        if self.server is not None:
            self.server.close()
            self.server = None
