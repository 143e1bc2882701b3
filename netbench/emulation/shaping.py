"""Rate shaping (tbf) and, where the kernel has it, netem, on one interface direction.

Sizing matters more than the qdisc: a burst too small for the timer resolution under-delivers, one
too large lets the rate overshoot for seconds (docs/concepts/emulation.md, Shaping), so burst and queue limit are
derived from the rate, never fixed constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyroute2 import IPRoute

from netbench.emulation import acksfirst
from netbench.emulation.spec import DirectionSpec
from netbench.frames import (  # tbf counts whole frames: bursts and limits are sized in them
    FRAME_BYTES,
    shaper_burst_bytes,
)

TC_H_ROOT = 0xFFFFFFFF
OUR_HANDLE = 0x10000  # "1:", the handle apply() gives the root qdisc
OUR_KINDS = ("tbf", "netem")
TX_QUEUE_FRAMES = 1000  # DEFAULT_TX_QUEUE_LEN: an Ethernet device's transmit queue (txqueuelen) on Linux


@dataclass(frozen=True)
class TbfParams:
    """Token bucket settings derived from a rate."""

    rate_bps: float
    burst_bytes: int
    limit_bytes: int

    @classmethod
    def for_rate(cls, rate_bps: float, offload: bool) -> TbfParams:
        """Burst: 2 ms of line rate (at least 10 frames, or one GSO packet with offloads on).

        Limit: on top of the burst, 100 ms of line rate or a Linux NIC's transmit queue
        (txqueuelen, 1000 frames), whichever holds more. The tbf stands where a real host has its
        NIC queue, and TCP's small-queue limit lets one socket park far more than 100 ms of a slow
        link there (bbr paces from a sub-millisecond RTT at first): at 10mbit a 125 kB queue
        dropped 126 packets of a 2 s bidirectional iperf3 and made a periodic dense all-reduce retransmit 3-5 % of its
        bytes, which a real host's 1000 frames would not.
        """
        rate_bytes = rate_bps / 8
        burst = shaper_burst_bytes(rate_bps, offload)
        limit = burst + max(int(rate_bytes * 0.1), TX_QUEUE_FRAMES * FRAME_BYTES)
        return cls(rate_bps, burst, limit)

    @property
    def limit_frames(self) -> int:
        """The queue limit in whole frames: what a pfifo beneath the shaper holds."""
        return max(1, self.limit_bytes // FRAME_BYTES)


def apply(
    ipr: IPRoute, ifindex: int, direction: DirectionSpec, offload: bool, use_netem: bool, acks_first: bool
) -> dict:
    """Shape egress of ``ifindex``: tbf alone, or netem (delay/jitter/loss) with tbf beneath it; with
    ``acks_first``, tbf's queue serves pure ACKs ahead of data (:mod:`netbench.emulation.acksfirst`).

    Returns a description of what was installed, for run.json.
    """
    tbf = TbfParams.for_rate(direction.rate_bps, offload)
    tbf_args = dict(rate=f"{int(direction.rate_bps)}bit", burst=tbf.burst_bytes, limit=tbf.limit_bytes)
    installed: dict = {
        "tbf": {"rate_bps": tbf.rate_bps, "burst_bytes": tbf.burst_bytes, "limit_bytes": tbf.limit_bytes}
    }
    if use_netem and direction.impaired:
        netem_args: dict = {"delay": int(direction.delay_s * 1e6), "limit": 1_000_000}
        if direction.jitter_s:
            netem_args["jitter"] = int(direction.jitter_s * 1e6)
        if direction.loss:
            netem_args["loss"] = direction.loss * 100
        ipr.tc("add", "netem", index=ifindex, handle="1:", **netem_args)
        ipr.tc("add", "tbf", index=ifindex, parent="1:1", handle="10:", **tbf_args)
        installed["netem"] = {"delay_s": direction.delay_s, "jitter_s": direction.jitter_s, "loss": direction.loss}
        tbf_class = "10:1"
    else:
        ipr.tc("add", "tbf", index=ifindex, handle="1:", **tbf_args)
        tbf_class = "1:1"
    if acks_first:
        installed.update(acksfirst.install(ipr, ifindex, tbf_class, tbf.limit_frames))
    return installed


def root_qdisc(ipr: IPRoute, index: int) -> tuple[str, int] | None:
    """(kind, handle) of the interface's root qdisc; handle 0 means the kernel's default."""
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == TC_H_ROOT:
            return str(msg.get_attr("TCA_KIND")), int(msg["handle"])
    return None


def clear(ipr: IPRoute, ifindex: int) -> None:
    """Remove the root qdisc of ``ifindex`` (restores the default)."""
    try:
        ipr.tc("del", index=ifindex, handle="1:", root=True)
    except Exception:  # noqa: BLE001 - nothing installed is fine
        pass
