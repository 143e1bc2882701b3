#!/usr/bin/env python3
"""Pipelined vs one-bucket replicator steps through `netbench run`, side by side.

For every link rate, node count and replicator: one run with ``--bucket-mb 0`` (today's step:
encode, then the collective, then decode) and one with ``--bucket-mb auto`` (the pipeline, bucket
size from the link), on the shapes workload with no stand-in compute, so the step is replication
alone. Prints the median step time of each (slowest node, after warm-up) and their ratio. Where
``auto`` resolves to one bucket it is the unpipelined configuration itself, reported once (ratio 1).

    python3 scripts/bench_pipeline.py                       # 10mbit/100mbit/1gbit x 2/4 nodes x dct/random
    python3 scripts/bench_pipeline.py --bw 100mbit --nodes 2 --replicators dct --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

SETTINGS = {"dct": ["--topk", "32", "--chunk", "64"], "random": ["--rate", "0.01"]}


def run_once(bw: str, nodes: int, replicator: str, bucket: str, args: argparse.Namespace, out: str) -> dict:
    cmd = [
        "netbench",
        "run",
        "--replicator",
        replicator,
        *SETTINGS[replicator],
        "--bw",
        bw,
        "--nodes",
        str(nodes),
        "--delay",
        args.delay,
        "--workload",
        "shapes",
        "--shapes",
        args.shapes,
        "--compute-ms",
        "0",
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--bucket-mb",
        bucket,
        "--no-capture",
        "--out",
        out,
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def buckets_of(bw: str, nodes: int, replicator: str, args: argparse.Namespace) -> int:
    """How many buckets ``--bucket-mb`` (auto or a number) makes of this replicator's step on this link."""
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload
    from netbench.model.overlap import bucket_mb_for
    from netbench.shapes import resolve_shapes
    from netbench.units import parse_rate, parse_time

    opts = dict(zip(SETTINGS[replicator][::2], SETTINGS[replicator][1::2]))
    config = ReplicatorConfig(
        name=replicator, **{k.lstrip("-"): float(v) if "." in v else int(v) for k, v in opts.items()}
    )
    shapes = resolve_shapes(args.shapes)
    payload = declared_payload(shapes, config, nodes).bytes_per_step
    mb = (
        bucket_mb_for(replicator, parse_rate(bw), 2 * parse_time(args.delay), payload, nodes)
        if args.bucket == "auto"
        else float(args.bucket)
    )
    return declared_payload(shapes, config.model_copy(update={"bucket_mb": mb}), nodes).collectives_per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", nargs="+", default=["10mbit", "100mbit", "1gbit"])
    parser.add_argument("--nodes", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--replicators", nargs="+", default=["dct", "random"], choices=list(SETTINGS))
    parser.add_argument("--shapes", default="gpt2-small:blocks=2")
    parser.add_argument("--delay", default="0ms")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--bucket", default="auto", help="the pipelined setting to compare with --bucket-mb 0")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as out:
        for bw in args.bw:
            for nodes in args.nodes:
                for rep in args.replicators:
                    plain = run_once(bw, nodes, rep, "0", args, out)
                    buckets = buckets_of(bw, nodes, rep, args)
                    # `auto` that resolves to one bucket IS the unpipelined run: the same configuration, not run twice.
                    piped = run_once(bw, nodes, rep, args.bucket, args, out) if buckets > 1 else plain
                    row = {
                        "bw": bw,
                        "nodes": nodes,
                        "replicator": rep,
                        "plain_step_s": plain["step_time_s"],
                        "piped_step_s": piped["step_time_s"],
                        "plain_comm_s": plain.get("comm_time_s"),
                        "piped_comm_s": piped.get("comm_time_s"),
                        "buckets": buckets,
                        "ratio": piped["step_time_s"] / plain["step_time_s"],
                    }
                    rows.append(row)
                    if not args.json:
                        print(
                            f"{bw:>8s} {nodes} nodes {rep:6s}: one bucket {row['plain_step_s']:.3f} s, pipelined "
                            f"{row['piped_step_s']:.3f} s ({row['buckets']} "
                            f"buckets{', the same run' if buckets == 1 else ''}), "
                            f"ratio {row['ratio']:.3f}",
                            flush=True,
                        )
    if args.json:
        print(json.dumps(rows))
    else:
        worst = max(rows, key=lambda r: r["ratio"])
        print(
            f"worst ratio pipelined/one-bucket: {worst['ratio']:.3f} ({worst['bw']}, {worst['nodes']} nodes, "
            f"{worst['replicator']})"
        )


if __name__ == "__main__":
    sys.exit(main())
