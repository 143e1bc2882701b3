"""What a heal costs: the state a joining node receives from a live peer, its bytes and its time over one path.

A node that joins a training under way (torchft's fault-tolerant ``full`` and ``diloco``) receives the weights and
the state its replicator keeps (:mod:`netbench.declarations.kept_state`, declared with the replicator) from one live
peer, over the process group formed for the new quorum. torchft's ``PGTransport`` sends a pickled description first
(its length, then the pickle: two small messages), then every tensor of the state dict as one gloo send each; the
receiver, which has no tensors to receive in place, posts each receive only once the previous tensor has arrived.
A gloo send leaves only when the receiver's ready notification has reached the sender, so every message costs a
round trip besides its transfer: the notification's one-way delay there, the bytes' one-way delay back.

The bytes leave on a fresh TCP connection (the quorum's new process group), from the initial window, one window per
round trip (:class:`~netbench.model.gloo_tcp.Transfer`), at the payload rate the framing leaves of the path's
slowest line rate (:class:`~netbench.model.framing.Framing`). Torch-free: the planner and a run's report read it.

torchft's ``HTTPTransport`` (``transport="http"``) sends the same tensors differently: the joining node opens a TCP
connection to the source's checkpoint server and asks for the whole state in one HTTP request; the answer is one
``torch.save`` stream (torch's ``_streaming_save``: a pickled list of the storages' records, the pickled state, then
every storage once, shared tensors included once), so the tensors follow each other with no round trip between them.
Its framing, the HTTP headers and the pickles, adds :data:`HTTP_HEADER_BYTES` and :data:`HTTP_BYTES_PER_TENSOR` a
tensor (:func:`heal_payload_bytes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from netbench.declarations.kept_state import STATE_ITEM_BYTES
from netbench.declarations.registry import spec
from netbench.declarations.spec import Settings
from netbench.model.framing import Framing
from netbench.model.gloo_tcp import Transfer, window_bytes
from netbench.shapes import ParamShape
from netbench.tcp import STOCK_LINUX, TcpSettings

__all__ = [
    "HEADER_MESSAGES",
    "HTTP_BYTES_PER_TENSOR",
    "HTTP_HEADER_BYTES",
    "HealTransport",
    "heal_messages",
    "largest_message_s",
    "heal_bytes",
    "heal_payload_bytes",
    "heal_time_s",
]

HealTransport = Literal["pg", "http"]  # torchft's PGTransport (gloo sends) or HTTPTransport (one torch.save over HTTP)

HEADER_MESSAGES = 2  # PGTransport's pickled description: its length, then the pickle (a few bytes a tensor)
HTTP_HEADER_BYTES = 400  # HTTPTransport: the GET request and the response's status line and headers
HTTP_BYTES_PER_TENSOR = 160  # HTTPTransport: a storage's record in the pickled list and its tensor's in the state


def heal_messages(config: Settings, shapes: Sequence[ParamShape]) -> list[int]:
    """The bytes of every tensor a heal sends, one message each: each parameter's fp32 weights, then per parameter
    tensor its replicator's kept copies and scalars. Raises ValueError for a replicator that never heals."""
    kept_state = spec(config.name).kept_state
    if kept_state is None:
        raise ValueError(f"{config.name} trains with every node throughout: it never heals a joining node")
    kept = kept_state(config)
    weights = [STATE_ITEM_BYTES * s.numel for s in shapes]
    state = [b for s in shapes for b in [STATE_ITEM_BYTES * s.numel] * kept.copies + [STATE_ITEM_BYTES] * kept.scalars]
    return weights + state


def largest_message_s(config: Settings, shapes: Sequence[ParamShape], rate_bps: float, one_way_s: float) -> float:
    """The longest one of a heal's messages takes over a path of ``rate_bps`` and ``one_way_s``, with its round trip:
    torchft bounds each message, not the whole heal, so this is what its wait on peers must outlast."""
    return max(heal_messages(config, shapes)) * 8 / rate_bps + 2 * one_way_s


def heal_bytes(config: Settings, shapes: Sequence[ParamShape]) -> int:
    """The tensor bytes one heal sends (headers aside): (4 + 4 copies) per parameter + 4 per scalar per tensor;
    ``diloco`` 20 P + 4 T, ``full`` 12 P + 4 T under AdamW."""
    return sum(heal_messages(config, shapes))


def heal_payload_bytes(config: Settings, shapes: Sequence[ParamShape], transport: HealTransport = "pg") -> int:
    """The TCP payload one heal carries to the joining node: :func:`heal_bytes`, plus under ``http`` the HTTP
    headers and the pickles' records, one per tensor (PGTransport's description is a few bytes a tensor: left out)."""
    messages = heal_messages(config, shapes)
    if transport == "http":
        return sum(messages) + HTTP_HEADER_BYTES + HTTP_BYTES_PER_TENSOR * len(messages)
    return sum(messages)


def heal_time_s(
    config: Settings,
    shapes: Sequence[ParamShape],
    rate_bps: float,
    one_way_s: float,
    *,
    tcp: TcpSettings = STOCK_LINUX,
    framing: Framing | None = None,
    overhead_s: float = 0.0,
    transport: HealTransport = "pg",
) -> float:
    """Seconds from the joining node's first receive to its last tensor's arrival, over a path whose slowest line
    rate is ``rate_bps`` (bits/s) and whose one-way delay is ``one_way_s``; ``overhead_s``: software time per
    message (gloo's and the receiver's allocation). Under ``http``, from the joining node's connect: one round trip
    to connect, the request's one-way delay, then the whole stream on the fresh connection and its one-way delay
    back. The wire's time only: the hosts' serialising and copying (``torch.save``, the socket copies) is not in it."""
    if rate_bps <= 0 or one_way_s < 0 or overhead_s < 0:
        raise ValueError("a heal's path needs a rate > 0 and a delay and overhead >= 0")
    framing = framing or Framing()
    payload_Bps = rate_bps / 8 * framing.efficiency()
    rtt = 2 * one_way_s
    conn = Transfer(cwnd=tcp.initcwnd * framing.mss, cap=window_bytes(tcp), mss=framing.mss)
    if transport == "http":
        ready = rtt + one_way_s + overhead_s
        return conn.send(ready, heal_payload_bytes(config, shapes, "http"), payload_Bps, rtt) + one_way_s
    t = 0.0
    for nbytes in [0] * HEADER_MESSAGES + heal_messages(config, shapes):
        ready = t + one_way_s + overhead_s  # the receive is posted: its notification crosses to the sender
        t = conn.send(ready, nbytes, payload_Bps, rtt) + one_way_s  # the bytes leave, then cross back
    return t
