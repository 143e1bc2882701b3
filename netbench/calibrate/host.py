"""What this host is, as the model's measured constants depend on it: its cores, CPU, software versions.

Kept apart from the cache (:mod:`netbench.calibrate.hostcache`) and the measurement
(:mod:`netbench.calibrate.measure`) so both can name the host without importing each other.
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from netbench import __version__
from netbench.model.calibration import SCHEMA_VERSION

__all__ = ["WORKER_THREADS", "host_cpus", "host_key"]

WORKER_THREADS = 1  # torch threads per worker the measurement uses (run's --threads default)


def host_cpus() -> int:
    """Cores this process may run on: the ones the emulated nodes share."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_version() -> str:
    """The installed torch's version, read from its metadata: naming the host does not import torch."""

    try:
        return version("torch")
    except PackageNotFoundError:
        return "absent"


def host_key(threads: int = WORKER_THREADS) -> dict[str, str]:
    """What the measured constants depend on; any change makes a new cache entry."""
    # the schema: an entry measured before the costs by model size and by settings is measured again
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpus": str(host_cpus()),
        "torch": _torch_version(),
        "netbench": __version__,
        "threads": str(threads),
        "calibration": str(SCHEMA_VERSION),
    }
