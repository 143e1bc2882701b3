#!/usr/bin/env python3
"""torch.topk vs netbench's grouped topk_indices on the GPU, at dct's bucket shapes (tiles x 4096, k 32)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netbench.replicators.topk import topk_indices

for tiles in (10_000, 100_000, 300_000):
    x = torch.randn(tiles, 4096, device="cuda")
    fns = {
        "torch.topk": lambda x=x: torch.topk(x, 32, dim=1, sorted=False).indices,
        "topk_indices": lambda x=x: topk_indices(x, 32),
    }
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(10):
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        print(
            f"tiles {tiles:>7} ({tiles * 4096 / 1e6:.0f} M coefficients): {name:<13} median {times[5]:8.3f} ms",
            flush=True,
        )
    a = torch.topk(x.abs(), 32, dim=1).values.sort(dim=1).values
    b = x.abs().gather(1, topk_indices(x.abs(), 32)).sort(dim=1).values
    print(f"  same values: {torch.equal(a, b)}")
    del x
