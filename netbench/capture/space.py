"""Room for a run's capture, checked before anything is built.

tcpdump stops each switch port at :data:`~netbench.capture.tcpdump.MAX_PACKETS` records of at
most SNAPLEN bytes plus a 16-byte record header, so a port's pcap never exceeds
:func:`port_bytes` (about 470 MB) and a run's capture never exceeds one such file per node. A
filesystem that fills up mid-run makes tcpdump stop writing (the steps after lose their capture
columns) and can fail the run's own files too, so a run whose folder's filesystem has less room
than that bound is refused up front.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from netbench.capture.tcpdump import MAX_PACKETS, SNAPLEN, Capture
from netbench.units import format_bytes

PCAP_FILE_HEADER = 24
PCAP_RECORD_HEADER = 16
HEADROOM_BYTES = 64 << 20  # the run's own files (steps.csv, records, logs) beside the capture


class CapturedRun(Protocol):
    """What of a RunConfig decides its capture's size."""

    capture: bool
    keep_pcap: bool
    out_dir: Path

    @property
    def cluster(self): ...  # noqa: ANN201 - a ClusterSpec: only its node count is read


class NoRoom(RuntimeError):
    """The run folder's filesystem cannot hold the capture; one line."""


def port_bytes() -> int:
    """The largest pcap one switch port's tcpdump writes."""
    return PCAP_FILE_HEADER + MAX_PACKETS * (SNAPLEN + PCAP_RECORD_HEADER)


def needed_bytes(runs: Iterable[CapturedRun]) -> int:
    """Disk the captures of ``runs`` (run one after another) may hold at once: kept pcaps add up, others are removed
    after each run.
    """
    kept, largest = 0, 0
    for run in runs:
        if not run.capture:
            continue
        size = run.cluster.nodes * port_bytes()
        if run.keep_pcap:
            kept += size
        else:
            largest = max(largest, size)
    return kept + largest


def _existing(folder: Path) -> Path:
    """``folder`` or its nearest existing parent: where its files will land."""
    folder = folder.expanduser().absolute()
    return next(p for p in (folder, *folder.parents) if p.exists())


def check_room(runs: list[CapturedRun], option: str = "--capture") -> None:
    """NoRoom when the first run's folder's filesystem lacks room for the captures of ``runs`` (nothing if none
    captures).
    """
    need = needed_bytes(runs)
    if need == 0 or not Capture.available():
        return
    folder = runs[0].out_dir
    free = shutil.disk_usage(_existing(folder)).free
    if free < need + HEADROOM_BYTES:
        raise NoRoom(
            f"{option}: the capture may take up to {format_bytes(need)} (each node's port stops at "
            f"{MAX_PACKETS} packets) "
            f"but {str(folder)!r} has {format_bytes(free)} free; free some space, use another --out, or --no-capture"
        )
