#!/usr/bin/env python3
"""Backward overlap through `netbench run`: the same run with and without `--overlap-backward`, side by side.

The built-in transformer workload with the dct replicator on an emulated link: with hooks, each
bucket is encoded and sent from backward as soon as its gradients exist; without, after backward.
Prints the median step time of each (slowest node, after warm-up), the communication each left
exposed (time blocked waiting for collectives), and the fraction of the unhooked run's
communication that backward hid: (step without - step with) / comm without.

    python3 scripts/bench_backward.py                           # 10mbit, 2 nodes, transformer, bucket auto
    python3 scripts/bench_backward.py --bw 100mbit --nodes 4 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile


def run_once(args: argparse.Namespace, overlap: bool, out: str) -> dict:
    cmd = [
        "netbench",
        "run",
        "--replicator",
        "dct",
        "--topk",
        str(args.topk),
        "--chunk",
        str(args.chunk),
        "--bw",
        args.bw,
        "--nodes",
        str(args.nodes),
        "--delay",
        args.delay,
        "--workload",
        "transformer",
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--bucket-mb",
        args.bucket_mb,
        "--no-capture",
        "--out",
        out,
        "--json",
        "--overlap-backward" if overlap else "--no-overlap-backward",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", default="10mbit")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--delay", default="0ms")
    parser.add_argument("--topk", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--bucket-mb", default="auto")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-backward-") as out:
        off = run_once(args, False, out)
        on = run_once(args, True, out)
    keys = ("step_time_s", "compute_time_s", "comm_time_s", "compress_time_s", "decode_time_s")
    row = {
        "bw": args.bw,
        "nodes": args.nodes,
        "delay": args.delay,
        "bucket_mb": args.bucket_mb,
        "off": {k: off.get(k) for k in keys},
        "on": {k: on.get(k) for k in keys},
    }
    row["step_ratio"] = on["step_time_s"] / off["step_time_s"]
    # Exposed communication is the time blocked waiting for collectives; what backward hid is what the hooks removed.
    row["hidden_fraction"] = 1 - on["comm_time_s"] / off["comm_time_s"] if off.get("comm_time_s") else None
    if args.json:
        print(json.dumps(row))
        return
    print(
        f"transformer, dct topk {args.topk} chunk {args.chunk}, {args.nodes} nodes, {args.bw}, delay "
        f"{args.delay}, bucket-mb {args.bucket_mb}"
    )
    print(f"  {'':22s} {'no overlap':>11s} {'overlap':>11s}")
    for k in keys:
        a, b = off.get(k), on.get(k)
        print(f"  {k:22s} {a if a is None else f'{a:9.4f} s':>11s} {b if b is None else f'{b:9.4f} s':>11s}")
    print(f"  step with / without backward overlap: {row['step_ratio']:.3f}")
    if row["hidden_fraction"] is not None:
        print(
            f"  communication hidden behind backward: {row['hidden_fraction']:.1%} of the {off['comm_time_s']:.4f} s "
            f"exposed without (exposed with: {on['comm_time_s']:.4f} s); step saved "
            f"{off['step_time_s'] - on['step_time_s']:+.4f} s"
        )


if __name__ == "__main__":
    sys.exit(main())
