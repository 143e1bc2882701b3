"""What `netbench worker` ranks send each other after the last step: JSON bytes in tensors, checked on arrival.

The gloo rendezvous between hosts is not authenticated, and rank 0 runs as root: it must never
unpickle what a peer sends (``gather_object`` does). So each rank's payload travels as UTF-8 JSON
in a uint8 tensor, lengths first, and rank 0 parses it with ``json.loads`` and checks its shape
(:func:`check_payload`) before anything of it reaches the run directory.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from netbench.validation import error_text

MAX_PAYLOAD_BYTES = 256 << 20  # one rank's records and facts; larger is refused, not allocated


class PayloadError(ValueError):
    """A rank's payload that is not what a netbench worker sends; one line."""


class NodeFacts(BaseModel):
    """One host as run.json lists it (:func:`netbench.orchestrator.multihost.torchrun._node_info`)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    rank: int
    host: str = ""
    iface: str = ""
    addresses: list[str] = []
    link_speed_bps: float | int | None = None
    shaping: dict[str, Any] | None = None
    local_rank: int = 0


class RankPayload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    records: list[dict[str, Any]]
    node: NodeFacts


def check_payload(raw: bytes, rank: int) -> dict[str, Any]:
    """The payload rank ``rank`` sent, parsed and checked; PayloadError otherwise."""
    try:
        parsed = RankPayload.model_validate(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        first = error_text(exc).splitlines()[0]
        raise PayloadError(f"rank {rank} sent a payload netbench cannot read ({first})") from None
    if parsed.node.rank != rank:
        raise PayloadError(f"rank {rank} sent node facts of rank {parsed.node.rank}")
    return {"records": parsed.records, "node": parsed.node.model_dump(exclude_unset=True)}


def gather_json(payload: dict[str, Any], rank: int, world_size: int) -> dict[int, bytes | None] | None:
    """Every rank's ``payload`` as JSON bytes at rank 0 (None elsewhere; None for a rank whose payload was too large).

    Two collectives every rank joins alike: an all_gather of the lengths, then a gather of the
    bytes padded to the longest accepted length.
    """
    import torch  # late: keeps torch off this module's import
    import torch.distributed as dist  # late: keeps torch off this module's import

    data = json.dumps(payload).encode("utf-8")
    lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
    dist.all_gather(lengths, torch.tensor([len(data)], dtype=torch.int64))
    sizes = [int(t.item()) for t in lengths]
    accepted = [n if 0 <= n <= MAX_PAYLOAD_BYTES else 0 for n in sizes]
    longest = max(max(accepted), 1)
    buffer = torch.zeros(longest, dtype=torch.uint8)
    if accepted[rank]:
        buffer[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    received = [torch.zeros(longest, dtype=torch.uint8) for _ in range(world_size)] if rank == 0 else None
    dist.gather(buffer, received, dst=0)
    if received is None:
        return None
    return {
        r: bytes(received[r][: accepted[r]].numpy()) if accepted[r] == sizes[r] else None for r in range(world_size)
    }


def broadcast_flags(flags: list[bool], world_size: int, src: int = 0) -> list[bool]:
    """``flags`` (one per rank) as rank ``src`` has them, on every rank: a tensor, nothing to unpickle."""
    import torch  # late: keeps torch off this module's import
    import torch.distributed as dist  # late: keeps torch off this module's import

    tensor = torch.tensor([1 if f else 0 for f in flags] if flags else [0] * world_size, dtype=torch.int64)
    dist.broadcast(tensor, src=src)
    return [bool(v) for v in tensor.tolist()]
