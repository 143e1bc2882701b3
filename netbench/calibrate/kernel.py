"""This host kernel's CONFIG_HZ: the tick its TCP timers fire on, which sets when a tail-loss probe can fire
(:func:`netbench.model.probes.probe_timeout_min_s`), so a plan made on another host prices its own tick.

Read from the kernel's build configuration, ``/boot/config-RELEASE`` or ``/proc/config.gz``; where neither holds it
the kernel's default (:data:`netbench.model.framing.DEFAULT_KERNEL_HZ`) is taken and the calibration's note says so.
"""

from __future__ import annotations

import gzip
import platform
from pathlib import Path

from netbench.model.framing import DEFAULT_KERNEL_HZ

__all__ = ["config_files", "kernel_hz"]

HZ_LINE = "CONFIG_HZ="
MAX_CONFIG_BYTES = 4 << 20  # a kernel config is a few hundred kB; never read more than this of one


def config_files(release: str | None = None) -> tuple[Path, ...]:
    """Where a kernel's build configuration lives, most specific first."""
    return (Path("/boot") / f"config-{release or platform.release()}", Path("/proc/config.gz"))


def _config_hz(path: Path) -> int | None:
    """CONFIG_HZ of the configuration at ``path`` (gzip when it ends .gz); None when absent, unreadable or not a
    positive number."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            text = handle.read(MAX_CONFIG_BYTES).decode("ascii", errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    for line in text.splitlines():
        if line.startswith(HZ_LINE):
            value = line[len(HZ_LINE) :].strip()
            return int(value) if value.isdigit() and 0 < int(value) <= 100_000 else None
    return None


def kernel_hz(files: tuple[Path, ...] | None = None) -> tuple[int, str]:
    """(CONFIG_HZ, how it was found) from the first of ``files`` (default :func:`config_files`) that holds it, else
    (:data:`DEFAULT_KERNEL_HZ`, a note saying none did)."""
    for path in config_files() if files is None else files:
        hz = _config_hz(path)
        if hz is not None:
            return hz, f"CONFIG_HZ read from {path}"
    return DEFAULT_KERNEL_HZ, f"no kernel configuration readable: the kernel's default {DEFAULT_KERNEL_HZ} assumed"
