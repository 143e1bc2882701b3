"""`netbench exec --torchft`: each node a torchft replica group of one, as a published fault-tolerant trainer expects.

A torchft program (torchft's own ``train_ddp.py``, ``train_diloco.py``) finds its lighthouse at ``TORCHFT_LIGHTHOUSE``,
its replica group at ``REPLICA_GROUP_ID`` of ``NUM_REPLICA_GROUPS``, and its group's store at
``MASTER_ADDR:MASTER_PORT``, with ``RANK`` and ``WORLD_SIZE`` its place inside the group (torchrun sets these for each
group it starts). Each node's program finds all of it here, unmodified:

- one lighthouse for the exec, `netbench run`'s (:class:`~netbench.orchestrator.run.churn.Lighthouse`, its timeouts
  undilated), in the switch's namespace on the switch's own address: every node reaches it over its uplink and nothing
  outside netbench's namespaces can. A quorum holds at least :data:`MIN_REPLICAS` replica groups, as `netbench run`'s
  does: with one (how torchft's own instructions start a lighthouse) a node that comes back after its peer trained on
  alone can form a quorum alone too and is never healed (measured on two nodes), so the two train apart. The same
  process holds each node's group store (what torchrun's agent would hold), one port per node; so a node that
  leaves and joins again finds its store where it was, as a worker that torchrun restarts does.
- its group's environment: ``RANK=0``, ``WORLD_SIZE=1`` (a group of one process per node), ``REPLICA_GROUP_ID`` its
  rank, ``NUM_REPLICA_GROUPS`` the node count, ``MASTER_ADDR``/``MASTER_PORT`` its group store.
- a hostname that is its own address. A torchft ``Manager`` tells its peers to reach it at ``socket.gethostname()``
  (a joining node asks its heal's source there what to receive); the nodes share the host's name, which names the
  host's loopback, so each node's program runs in a UTS namespace of its own whose hostname is the node's address:
  the name reaches that node from every node, with no resolver involved.
"""

from __future__ import annotations

import ctypes
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from netbench.orchestrator.run.churn import STORE_PORT, Lighthouse
from netbench.torch_presence import TORCHFT_INSTALL, installed

if TYPE_CHECKING:
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec

__all__ = ["check_torchft", "TorchftGroups", "own_hostname", "MIN_REPLICAS"]

MIN_REPLICAS = 2  # the fewest replica groups a quorum holds: a node back is healed by a peer, never alone

CLONE_NEWUTS = 0x04000000  # <sched.h>
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: dlopen() in a child forked from a threaded parent may deadlock


def check_torchft(spec: ClusterSpec) -> None:
    """ValueError (one line) where `exec --torchft` cannot run: torchft missing, or a network of several switches (the
    lighthouse listens on the first switch's address)."""
    if not installed("torchft"):
        raise ValueError(f"--torchft: torchft is not installed ({TORCHFT_INSTALL})")
    if len(spec.topology.switches) > 1:
        raise ValueError("--torchft: supported on a network of one switch (the lighthouse listens on its address)")


def own_hostname(address: str) -> Callable[[], None]:
    """A ``then`` for :meth:`Namespace.popen`: the child enters a UTS namespace of its own named ``address``."""

    def rename() -> None:
        if _LIBC.unshare(CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        socket.sethostname(address)

    return rename


class TorchftGroups:
    """The exec's lighthouse and group stores; :meth:`env` is a node's torchft environment."""

    def __init__(self, cluster: Cluster, log: Path) -> None:
        self.nodes = len(cluster.nodes)
        ports = [self.store_port(r) for r in range(self.nodes)]
        self.lighthouse = Lighthouse(cluster, 1.0, log, ports, min_replicas=MIN_REPLICAS)

    @staticmethod
    def store_port(rank: int) -> int:
        return STORE_PORT + rank

    def env(self, rank: int) -> dict[str, str]:
        """What rank ``rank``'s program reads as a replica group of one (these replace exec's RANK, WORLD_SIZE, ...)."""
        return {
            "TORCHFT_LIGHTHOUSE": self.lighthouse.url,
            "REPLICA_GROUP_ID": str(rank),
            "NUM_REPLICA_GROUPS": str(self.nodes),
            "RANK": "0",
            "WORLD_SIZE": "1",
            "GROUP_RANK": "0",
            "MASTER_ADDR": self.lighthouse.address,
            "MASTER_PORT": str(self.store_port(rank)),
        }

    def describe(self) -> dict[str, object]:
        """run.json's record: where the lighthouse and each rank's group store listened."""
        return {
            "torchft": {
                "lighthouse": self.lighthouse.url,
                "min_replicas": MIN_REPLICAS,
                "stores": {str(r): f"{self.lighthouse.address}:{self.store_port(r)}" for r in range(self.nodes)},
            }
        }

    def stop(self) -> None:
        self.lighthouse.stop()
