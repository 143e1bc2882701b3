"""Changing a running delay line's delay, jitter and loss: a control file it re-reads on SIGHUP.

A link schedule (:mod:`netbench.schedule.live`) changes a link's delay while packets flow. The delay line (Python or
native) keeps running and keeps its held packets; on SIGHUP it re-reads ``control`` in its own counters' folder
(made fresh per run, mode 0700: :mod:`netbench.emulation.delaystats`), one port per line in the form its command
line takes ports, ``up|down:IFINDEX:DELAY_S:JITTER_S:LOSS``. The file is replaced atomically (a fresh name renamed
into place), so the delay line never reads half of it. Release times stay monotonic per port pair, so a delay that
drops never reorders a flow: packets already held go first.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

from netbench import untrusted

__all__ = ["CONTROL_NAME", "control_file", "format_ports", "parse_ports", "write", "read", "reload"]

CONTROL_NAME = "control"
Ports = dict[int, dict[str, float]]  # ifindex -> {delay_s, jitter_s, loss}


def control_file(folder: Path) -> Path:
    return folder / CONTROL_NAME


def format_ports(up: Ports, down: Ports) -> str:
    """One ``side:ifindex:delay:jitter:loss`` line per port."""
    return "".join(
        f"{side}:{int(i)}:{imp['delay_s']!r}:{imp['jitter_s']!r}:{imp['loss']!r}\n"
        for side, ports in (("up", up), ("down", down))
        for i, imp in ports.items()
    )


def parse_ports(text: str) -> tuple[Ports, Ports]:
    """The inverse of :func:`format_ports`; a malformed line raises ValueError."""
    sides: dict[str, Ports] = {"up": {}, "down": {}}
    for line in text.splitlines():
        if not line.strip():
            continue
        side, index, delay, jitter, loss = line.strip().split(":")
        sides[side][int(index)] = {"delay_s": float(delay), "jitter_s": float(jitter), "loss": float(loss)}
    return sides["up"], sides["down"]


def write(path: Path, up: Ports, down: Ports) -> None:
    """Replace ``path`` with the ports' impairments (never through a link, never half a file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(format_ports(up, down))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> tuple[Ports, Ports]:
    """The ports in ``path`` (a regular file, read without following links)."""
    return parse_ports(untrusted.read_text(path, untrusted.COUNTERS))


def reload(pid: int) -> None:
    """Ask the delay line ``pid`` to re-read its control file."""
    os.kill(pid, signal.SIGHUP)
