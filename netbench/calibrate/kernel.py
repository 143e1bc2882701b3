"""This host kernel's CONFIG_HZ: the tick its TCP timers fire on, which sets when a tail-loss probe can fire
(:func:`netbench.model.probes.probe_timeout_min_s`), so a plan made on another host prices its own tick.

Read from the kernel's build configuration, ``/boot/config-RELEASE`` or ``/proc/config.gz``, which is exact; where
neither holds it, measured from the jiffies counter in ``/proc/timer_list`` (root-readable) over a quarter second and
snapped to the nearest tick rate Linux offers; where that fails too, the kernel's default
(:data:`netbench.model.framing.DEFAULT_KERNEL_HZ`) is taken. The calibration's note says which.
"""

from __future__ import annotations

import gzip
import platform
import time
from pathlib import Path

from netbench.model.framing import DEFAULT_KERNEL_HZ

__all__ = [
    "TIMER_LIST",
    "config_files",
    "configured_hz",
    "jiffies_rate",
    "kernel_hz",
    "measured_hz",
    "snapped_hz",
]

HZ_LINE = "CONFIG_HZ="
MAX_CONFIG_BYTES = 4 << 20  # a kernel config is a few hundred kB; never read more than this of one
TIMER_LIST = Path("/proc/timer_list")
JIFFIES_LINE = "jiffies:"
MAX_TIMER_LIST_BYTES = 256 << 10  # the first CPU's section, which holds the first jiffies line, is a few kB
TICK_RATES = (100, 250, 300, 1000)  # the CONFIG_HZ choices of the kernel's kernel/Kconfig.hz
TICK_TOLERANCE = 0.10  # a measured rate further than this from the nearest choice is not taken
MEASURE_S = 0.25  # ±1 jiffy of counting is 4 % of the 25 ticks HZ=100 makes in this time


def config_files(release: str | None = None) -> tuple[Path, ...]:
    """Where a kernel's build configuration lives, most specific first."""
    return (Path("/boot") / f"config-{release or platform.release()}", Path("/proc/config.gz"))


def _count_after(text: str, prefix: str) -> int | None:
    """The whole number on the first line of ``text`` that starts with ``prefix``; None without one."""
    for line in text.splitlines():
        if line.startswith(prefix):
            value = line[len(prefix) :].strip()
            return int(value) if value.isdigit() else None
    return None


def _config_hz(path: Path) -> int | None:
    """CONFIG_HZ of the configuration at ``path`` (gzip when it ends .gz); None when absent, unreadable or not a
    positive number."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            text = handle.read(MAX_CONFIG_BYTES).decode("ascii", errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    value = _count_after(text, HZ_LINE)
    return value if value is not None and 0 < value <= 100_000 else None


def _jiffies(path: Path) -> tuple[int, float] | None:
    """(the first ``jiffies:`` count in the timer list at ``path``, the monotonic time it was read at: the middle
    of the read); None when unreadable or without one."""
    try:
        start = time.monotonic()
        with open(path, "rb") as handle:
            text = handle.read(MAX_TIMER_LIST_BYTES).decode("ascii", errors="replace")
        at = (start + time.monotonic()) / 2
    except OSError:
        return None
    value = _count_after(text, JIFFIES_LINE)
    return None if value is None else (value, at)


def jiffies_rate(timer_list: Path = TIMER_LIST, interval_s: float = MEASURE_S) -> float | None:
    """Jiffies a second that ``timer_list``'s counter advances over ``interval_s``; None when it cannot be read."""
    first = _jiffies(timer_list)
    if first is None:
        return None
    time.sleep(interval_s)
    second = _jiffies(timer_list)
    if second is None or second[1] <= first[1]:
        return None
    return (second[0] - first[0]) / (second[1] - first[1])


def snapped_hz(rate: float) -> int | None:
    """The nearest of :data:`TICK_RATES` to a measured ``rate``; None when it is not within :data:`TICK_TOLERANCE`."""
    nearest = min(TICK_RATES, key=lambda hz: abs(rate - hz))
    return nearest if abs(rate - nearest) <= TICK_TOLERANCE * nearest else None


def measured_hz(timer_list: Path = TIMER_LIST, interval_s: float = MEASURE_S) -> int | None:
    """:func:`jiffies_rate` snapped (:func:`snapped_hz`); None when the counter cannot be read or matches no tick."""
    rate = jiffies_rate(timer_list, interval_s)
    return None if rate is None else snapped_hz(rate)


def configured_hz(files: tuple[Path, ...] | None = None) -> tuple[int, Path] | None:
    """(CONFIG_HZ, the file it is in) from the first of ``files`` (default :func:`config_files`) that holds it."""
    for path in config_files() if files is None else files:
        hz = _config_hz(path)
        if hz is not None:
            return hz, path
    return None


def kernel_hz(files: tuple[Path, ...] | None = None, timer_list: Path = TIMER_LIST) -> tuple[int, str]:
    """(CONFIG_HZ, how it was found): :func:`configured_hz` of ``files``, else :func:`measured_hz` of
    ``timer_list``, else (:data:`DEFAULT_KERNEL_HZ`, a note saying neither worked)."""
    configured = configured_hz(files)
    if configured is not None:
        return configured[0], f"CONFIG_HZ read from {configured[1]}"
    hz = measured_hz(timer_list)
    if hz is not None:
        return hz, f"no kernel configuration readable: CONFIG_HZ measured from {timer_list}'s jiffies over {MEASURE_S}s"
    return (
        DEFAULT_KERNEL_HZ,
        f"no kernel configuration readable nor jiffies measurable in {timer_list}: "
        f"the kernel's default {DEFAULT_KERNEL_HZ} assumed",
    )
