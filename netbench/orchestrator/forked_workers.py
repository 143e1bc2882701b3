"""The orchestrator's side of the worker fork server (:mod:`netbench.orchestrator.forkserver`): start it, ask for
workers.

A worker forked by the server is not the orchestrator's child, so :class:`ForkedWorker` stands in for its
``subprocess.Popen``: the server reports each child's exit code on its output, which a reader thread collects.
Everything the runner's watch loop uses (``pid``, ``poll``, ``wait``) and a kill work as they do on a Popen.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

from netbench.child import netbench_module_argv
from netbench.emulation import netns
from netbench.emulation.errors import ClusterError

READY_TIMEOUT_S = 120.0  # torch's import on a loaded 2-core host takes seconds; far more means the server is broken
ANSWER_TIMEOUT_S = 30.0


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
        """Wait for the server's ``ready``: its imports done; a ClusterError with its last words if it does not come."""
        if self._reading:
            return
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        line = self.proc.stdout.readline().strip() if ready else ""
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
        self.wait_ready()
        request = {"netns": netns_name, "spec": str(spec), "log": str(log), "threads": self.threads, "nice": nice}
        with self._lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            if (
                not self._lock.wait_for(lambda: self._started or not self.alive(), timeout=ANSWER_TIMEOUT_S)
                or not self._started
            ):
                raise ClusterError("the worker fork server did not answer")
            return ForkedWorker(self._started.pop(0), self)

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
