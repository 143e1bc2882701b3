"""The run's torchft lighthouse: the one place the nodes of a run that trains through churn ask for their quorum.

`netbench run` starts it in the switch's namespace, listening on the switch's own address alone (which every node
reaches and nothing outside netbench's namespaces does); it lives until the cluster is torn down. It prints ``ready``
once it listens.

Its timing decides how promptly a quorum forms. A quorum of the nodes that took part in the last one forms as soon
as they have all asked (torchft's fast quorum), so a node that joins is taken in at the next step or sync after it
asks. Where a node of the last quorum is missing, the lighthouse waits for every node it still hears from
(``heartbeat_timeout_ms``) or for ``join_timeout_ms``: a node that left is dropped once its heartbeats have been
missing for the heartbeat timeout, short, while the join timeout, long, only bounds the first quorum (every node
starting) so that no subset of the nodes trains on alone.

Under `netbench exec --torchft` it also holds each node's group store (``--store-port``, one per node, on the same
address): the TCPStore a torchft ``Manager`` finds at ``MASTER_ADDR:MASTER_PORT``, which torchrun's agent would hold
for a replica group. Held here it outlives a node's leave, as torchrun's agent outlives a worker it restarts.
"""

from __future__ import annotations

import argparse
import signal
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netbench-lighthouse")
    parser.add_argument("--bind", required=True, help="address:port to listen on")
    parser.add_argument("--min-replicas", type=int, required=True)
    parser.add_argument("--join-timeout-ms", type=int, required=True)
    parser.add_argument("--heartbeat-timeout-ms", type=int, required=True)
    parser.add_argument("--quorum-tick-ms", type=int, required=True)
    parser.add_argument("--store-port", type=int, action="append", default=[], help="a group store on this port")
    args = parser.parse_args(argv)
    from torch.distributed import TCPStore  # late: torch loads with it
    from torchft._torchft import LighthouseServer  # late: as torch

    host = args.bind.rsplit(":", 1)[0]
    stores = [TCPStore(host, port, is_master=True, wait_for_workers=False) for port in args.store_port]

    server = LighthouseServer(
        bind=args.bind,
        min_replicas=args.min_replicas,
        join_timeout_ms=args.join_timeout_ms,
        quorum_tick_ms=args.quorum_tick_ms,
        heartbeat_timeout_ms=args.heartbeat_timeout_ms,
    )
    print("ready", flush=True)
    try:
        while True:
            signal.pause()  # until the teardown's signal
    finally:
        server.shutdown()
        stores.clear()


if __name__ == "__main__":
    sys.exit(main())
