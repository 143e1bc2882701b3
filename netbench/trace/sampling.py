"""The TCP sampler of a running cluster, one process for every node (:mod:`netbench.trace.tcp_sampler`)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from netbench.trace.tcp_sampler import DEFAULT_INTERVAL_S


class NodeLike(Protocol):
    index: int
    netns: str

    def python(self, module: str, *args: str, **kwargs) -> subprocess.Popen: ...


def tcp_folder(run_dir: Path) -> Path:
    """Where each node's TCP samples go: ``RUN_DIR/tcp/nodeN.jsonl``."""
    return run_dir / "tcp"


class TcpSampling:
    """One sampler process for every node; :meth:`stop` ends it (SIGTERM: it writes its cost) and waits.

    ``interval_s``: between samples; a dilated run passes the interval times its dilation, so that its trace has
    as many samples per emulated second as an undilated one and its sampler as much CPU per dilated second.
    """

    def __init__(self, nodes: Sequence[NodeLike], run_dir: Path, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        folder = tcp_folder(run_dir)
        folder.mkdir(exist_ok=True)
        which = [arg for node in nodes for arg in ("--node", f"{node.index}={node.netns}")]
        self.procs = (
            [
                nodes[0].python(
                    "netbench.trace.tcp_sampler",
                    *which,
                    "--folder",
                    str(folder),
                    "--interval",
                    str(interval_s),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            ]
            if nodes
            else []
        )

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
