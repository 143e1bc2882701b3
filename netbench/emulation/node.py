"""A node (or the switch): a network namespace that can run commands and Python processes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from netbench.child import DEFAULT_WORKDIR, netbench_module_argv
from netbench.emulation import netns

T = TypeVar("T")


@dataclass
class Namespace:
    """Something living in one network namespace; tracks the processes it started."""

    netns: str
    processes: list[subprocess.Popen] = field(default_factory=list, repr=False)

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
        full_env = {**os.environ, **(env or {})}
        enter = netns.preexec(self.netns)

        def preexec() -> None:
            enter()
            if then is not None:
                then()

        proc = subprocess.Popen(list(argv), env=full_env, preexec_fn=preexec, **kwargs)
        self.processes.append(proc)
        return proc

    def run(self, argv: Sequence[str], timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion inside this namespace and capture its output."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(list(argv), timeout=timeout, preexec_fn=netns.preexec(self.netns), **kwargs)

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
