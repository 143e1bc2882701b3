"""A node (or the switch): a network namespace that can run commands and Python processes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from netbench.child import DEFAULT_WORKDIR, netbench_module_argv
from netbench.emulation import netns

T = TypeVar("T")


@dataclass
class Namespace:
    """Something living in one network namespace; tracks the processes it started.

    ``tmpdir``: the ``$TMPDIR`` of every process it starts, a folder its cluster owns and removes at teardown, so that
    what a program leaves in its temporary directory (torchrun's log folders, say) goes with the cluster.
    """

    netns: str
    processes: list[subprocess.Popen] = field(default_factory=list, repr=False)
    tmpdir: Path | None = None

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        """netbench's environment with ``env`` on top, and ``$TMPDIR`` the namespace's own whatever either says."""
        return {**os.environ, **(env or {}), **({"TMPDIR": str(self.tmpdir)} if self.tmpdir is not None else {})}

    def popen(
        self,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        then: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> subprocess.Popen:
        """Start ``argv`` inside this namespace, in its own process group; ``then`` runs in the child just before
        exec.
        """
        enter = netns.preexec(self.netns)

        def preexec() -> None:
            enter()
            if then is not None:
                then()

        proc = subprocess.Popen(list(argv), env=self._env(env), preexec_fn=preexec, **kwargs)
        self.processes.append(proc)
        return proc

    def run(
        self, argv: Sequence[str], timeout: float = 60, env: dict[str, str] | None = None, **kwargs: Any
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion inside this namespace and capture its output."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(
            list(argv), timeout=timeout, env=self._env(env), preexec_fn=netns.preexec(self.netns), **kwargs
        )

    def python(
        self, module: str, *args: str, env: dict[str, str] | None = None, workdir: str = DEFAULT_WORKDIR, **kwargs: Any
    ) -> subprocess.Popen:
        """Start netbench's ``module`` with ``args`` inside this namespace, isolated (:mod:`netbench.child`)."""
        return self.popen(netbench_module_argv(module, *args, workdir=workdir), env=env, **kwargs)

    def run_python(self, module: str, *args: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run netbench's ``module`` to completion inside this namespace, isolated, and capture its output."""
        return self.run(netbench_module_argv(module, *args), timeout=timeout, **kwargs)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a picklable-result function inside this namespace (forked child)."""
        return netns.call_in(self.netns, fn, *args)

    def stop_processes(self, grace_s: float = 1.0) -> None:
        """Terminate everything this namespace started (whole process groups), then reap."""
        live = [p for p in self.processes if p.poll() is None]
        for proc in live:
            try:
                os.killpg(proc.pid, 15)
            except ProcessLookupError:
                pass
        for proc in live:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=grace_s)
        self.processes.clear()


@dataclass
class Node(Namespace):
    """An emulated host: one interface into the switch, one address, no route beyond the subnet."""

    index: int = 0
    address: str = ""
    iface: str = "eth0"
    port: str = ""  # its switch-side veth, in the switch namespace


@dataclass
class Switch(Namespace):
    """The namespace that routes between every node's port (see netbench.emulation.cluster)."""

    ifindex: dict[str, int] = field(default_factory=dict)  # port name -> ifindex, filled when built
