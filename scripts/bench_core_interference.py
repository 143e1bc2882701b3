"""Do this host's cores slow each other down? CPU time of one busy process alone, then of N side by side.

A fidelity check (netbench.orchestrator.run.fidelity.codec_speed) flags runs whose nodes' encode + decode took
more CPU time than calibrated. On a virtual machine the usual cause is the physical host: vCPUs that share a
core's SMT siblings, caches or memory bandwidth with other guests, so two nodes computing at once each get
slower -- whether that happens changes from hour to hour. This prints the CPU-time ratio (side by side /
alone) for a single-threaded torch loop (a GEMM, a top-k and a reduction: a codec's kind of work):

    python3 scripts/bench_core_interference.py [--procs 2] [--repeats 10]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time


def _work(repeats: int) -> float:
    import torch

    torch.set_num_threads(1)
    a, b, x = torch.randn(768, 3072), torch.randn(3072, 64), torch.randn(4_000_000)

    def once() -> None:
        for _ in range(20):
            a @ b
            torch.topk(x[:1_000_000].abs(), 3200)
            (x * 1.0001).sum()

    once()  # warm-up
    began = time.thread_time()
    for _ in range(repeats):
        once()
    return time.thread_time() - began


def _side_by_side(procs: int, repeats: int) -> list[float]:
    with mp.get_context("spawn").Pool(procs) as pool:
        return pool.map(_work, [repeats] * procs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    alone = _side_by_side(1, args.repeats)[0]
    together = _side_by_side(args.procs, args.repeats)
    ratio = statistics.median(together) / alone
    print(
        f"CPU time alone {alone:.3f} s; {args.procs} side by side {', '.join(f'{t:.3f}' for t in together)} s; "
        f"ratio {ratio:.2f} (1.00: the cores do not slow each other)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
