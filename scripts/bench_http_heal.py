#!/usr/bin/env python3
"""How fast this host moves a torchft ``HTTPTransport`` heal with no link in the way: the ceiling under any link.

A heal through ``HTTPTransport`` is a ``torch.save`` stream written by the source's checkpoint server and read back
by the joining node (a socket copy each way, the receiver's fresh allocations); on a small host that, not the link,
can set its time. This serves a state of the published ``train_diloco.py``'s shapes
(:func:`bench_exec_heal.upstream_diloco_shapes`), ``--copies`` fp32 copies of every parameter plus one ``step``
scalar a tensor (4: the weights, AdamW's two moments and DiLoCo's global weights, what its first outer sync heals;
5 with the outer momentum, what a later join heals), from one process to another over loopback, through torchft's
own ``HTTPTransport`` (10 s timeout, unchunked, as the example), and prints the bytes, the seconds and the rate beside
the bytes' time at ``--bw``'s payload rate.

    flock -x /tmp/nb-heavy.lock python3 scripts/bench_http_heal.py --copies 4
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_exec_heal import upstream_diloco_shapes  # noqa: E402

TIMEOUT = timedelta(seconds=10)  # the published example's HTTPTransport timeout


def _state(copies: int) -> dict:
    import torch

    shapes = upstream_diloco_shapes()
    state: dict = {f"copy{c}": {s.name: torch.full(s.shape, float(c)) for s in shapes} for c in range(copies)}
    state["step"] = {s.name: torch.tensor(20.0) for s in shapes}
    return state


def _serve(queue: mp.Queue, copies: int) -> None:
    from torchft.checkpointing.http_transport import HTTPTransport

    transport = HTTPTransport(timeout=TIMEOUT, num_chunks=0)
    transport.send_checkpoint([1], 1, _state(copies), TIMEOUT)
    queue.put(transport.metadata())
    time.sleep(3600)  # serves until the reader is done and kills it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, choices=range(1, 6), default=4, metavar="1-5")
    parser.add_argument("--bw", type=float, default=10e9, help="the link rate to compare with, bits/s")
    args = parser.parse_args()
    from torchft.checkpointing.http_transport import HTTPTransport

    from netbench.model.framing import Framing

    queue: mp.Queue = mp.get_context("spawn").Queue()
    server = mp.get_context("spawn").Process(target=_serve, args=(queue, args.copies), daemon=True)
    server.start()
    try:
        metadata = queue.get(timeout=300)
        start = time.perf_counter()
        state = HTTPTransport(timeout=TIMEOUT, num_chunks=0).recv_checkpoint(0, metadata, 1, TIMEOUT)
        took = time.perf_counter() - start
    finally:
        server.kill()
    nbytes = sum(t.numel() * t.element_size() for part in state.values() for t in part.values())
    wire_s = nbytes / (args.bw / 8 * Framing().efficiency())  # the bytes at the link's payload rate
    print(
        f"{args.copies} copies: {nbytes:,} B in {took:.2f} s over loopback = {nbytes * 8 / took / 1e9:.2f} Gbit/s; "
        f"the bytes alone at {args.bw / 1e9:g} Gbit/s: {wire_s:.2f} s ({took / wire_s:.2f} x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
