"""Header-only packet capture on every switch port, with tcpdump inside the switch namespace.

A switch port sees both directions of its node's link after shaping (ingress after the node's
uplink tbf, egress after the port's downlink tbf), so one capture per port is the node's wire.
"""

from __future__ import annotations

import os
import platform
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from netbench.capture import setgroups_noop
from netbench.rootless import MARKER

SNAPLEN = 96  # Ethernet + IPv4 + TCP with options; payload is never kept
# tcpdump stops after this many packets on a port (-c): at most 4.2 M records of 112 bytes, 470 MB
# of disk per port, about 30 s of a saturated 1gbit link. The steps after the last packet of a
# capture that reached the cap get no capture columns (see capture.pcap.StepBins.truncated).
MAX_PACKETS = 1 << 22
BUFFER_KIB = 32768
# Neither --immediate-mode nor -U: per-packet wake-ups and per-packet writes cost tcpdump 1.5 us
# of CPU per packet against 0.3 us when TPACKET_V3 hands packets over in blocks and stdio writes
# them in buffers (measured at 1gbit, 850k packets) -- CPU the workers share on a small host. The
# price: the kernel retires a partly filled block only on its timer (libpcap's 1000 ms timeout),
# and a block still in the kernel when tcpdump stops is lost, so stop() first waits out the timer.
BLOCK_TIMEOUT_S = 1.0
DRAIN_S = BLOCK_TIMEOUT_S + 0.3


class Namespace(Protocol):
    """Where tcpdump runs: a switch's network namespace (the emulator's ``Switch``)."""

    def popen(
        self,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        then: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> subprocess.Popen: ...


@dataclass
class PortCapture:
    port: str
    path: Path
    proc: subprocess.Popen


class Capture:
    """tcpdump on each port; ``stop()`` flushes and returns {port: pcap path}."""

    def __init__(self, switch: Namespace, ports: list[str], out_dir: Path) -> None:
        self.switch = switch
        self.ports = ports
        self.out_dir = out_dir
        self.captures: list[PortCapture] = []

    @staticmethod
    def available() -> bool:
        return unavailable_reason() is None

    def start(self, timeout_s: float = 10.0) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        rootless = bool(os.environ.get(MARKER))
        # Rootless: stay the namespace's root (-Z root) and let its setgroups() succeed as a no-op (see setgroups_noop).
        extra, then = (["-Z", "root"], setgroups_noop.preexec()) if rootless else ([], None)
        for port in self.ports:
            path = self.out_dir / f"{port}.pcap"
            proc = self.switch.popen(
                [
                    "tcpdump",
                    "-i",
                    port,
                    "-s",
                    str(SNAPLEN),
                    "-B",
                    str(BUFFER_KIB),
                    "-c",
                    str(MAX_PACKETS),
                    "-n",
                    *extra,
                    "-w",
                    str(path),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                then=then,
            )
            self.captures.append(PortCapture(port, path, proc))
        deadline = time.monotonic() + timeout_s
        for cap in self.captures:  # tcpdump says "listening on PORT" once the socket is bound
            ready, _, _ = select.select([cap.proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            line = cap.proc.stderr.readline() if ready else ""
            if "listening" not in line:
                raise RuntimeError(f"tcpdump on {cap.port} did not start: {line.strip() or 'no answer'}")

    def stop(self) -> tuple[dict[str, Path], dict[str, int]]:
        """Stop every tcpdump; returns pcap paths and the packets each dropped (kernel + buffer)."""
        dropped: dict[str, int] = {}
        if any(cap.proc.poll() is None for cap in self.captures):
            time.sleep(DRAIN_S)  # let the kernel hand over its last, partly filled block
        for cap in self.captures:
            if cap.proc.poll() is None:
                cap.proc.send_signal(signal.SIGINT)
        for cap in self.captures:
            try:
                _, err = cap.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                cap.proc.kill()
                _, err = cap.proc.communicate()
            dropped[cap.port] = _dropped(err or "")
        return {cap.port: cap.path for cap in self.captures}, dropped


def unavailable_reason() -> str | None:
    """Why tcpdump cannot capture here, or None.

    In a rootless run tcpdump needs the setgroups no-op (:mod:`netbench.capture.setgroups_noop`),
    which knows the system call numbers of x86-64 and arm64 only; elsewhere such runs measure
    wire bytes by interface counters only.
    """
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed (apt-get install tcpdump)"
    if os.environ.get(MARKER) and not setgroups_noop.supported():
        return (
            f"rootless capture on {platform.machine()} is not supported: tcpdump's privilege drop calls setgroups(), "
            "which an unprivileged user namespace denies"
        )
    return None


def _dropped(stderr: str) -> int:
    """Sum of tcpdump's 'N packets dropped by kernel' and 'dropped by interface' lines."""
    total = 0
    for line in stderr.splitlines():
        if "dropped by" in line:
            try:
                total += int(line.split()[0])
            except ValueError:
                continue
    return total
