#!/usr/bin/env python3
"""FlexDeMo beside flat DeMo on the same model and links: inter-node bytes and step time, measured and modelled.

Runs `netbench run` (the console script of this environment) for each point, N nodes x G workers:
flat DeMo over 4 nodes (4 x 1) and FlexDeMo with 2 nodes of 2 (2 x 2), plus, unless --quick,
2 x 4 and 4 x 2. Prints per point the inter-node wire bytes per node per step (NIC counters,
tx + rx), the intra-node bytes (loopback counters), the step time, each beside the model's
prediction (and the step beside its replay: the model fed the run's own local work and codec), the error,
the dilation the run used and whether its fidelity check passed; then the paper's point: a node's
inter-node all-gather bytes, relative to 2 x 2, grow with the number of nodes (N - 1), not with the
number of accelerators (N G - 1).

    python3 scripts/bench_flexdemo.py                 # 4 points, dct, 100mbit, transformer
    python3 scripts/bench_flexdemo.py --quick --steps 6
    python3 scripts/bench_flexdemo.py --points 2x2,2x4 --intra-bw 10gbit -w mlp   # FlexDeMo's step against the model
    python3 scripts/bench_flexdemo.py --matrix -w mlp       # full/dct/random/diloco at 2x2, 4x2, 2x4 -> matrix.md
    python3 scripts/bench_flexdemo.py --repredict           # the current model for the runs in reports/flexdemo/runs

Writes reports/flexdemo/bench.json and bench.md (the table printed; --name picks another name).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NETBENCH = str(Path(sys.executable).parent / "netbench")
POINTS = [(4, 1), (2, 2), (2, 4), (4, 2)]


def run_point(nodes: int, g: int, args: argparse.Namespace, out: Path) -> dict:
    """One `netbench run --json`; its summary (status checked)."""
    argv = [
        NETBENCH,
        "run",
        "-r",
        args.replicator,
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(g),
        "--bw",
        args.bw,
        "--delay",
        args.delay,
        "-w",
        args.workload,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--out",
        str(out),
        "--json",
    ]
    if args.replicator == "diloco":
        argv += ["--sync-every", str(args.sync_every)]
    if args.intra_bw and g > 1:
        argv += ["--intra-bw", args.intra_bw]
    if args.calibration:
        argv += ["--calibration", str(args.calibration)]
    argv += ["--dilation", args.dilation]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def row(nodes: int, g: int, s: dict) -> dict:
    p = s.get("predicted") or {}
    inter = s["wire_tx_bytes_per_step"] + s["wire_rx_bytes_per_step"]
    inter_model = p.get("wire_tx_bytes_per_step", 0) + p.get("wire_rx_bytes_per_step", 0)
    return {
        "nodes": nodes,
        "gpus_per_node": g,
        "accelerators": nodes * g,
        "run_dir": str(Path("runs") / Path(s["run_dir"]).name),  # beside the table, wherever the folder is copied
        "inter_bytes": inter,
        "inter_bytes_model": inter_model,
        "inter_rx_bytes": s["wire_rx_bytes_per_step"],
        "intra_bytes": s.get("intra_tx_bytes_per_step"),
        "intra_bytes_model": p.get("intra_tx_bytes_per_step"),
        "step_s": s["step_time_s"],
        "step_s_model": p.get("step_time_s"),
        "step_s_replay": s.get("replay_step_time_s"),
        "dilation": s.get("dilation", (s.get("fidelity") or {}).get("dilation")),
        "payload_bytes": s["payload_bytes_per_step"],
        "first_loss": s.get("first_loss"),
        "final_loss": s.get("final_loss"),
        "faithful": (s.get("fidelity") or {}).get("ok"),
    }


def err(measured: float | None, model: float | None) -> str:
    return f"{(measured - model) / model * 100:+.1f}%" if measured is not None and model else "-"


def table(rows: list[dict], args: argparse.Namespace) -> str:
    base = next((r for r in rows if (r["nodes"], r["gpus_per_node"]) == (2, 2)), rows[0])
    lines = [
        f"FlexDeMo vs flat DeMo: {args.replicator}, workload {args.workload}, {args.bw}, delay {args.delay}, "
        f"intra {args.intra_bw or 'unshaped'}, {args.steps} steps",
        "",
        "| N x G | inter B/step/node (measured) | model | err | intra B/step/node (measured) | model | err | "
        "step s (measured) | model | err | replay | err | k | faithful | all-gather rx vs 2x2 | (N-1) | (NG-1) | "
        "loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n, g = r["nodes"], r["gpus_per_node"]
        intra = f"{r['intra_bytes']:,.0f}" if r["intra_bytes"] is not None else "-"
        intra_m = f"{r['intra_bytes_model']:,.0f}" if r["intra_bytes_model"] is not None else "-"
        lines.append(
            f"| {n} x {g} | {r['inter_bytes']:,.0f} | {r['inter_bytes_model']:,.0f} | "
            f"{err(r['inter_bytes'], r['inter_bytes_model'])} "
            f"| {intra} | {intra_m} | {err(r['intra_bytes'], r['intra_bytes_model'])} "
            f"| {r['step_s']:.3f} | {r['step_s_model'] or 0:.3f} | {err(r['step_s'], r['step_s_model'])} "
            f"| {r['step_s_replay'] or 0:.3f} | {err(r['step_s'], r['step_s_replay'])} | {r['dilation'] or 1:g} "
            f"| {r['faithful']} | {r['inter_rx_bytes'] / base['inter_rx_bytes']:.2f} "
            f"| {(n - 1) / (base['nodes'] - 1):.2f} "
            f"| {(n * g - 1) / (base['accelerators'] - 1):.2f} | {r['first_loss']:.3f} -> {r['final_loss']:.3f} |"
        )
    lines += [
        "",
        "inter = NIC counters tx + rx per node per step; intra = loopback (the intra-node link) per node per step;",
        "err = (measured - model) / model; replay = the model fed the run's measured local work and codec; "
        "k = the run's time dilation;",
        "all-gather rx vs 2x2: a node's received inter-node bytes relative to FlexDeMo 2 x 2; it should follow (N-1), "
        "the number of other nodes, not (NG-1), the number of other accelerators.",
    ]
    return "\n".join(lines)


MATRIX = [(2, 2), (4, 2), (2, 4)]
MATRIX_REPLICATORS = ["full", "dct", "random", "diloco"]


def same_model(run_dir: str, workers: int) -> bool:
    """Every worker's done record carries one model digest (the shards reassemble alike on every node)."""
    digests = set()
    for rank in range(workers):
        for line in (Path(run_dir) / "workers" / f"rank{rank}.jsonl").read_text().splitlines():
            if '"event": "done"' in line:
                digests.add(json.loads(line).get("model_sha256"))
    return len(digests) == 1 and None not in digests


def matrix(args: argparse.Namespace) -> str:
    """Every replicator at 2 x 2, 4 x 2 and 2 x 4: bytes and step time against the model, loss, identical models."""
    lines = [
        f"FlexDeMo runs: workload {args.workload}, {args.bw}, delay {args.delay}, intra {args.intra_bw or 'unshaped'}, "
        f"{args.steps} steps after {args.warmup} warm-up (diloco --sync-every {args.sync_every})",
        "",
        "| replicator | N x G | inter B/step/node | model | err | intra B/step/node | model | err | step s | "
        "model | err "
        "| loss first -> last | identical models |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for name in args.replicators.split(","):
        for nodes, g in MATRIX:
            point = argparse.Namespace(**{**vars(args), "replicator": name})
            s = run_point(nodes, g, point, args.out / "runs")
            r = row(nodes, g, s)
            r.update(replicator=name, identical=same_model(s["run_dir"], nodes * g))
            rows.append(r)
            lines.append(
                f"| {name} | {nodes} x {g} | {r['inter_bytes']:,.0f} | {r['inter_bytes_model']:,.0f} | "
                f"{err(r['inter_bytes'], r['inter_bytes_model'])} | {r['intra_bytes']:,.0f} | "
                f"{r['intra_bytes_model']:,.0f} | "
                f"{err(r['intra_bytes'], r['intra_bytes_model'])} | {r['step_s']:.3f} | {r['step_s_model']:.3f} | "
                f"{err(r['step_s'], r['step_s_model'])} | {r['first_loss']:.3f} -> {r['final_loss']:.3f} | "
                f"{r['identical']} |"
            )
            print(lines[-1], file=sys.stderr)
    (args.out / f"matrix-{args.replicators.replace(',', '-')}.json").write_text(
        json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2) + "\n"
    )
    return "\n".join(lines)


def repredict(runs: Path) -> str:
    """The current model's prediction for runs already made (their steps.csv, this host's calibration), beside the
    stored one.
    """
    import pandas as pd

    sys.path.insert(0, str(REPO))
    from netbench.calibrate.hostcache import host_calibration
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.prediction import predict_run

    calibration = host_calibration().calibration
    lines = [
        "| replicator | N x G | inter B/step/node | stored model | err | current model | err | step s | "
        "current model |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(runs.glob("*/run.json")):
        data = json.loads(path.read_text())
        s = data["summary"]
        if "predicted" not in s:
            continue
        config = RunConfig.model_validate({**data["config"], "out_dir": str(runs)})
        p = predict_run(
            config,
            pd.read_csv(path.with_name("steps.csv")),
            data["workload"]["n_params"],
            calibration,
            cpus=s["predicted"].get("host_cpus"),
        )
        measured = s["wire_tx_bytes_per_step"] + s["wire_rx_bytes_per_step"]
        stored = s["predicted"]["wire_tx_bytes_per_step"] + s["predicted"]["wire_rx_bytes_per_step"]
        now = p["wire_tx_bytes_per_step"] + p["wire_rx_bytes_per_step"]
        lines.append(
            f"| {config.replicator.name} | {config.cluster.nodes} x {config.gpus_per_node} | {measured:,.0f} | "
            f"{stored:,.0f} | "
            f"{err(measured, stored)} | {now:,.0f} | {err(measured, now)} | {s['step_time_s']:.3f} | "
            f"{p['step_time_s']:.3f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicator", default="dct")
    parser.add_argument("--workload", "-w", default="transformer")
    parser.add_argument("--bw", default="100mbit")
    parser.add_argument("--delay", default="0ms")
    parser.add_argument("--intra-bw", default=None, help="intra-node rate (default unshaped)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="only 4 x 1 and 2 x 2")
    parser.add_argument("--points", default=None, help="N x G points to run, e.g. 2x2,2x4 (default: all four)")
    parser.add_argument("--dilation", default="auto", help="--dilation of every run (default auto)")
    parser.add_argument("--calibration", type=Path, default=None, help="model constants to predict with")
    parser.add_argument("--name", default="bench", help="OUT/NAME.md and NAME.json hold the table")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "flexdemo")
    parser.add_argument(
        "--matrix", action="store_true", help="full, dct, random, diloco at 2 x 2, 4 x 2, 2 x 4 instead"
    )
    parser.add_argument("--sync-every", type=int, default=4, help="diloco's period in --matrix")
    parser.add_argument(
        "--replicators", default=",".join(MATRIX_REPLICATORS), help="--matrix: which replicators, comma list"
    )
    parser.add_argument(
        "--repredict", action="store_true", help="no runs: the current model beside the stored prediction of OUT/runs"
    )
    args = parser.parse_args()
    if args.repredict:
        print(repredict(args.out / "runs"))
        return 0
    if args.matrix:
        args.out.mkdir(parents=True, exist_ok=True)
        text = matrix(args)
        print(text)
        (args.out / f"matrix-{args.replicators.replace(',', '-')}.md").write_text(text + "\n")
        return 0
    points = POINTS[:2] if args.quick else POINTS
    if args.points:
        points = [tuple(int(v) for v in point.lower().split("x")) for point in args.points.split(",")]
    rows = []
    for nodes, g in points:
        summary = run_point(nodes, g, args, args.out / "runs")
        rows.append(row(nodes, g, summary))
        print(
            f"{nodes} x {g}: step {summary['step_time_s']:.3f} s, inter {rows[-1]['inter_bytes']:,.0f} B",
            file=sys.stderr,
        )
    text = table(rows, args)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.md").write_text(text + "\n")
    (args.out / f"{args.name}.json").write_text(
        json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
