#!/usr/bin/env python3
"""Wire bytes of quantized DiLoCo's outer sync through the ring, against bf16's, as ``netbench plan`` predicts them.

INTELLECT-1's setting (a DiLoCo with H = 100 and int8 outer gradients over up to 14 nodes; arXiv 2412.01152) with
llama-1b's shapes and the ideal backend (bus bytes over the bandwidth), at 2 to 14 nodes:

    netbench plan --shapes llama-1b -r diloco --grad-dtype bf16 --sync-every 100 --nodes 2,4,6,8,14 \\
        --backend ideal [--quant-bits 8 | --quant-bits 4] --json

Prints each node's bytes on the wire per sync, the ratio to bf16, the targets (8 bits at most 0.6 x bf16, 4 bits
at most 0.35 x at 14 nodes) and what an all-gather of every rank's quantized buffer would send ((N - 1) times the
buffer), the scheme a ring replaces.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from netbench.declarations.quant_wire import quantized_bytes

TARGETS = {8: 0.6, 4: 0.35}  # at most this share of bf16's wire bytes at 14 nodes
BLOCK = 2048  # quant_block's default


def plan_rows(nodes: str, sync_every: int, bits: int) -> list[dict]:
    """``netbench plan --json`` rows for DiLoCo on llama-1b at ``nodes`` (bf16 when ``bits`` is 0)."""
    args = ["--shapes", "llama-1b", "-r", "diloco", "--grad-dtype", "bf16", "--sync-every", str(sync_every)]
    args += ["--nodes", nodes, "--backend", "ideal", "--json"]
    if bits:
        args += ["--quant-bits", str(bits)]
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "plan", *args], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(done.stdout)["rows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,4,6,8,14")
    parser.add_argument("--sync-every", type=int, default=100)
    args = parser.parse_args()
    per_sync = {
        bits: {
            r["nodes"]: r["wire_bytes_per_step"]["tx"] * args.sync_every
            for r in plan_rows(args.nodes, args.sync_every, bits)
        }
        for bits in (0, 8, 4)
    }
    params = plan_rows("2", args.sync_every, 0)[0]["params"]
    print(f"llama-1b ({params:,} parameters), H = {args.sync_every}, ideal backend: GB on the wire per node per sync")
    print(f"{'nodes':>5} {'bf16':>8} {'8-bit':>8} {'ratio':>6} {'4-bit':>8} {'ratio':>6} {'8-bit gather':>13}")
    for n, bf16 in sorted(per_sync[0].items()):
        q8, q4 = per_sync[8][n], per_sync[4][n]
        gather = (n - 1) * quantized_bytes(params, 8, BLOCK)
        gb = [x / 1e9 for x in (bf16, q8, q4, gather)]
        print(f"{n:>5} {gb[0]:8.3f} {gb[1]:8.3f} {q8 / bf16:6.3f} {gb[2]:8.3f} {q4 / bf16:6.3f} {gb[3]:13.3f}")
    last = max(per_sync[0])
    for bits, target in TARGETS.items():
        ratio = per_sync[bits][last] / per_sync[0][last]
        verdict = "meets" if ratio <= target else "MISSES"
        print(f"{bits}-bit at {last} nodes: {ratio:.3f} x bf16 (target <= {target}): {verdict}")


if __name__ == "__main__":
    main()
