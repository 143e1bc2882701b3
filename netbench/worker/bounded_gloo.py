"""torchft's reconfigurable gloo process group, with every wait of a configuration on a peer or store gone bounded by
the run's exchange timeout T (torchft passes the group's one timeout to the libraries, which stretch it).

A configuration (torchft ``ProcessGroupWrapper.configure``, run when a quorum changes) waits three times on the
quorum's members, and a member killed after the lighthouse listed it leaves each of them waiting:

* the quorum's store, on the node of its first member at the furthest step: torch's ``TCPStore`` client retries a
  refused connect until T, then its constructor backs off and tries again with a fresh T (``TCPStore::TCPStore``;
  1.45-1.6 T measured, ``scripts/bench_configure_waits.py``). Here a plain connect, retried until T, finds it first.
* each member's gloo address in that store: gloo waits for it for the context's timeout
  (``Context::createAndConnectAllPairs``'s ``wait_get``). Here a store barrier, bounded by T, waits for every member
  before gloo starts, so that wait stays T, as the goodput rules price it.
* the connection to each member: of a pair's two ends, the one at the lower address waits for the other to connect,
  and gloo bounds that wait at five times the context's timeout (``tcp::Pair::waitUntil``, "a longer timeout when
  waiting for initial connect"): 5 T for a member that wrote its address and was killed. Here the group is built
  with T / 5, then set to T for its collectives.

Assumed of torchft 0.2.0 and torch 2.13 (as :mod:`netbench.worker.quorum_watch` assumes torchft's client):
``_create_pg`` builds the group from ``self._timeout``, and the gloo backend's ``set_timeout`` sets the timeout of
its later collectives. tests/test_configure_waits.py checks every wait above against a member and a store killed.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import torch
from torch.distributed import Store
from torchft import ProcessGroupGloo

__all__ = ["BoundedGloo", "reach_store", "GLOO_CONNECT_WAITS"]

GLOO_CONNECT_WAITS = 5  # gloo's wait for a pair's first connect, in its timeouts (tcp::Pair::waitUntil)
RETRY_S = 0.05  # between refused connects to the store: it answers at once when its node is up
READY_KEY = "netbench_ready"


def reach_store(store_addr: str, timeout: timedelta) -> None:
    """Connect to the store at torchft's ``host:port/prefix`` within ``timeout``, retrying a refused connect; a
    TimeoutError in one line when it does not answer."""
    host, _, port = store_addr.partition("/")[0].rpartition(":")
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=max(left, 0.001)).close()
            return
        except OSError:
            if time.monotonic() + RETRY_S >= deadline:
                raise TimeoutError(
                    f"the quorum's store at {host}:{port} did not accept a connection within "
                    f"{timeout.total_seconds():.1f} s"
                ) from None
            time.sleep(RETRY_S)


class BoundedGloo(ProcessGroupGloo):
    """torchft's ``ProcessGroupGloo`` whose configuration waits at most T on each member or store gone."""

    def __init__(self, timeout: timedelta) -> None:
        super().__init__(timeout=timeout)
        self.exchange = timeout

    def configure(self, store_addr: str, *args: object, **kwargs: object) -> None:
        reach_store(store_addr, self.exchange)
        super().configure(store_addr, *args, **kwargs)

    def _create_pg(self, store: Store, rank: int, world_size: int) -> torch.distributed.ProcessGroup:
        store.set(f"{READY_KEY}/{rank}", b"1")
        store.wait([f"{READY_KEY}/{r}" for r in range(world_size)], self.exchange)
        self._timeout = self.exchange / GLOO_CONNECT_WAITS
        try:
            pg = super()._create_pg(store, rank, world_size)
        finally:
            self._timeout = self.exchange
        pg._get_backend(torch.device("cpu")).set_timeout(self.exchange)
        return pg
