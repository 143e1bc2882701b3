"""Start and stop the TCP sampler in every node of a running cluster (:mod:`netbench.trace.tcp_sampler`)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from netbench.trace.tcp_sampler import DEFAULT_INTERVAL_S


class NodeLike(Protocol):
    index: int

    def python(self, module: str, *args: str, **kwargs) -> subprocess.Popen: ...


def tcp_folder(run_dir: Path) -> Path:
    """Where each node's TCP samples go: ``RUN_DIR/tcp/nodeN.jsonl``."""
    return run_dir / "tcp"


class TcpSampling:
    """One sampler process per node; :meth:`stop` ends them (SIGTERM: each writes its cost) and waits."""

    def __init__(self, nodes: Sequence[NodeLike], run_dir: Path, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        folder = tcp_folder(run_dir)
        folder.mkdir(exist_ok=True)
        self.procs = [
            node.python(
                "netbench.trace.tcp_sampler",
                "--out",
                str(folder / f"node{node.index}.jsonl"),
                "--interval",
                str(interval_s),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for node in nodes
        ]

    def stop(self, timeout_s: float = 5.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
