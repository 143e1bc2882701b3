"""Run a function in N gloo processes on localhost and collect what each rank returns.

Usage::

    def body(rank: int, world_size: int, x: int) -> int:   # module level, so it pickles
        t = torch.tensor([rank + x]); dist.all_reduce(t); return int(t)

    assert run_ranks(body, 2, 10) == [21, 21]

Each rank runs ``fn(rank, world_size, *args)`` with the default process group already
initialised (gloo, rendezvous through a TCPStore the caller hosts on 127.0.0.1 with an
OS-chosen port, so concurrent test sessions never collide) and torch limited to one thread.
Processes come from a forkserver that has imported torch once, so a call costs a fork rather
than a fresh interpreter (spawn costs ~2 s per rank on a 2-core machine). If any rank raises or
dies, the others are killed (they would otherwise wait in a collective) and :class:`RankError`
carries the rank's traceback. Return values travel pickled, so tensors come back as copies.

As with any non-fork start method, the ranks re-import the calling script: a script (not a
test module) must keep its top-level work under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import pickle
import queue
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["run_ranks", "RankError"]

# Imported once by the forkserver and inherited by every rank. torch._dynamo is here because
# constructing any torch.optim optimizer imports it lazily, which costs ~1.5 s per process.
_PRELOAD = ["torch", "torch.distributed", "torch.optim", "torch._dynamo"]


class RankError(RuntimeError):
    """A rank raised, died or timed out; the message holds its traceback."""


def _child(
    fn: Callable[..., Any], rank: int, world_size: int, port: int, args: tuple, timeout: float, threads: int, results
) -> None:
    try:
        import torch
        import torch.distributed as dist

        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        torch.set_num_threads(threads)
        store = dist.TCPStore("127.0.0.1", port, None, is_master=False, timeout=datetime.timedelta(seconds=timeout))
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=timeout)
        )
        try:
            value = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        results.put((rank, True, pickle.dumps(value)))
    except BaseException:  # report everything, including KeyboardInterrupt/SystemExit in the rank
        results.put((rank, False, traceback.format_exc()))


def _context(start_method: str):
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 60.0,
    threads: int = 1,
    start_method: str = "forkserver",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; return values by rank.

    ``fn`` and ``args`` must pickle (a module-level function; with ``start_method="spawn"`` a
    function defined in a script's ``__main__`` works too). Raises :class:`RankError` with the
    first failing rank's traceback, or when the ranks have not all finished after ``timeout``
    seconds.
    """
    import torch.distributed as dist

    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    ctx = _context(start_method)
    store = dist.TCPStore(
        "127.0.0.1", 0, None, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout)
    )
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_child, args=(fn, rank, world_size, store.port, args, timeout, threads, results), daemon=True
        )
        for rank in range(world_size)
    ]
    for p in procs:
        p.start()
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    settle = float("inf")
    try:
        while len(values) + len(failures) < world_size:
            if failures and time.monotonic() > settle:
                break  # the other ranks are most likely stuck waiting on the failed one
            try:
                rank, ok, payload = results.get(timeout=0.1)
            except queue.Empty:
                silent = [
                    i for i, p in enumerate(procs) if p.exitcode is not None and i not in values and i not in failures
                ]
                if silent:
                    time.sleep(0.2)  # a rank's report may still be in the pipe
                    if results.empty():
                        for i in silent:
                            failures[i] = f"rank {i} exited with code {procs[i].exitcode} without reporting"
                elif time.monotonic() > deadline:
                    missing = sorted(set(range(world_size)) - values.keys() - failures.keys())
                    failures[missing[0]] = f"ranks {missing} did not finish within {timeout:g} s"
                    break
            else:
                if ok:
                    values[rank] = pickle.loads(payload)
                else:
                    failures[rank] = f"rank {rank} raised:\n{payload}"
            if failures and settle == float("inf"):
                settle = time.monotonic() + 1.0  # give the other ranks a moment to report their errors
    finally:
        grace = time.monotonic() + (0.5 if failures else 5.0)
        for p in procs:
            p.join(max(0.0, grace - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        del store
    if failures:
        raise RankError("\n".join(failures[r] for r in sorted(failures)))
    return [values[r] for r in range(world_size)]
