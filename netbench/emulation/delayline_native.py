"""The native delay line (``delayline.c``): built once per host with the C compiler, cached, else none.

Why: the Python delay line costs 30-45 us of CPU per packet, a fifth of a core at 100 Mbit/s,
which a small host takes from the emulated nodes' codecs. The C program does the same
job (same inputs, counters, signals and release rule) for a few microseconds per packet.
Where it cannot be built (no ``cc``, no libnetfilter_queue headers) the Python delay line runs
instead; run.json's ``delay_line`` names which one ran. ``$NETBENCH_DELAY_LINE`` = ``python``
or ``native`` forces one (``native`` then fails loudly where it cannot be built).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbench import environment
from netbench.cache import CacheFolderError, checked_cache_dir, trusted_file

__all__ = ["ENV", "SOURCE", "NativeUnavailable", "Choice", "wanted", "choose", "binary", "argv"]

ENV = "NETBENCH_DELAY_LINE"
SOURCE = Path(__file__).with_name("delayline.c")
CHOICES = ("auto", "native", "python")
BUILD_TIMEOUT_S = 120


class NativeUnavailable(RuntimeError):
    """The native delay line cannot be built here; the message says why in one line."""


def wanted() -> str:
    """``auto`` (native where it builds), ``native`` or ``python``, from ``$NETBENCH_DELAY_LINE``."""
    return environment.one_of(ENV, CHOICES, "auto")


@dataclass(frozen=True)
class Choice:
    """Which delay line a run starts: ``program`` (the native one), or None for the Python one and ``note`` why."""

    program: Path | None
    note: str = ""

    @property
    def build(self) -> str:
        return "native" if self.program is not None else "python"


def choose() -> Choice:
    """The native delay line where it builds, else the Python one with the reason; ``$NETBENCH_DELAY_LINE`` forces one.

    Raises ValueError for a bad ``$NETBENCH_DELAY_LINE``, NativeUnavailable where ``native`` is forced and cannot be
    built.
    """
    forced = wanted()
    if forced == "python":
        return Choice(None, f"${ENV}=python")
    try:
        return Choice(binary())
    except (NativeUnavailable, OSError, subprocess.SubprocessError) as exc:
        if forced == "native":
            raise NativeUnavailable(str(exc)) from None
        return Choice(None, f"native delay line unavailable: {exc}")


def binary() -> Path:
    """The built program for this source, compiling it into the cache on first use (atomic: racing runs are safe).

    Runs only what it can trust: the cache folder is checked first (:func:`netbench.cache.checked_cache_dir`), and
    a program found there that is a link, not ours or writable by others is built again over it.
    """
    source = SOURCE.read_bytes()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise NativeUnavailable("no C compiler (apt-get install gcc)")
    try:
        folder = checked_cache_dir()
    except CacheFolderError as exc:
        raise NativeUnavailable(str(exc)) from None
    target = folder / f"delayline-{hashlib.sha256(source).hexdigest()[:16]}"
    if trusted_file(target) and os.access(target, os.X_OK):
        return target
    fd, tmp = tempfile.mkstemp(prefix=".delayline-", dir=folder)
    os.close(fd)
    try:
        out = subprocess.run(
            [compiler, "-O2", "-o", tmp, str(SOURCE), "-lnetfilter_queue", "-lm"],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["no output"])[-1]
            hint = " (apt-get install libnetfilter-queue-dev)" if "libnetfilter_queue" in out.stderr else ""
            raise NativeUnavailable(f"cc failed{hint}: {last}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def argv(program: Path, config: dict[str, Any]) -> list[str]:
    """The command line for ``program`` from the Python delay line's config (delayline.serve's input)."""
    ports = [
        f"{side}:{int(ifindex)}:{imp['delay_s']!r}:{imp['jitter_s']!r}:{imp['loss']!r}"
        for side in ("up", "down")
        for ifindex, imp in config[side].items()
    ]
    control = [f"control={config['control_path']}"] if config.get("control_path") else []
    return [str(program), config.get("stats_path") or "", str(int(config.get("seed", 0))), *control, *ports]
