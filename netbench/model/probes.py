"""Spurious tail-loss probes of a fan-out: why gloo's all_to_all puts more on the wire than its messages and ACKs.

A rank of gloo's all_to_all (gloo/alltoall.cc) hands its N - 1 messages to their sockets together, once the receivers'
ready notifications are in, and its uplink's shaper sends them one after the other: the k-th message's first segment
leaves k messages' transfer after the call starts. Linux arms a tail-loss probe when a flow sends (RFC 8985;
net/ipv4/tcp_output.c, ``tcp_schedule_loss_probe``: 2 srtt + 2 ms with more than one segment out, in whole jiffies
of the sender's CONFIG_HZ, which the calibration reads: :attr:`Framing.kernel_hz`) and
re-arms it on each ACK, so a flow whose first ACK comes later than that sends its last segment again although nothing
was lost: the receiver's switch port sees both copies, and answers the second with a duplicate-SACK ACK. No queue
overflows (a shaper holds 1000 frames at least, :class:`~netbench.emulation.shaping.TbfParams`); the bytes come from
the wait behind the other messages, which the fan-in of every receiver mirrors: a flow's ACKs leave through its
receiver's uplink behind the rest of that receiver's own fan-out (N - 2 - k messages), and captures at 40mbit resend
the first flows most, which points at that mirror wait; it makes as many flows late as the sender's does.

Whether a probe fires depends on the flow's smoothed RTT, which the step's other collectives keep near the unloaded
round trip and the fan-out's own samples raise, so of the flows that wait longer than the probe timeout of the
unloaded round trip (:func:`late_flows`) a share :data:`PROBES_PER_LATE_FLOW` probes, fitted on one point.
"""

from __future__ import annotations

import math

from netbench.model.framing import DEFAULT_KERNEL_HZ, Framing, LinkBytes

__all__ = ["PROBES_PER_LATE_FLOW", "DSACK_OPTION_BYTES", "probe_timeout_min_s", "late_flows", "probe_bytes"]

TCP_TIMEOUT_MIN_US = 2000  # Linux's TCP_TIMEOUT_MIN_US: what the probe timer adds to 2 srtt with segments out
# Fitted: 1-bit Adam's sign all_to_all at 6 nodes, 10mbit, 0 ms (4 late flows a rank) retransmitted 0.81 message tails
# per rank and call (29 in 36 rank-steps, each seen again at its receiver's port); docs/concepts/replicators.md.
PROBES_PER_LATE_FLOW = 0.2
DSACK_OPTION_BYTES = 12  # a SACK option with one block, padded: what the receiver's duplicate-SACK ACK adds


def probe_timeout_min_s(kernel_hz: int = DEFAULT_KERNEL_HZ) -> float:
    """What the probe timer waits past 2 srtt on a kernel ticking ``kernel_hz`` times a second: Linux turns
    :data:`TCP_TIMEOUT_MIN_US` into whole jiffies, rounding up (``usecs_to_jiffies``), so 4 ms at HZ=250, 2 ms at
    1000, 10 ms at 100."""
    ticks = -(-TCP_TIMEOUT_MIN_US * kernel_hz // 1_000_000)
    return ticks / kernel_hz


def late_flows(
    messages: float, message_wire_bytes: float, rate_bps: float, one_way_s: float, kernel_hz: int = DEFAULT_KERNEL_HZ
) -> int:
    """Messages of a fan-out of ``messages`` whose first segment waits behind the earlier ones in the sender's uplink
    (``message_wire_bytes`` each at ``rate_bps``) past the probe timeout of the unloaded round trip: the k-th (k from
    0) is late when k message transfers exceed 2 srtt + :func:`probe_timeout_min_s` (on the sender's ``kernel_hz``)
    less the round trip its ACK takes (srtt the round trip, two ``one_way_s``)."""
    if messages < 2 or rate_bps <= 0:
        return 0
    transfer_s = 8.0 * message_wire_bytes / rate_bps
    slack_s = 2 * one_way_s + probe_timeout_min_s(kernel_hz)
    on_time = math.floor(slack_s / transfer_s) if transfer_s > 0 else int(messages)  # the k with k transfers <= slack
    return max(0, int(messages) - 1 - on_time)


def probe_bytes(
    framing: Framing, messages: float, message_bytes: float, rate_bps: float | None, one_way_s: float
) -> tuple[LinkBytes, LinkBytes]:
    """Wire bytes the probes of one rank's fan-out add: (forward, reverse). Forward: each probe's copy of its
    message's last segment (gloo's preamble included) with its headers; reverse: the receiver's duplicate-SACK ACK."""
    if rate_bps is None:
        return LinkBytes(), LinkBytes()
    stream = message_bytes + framing.gloo_preamble_bytes
    segments = framing.segments(stream)
    wire = stream + segments * framing.header_bytes
    probes = PROBES_PER_LATE_FLOW * late_flows(messages, wire, rate_bps, one_way_s, framing.kernel_hz)
    tail = stream - (segments - 1) * framing.mss
    return (
        LinkBytes(overhead=probes * (tail + framing.header_bytes)),
        LinkBytes(overhead=probes * (framing.ack_frame_bytes + DSACK_OPTION_BYTES)),
    )
