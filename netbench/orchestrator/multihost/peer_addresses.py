"""The hosts' interface addresses, exchanged over the rendezvous store before any host is shaped.

torchrun tells each worker only rank 0's address (MASTER_ADDR); per-peer shaping needs every
peer's. Each node's leader rank writes the IPv4 addresses of its ``--iface`` to the store that the
gloo group is about to use (torchrun's agent store, or the one rank 0 hosts and the group then
reuses), as JSON under a key of its own, and reads the others'. What a peer wrote is untrusted:
it is parsed as JSON, never unpickled, and must be a short list of unicast IPv4 addresses.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pyroute2 import IPRoute

from netbench.emulation.htb import MAX_PEER_ADDRESSES
from netbench.validation import error_text

MAX_ENTRY_BYTES = 4096


class PeerAddressError(RuntimeError):
    """The peers' addresses could not be learned, or one peer's entry is unusable; one line."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    rank: int
    addresses: list[str] = Field(min_length=1, max_length=MAX_PEER_ADDRESSES)

    @field_validator("addresses")
    @classmethod
    def _unicast_ipv4(cls, addresses: list[str]) -> list[str]:
        for text in addresses:
            address = ipaddress.IPv4Address(text)
            if (
                address.is_loopback
                or address.is_multicast
                or address.is_unspecified
                or address == ipaddress.IPv4Address("255.255.255.255")
            ):
                raise ValueError(f"{text} is not a unicast address a peer can be reached at")
        return addresses


def interface_addresses(iface: str) -> list[str]:
    """The IPv4 addresses of ``iface`` in this network namespace."""
    with IPRoute() as ipr:
        return [msg.get_attr("IFA_ADDRESS") for msg in ipr.get_addr(label=iface, family=socket.AF_INET)]


def _key(attempt: str, rank: int) -> str:
    return f"netbench/peer-addresses/{attempt}/{rank}"


def open_store(env: Mapping[str, str], timeout_s: float) -> Any:
    """A client of the rendezvous store; on rank 0 without torchrun's agent store, the store itself.

    Rank 0's store is multi-tenant, as ``init_process_group`` makes it: the group joins this very
    server later instead of binding MASTER_PORT a second time. Keep it alive until then.
    """
    from torch.distributed import TCPStore  # late: keeps torch off this module's import

    host, port, timeout = env["MASTER_ADDR"], int(env["MASTER_PORT"]), timedelta(seconds=timeout_s)
    if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" or env.get("RANK") != "0":
        return TCPStore(host, port, is_master=False, timeout=timeout)
    return TCPStore(host, port, None, is_master=True, timeout=timeout, multi_tenant=True, wait_for_workers=False)


def parse_entry(raw: bytes, rank: int) -> list[str]:
    """Rank ``rank``'s addresses from what it wrote; PeerAddressError when it is not a netbench entry."""
    try:
        if len(raw) > MAX_ENTRY_BYTES:
            raise ValueError(f"{len(raw)} bytes, at most {MAX_ENTRY_BYTES}")
        entry = _Entry.model_validate(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, ValidationError) as exc:
        first = error_text(exc).splitlines()[-1].strip()
        raise PeerAddressError(f"rank {rank} sent addresses netbench cannot use ({first})") from None
    if entry.rank != rank:
        raise PeerAddressError(f"rank {rank} sent the addresses of rank {entry.rank}")
    return entry.addresses


def exchange(
    store: Any, rank: int, addresses: list[str], peers: list[int], timeout_s: float, attempt: str = "0"
) -> dict[int, list[str]]:
    """Write this rank's addresses, then read every rank's in ``peers`` (waiting up to ``timeout_s``)."""
    try:
        store.set(_key(attempt, rank), json.dumps({"rank": rank, "addresses": addresses}))
        if not peers:
            return {}
        store.wait([_key(attempt, r) for r in peers], timedelta(seconds=timeout_s))
        raw = {r: bytes(store.get(_key(attempt, r))) for r in peers}
    except Exception as exc:  # noqa: BLE001 - the store's timeouts and connection errors: one line
        first = error_text(exc).splitlines()[0]
        raise PeerAddressError(
            f"could not learn the peers' addresses over the rendezvous store within {timeout_s:g} s ({first})"
        ) from None
    return {r: parse_entry(data, r) for r, data in raw.items()}
