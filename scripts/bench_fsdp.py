#!/usr/bin/env python3
"""Sharded parameters under `run` beside the model: FSDP on 4 nodes (100mbit and 1gbit, 0 and 20 ms) and HSDP over
2 sites x 2 nodes with DiLoCo between the sites.

Runs `python3 -m netbench run --json` for each point (the netbench this script lies in) and prints, per point, the
measured step beside the replay (the model fed the run's own local work and codec) and the wire bytes a node sends
per step (NIC counters) beside the model's, with their errors; the dilation each run used and whether its fidelity
check passed.

    python3 scripts/bench_fsdp.py                          # the five points, the default transformer, 6 steps
    python3 scripts/bench_fsdp.py --points fsdp-100mbit-0ms,hsdp --steps 4
    python3 scripts/bench_fsdp.py --lock /tmp/nb-heavy.lock  # each run under flock, one at a time on a shared host
    python3 scripts/bench_fsdp.py --repredict              # this model on the runs in reports/fsdp/runs

Writes reports/fsdp/bench.json (the summaries) beside the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FSDP = ["-n", "4", "--shard", "fsdp", "-r", "full"]
POINTS: dict[str, list[str]] = {
    f"fsdp-{bw}-{delay}": [*FSDP, "--bw", bw, "--delay", delay]
    for bw in ("100mbit", "1gbit")
    for delay in ("0ms", "20ms")
}
POINTS["hsdp"] = [
    *("-n", "4", "--topology", "sites", "--sites", "2", "--bw", "1gbit", "--wan-bw", "100mbit", "--wan-delay", "20ms"),
    *("--shard", "hsdp", "--shard-within", "site", "-r", "diloco", "--sync-every", "3"),
]


def run_point(name: str, args: argparse.Namespace, out: Path) -> dict:
    """One `netbench run --json`; its summary."""
    argv = [sys.executable, "-m", "netbench", "run", *POINTS[name], "-w", args.workload]
    argv += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--out", str(out), "--json"]
    if args.lock:
        argv = ["flock", "-x", args.lock, *argv]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: netbench run failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    summary = json.loads(done.stdout)
    record = json.loads((Path(summary["run_dir"]) / "run.json").read_text())
    return {**summary, "dilation": record.get("dilation"), "fidelity_ok": (record.get("fidelity") or {}).get("ok")}


def repredicted(run_dir: Path) -> dict:
    """A stored run's summary with the replay and the model's wire bytes of this netbench's model (this host's
    cached calibration)."""
    import pandas as pd

    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.prediction import predict_run, replay_run

    record = json.loads((run_dir / "run.json").read_text())
    config = RunConfig.model_validate(record["config"])
    steps = pd.read_csv(run_dir / "steps.csv")
    summary = dict(record["summary"])
    cpus = (summary.get("predicted") or {}).get("host_cpus")
    summary["replay_step_time_s"] = replay_run(config, steps, cpus=cpus)
    summary["predicted"] = predict_run(config, steps, cpus=cpus)
    summary["dilation"] = record.get("dilation")
    summary["fidelity_ok"] = (record.get("fidelity") or {}).get("ok")
    return summary


def row(name: str, summary: dict) -> str:
    step, replay = summary["step_time_s"], summary.get("replay_step_time_s")
    wire, model = summary["wire_tx_bytes_per_step"], (summary.get("predicted") or {}).get("wire_tx_bytes_per_step")
    replay_text = f"{replay:.3f} | {100 * (replay / step - 1):+.1f} %" if replay else "- | -"
    model_text = f"{model / 1e6:.3f} | {100 * (model / wire - 1):+.2f} %" if model else "- | -"
    faithful = {True: "yes", False: "no"}.get(summary.get("fidelity_ok"), "-")
    return (
        f"| {name} | {step:.3f} | {replay_text} | {wire / 1e6:.3f} | {model_text} | {summary.get('dilation', '-')} "
        f"| {faithful} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=",".join(POINTS), help=f"comma list of {', '.join(POINTS)}")
    parser.add_argument("-w", "--workload", default="transformer")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--lock", default="", help="run each point under flock -x on this file")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "fsdp")
    parser.add_argument("--repredict", action="store_true", help="price the runs already in OUT/runs again")
    args = parser.parse_args()
    runs = args.out / "runs"
    if args.repredict:
        sys.path.insert(0, str(REPO))
        summaries = {d.name: repredicted(d) for d in sorted(runs.iterdir()) if (d / "run.json").is_file()}
        print_table(summaries)
        return
    names = [p for p in args.points.split(",") if p]
    unknown = [p for p in names if p not in POINTS]
    if unknown:
        raise SystemExit(f"--points: unknown {', '.join(unknown)} (choose from {', '.join(POINTS)})")
    runs.mkdir(parents=True, exist_ok=True)
    summaries = {name: run_point(name, args, runs) for name in names}
    (args.out / "bench.json").write_text(json.dumps(summaries, indent=1))
    print_table(summaries)


def print_table(summaries: dict[str, dict]) -> None:
    print("| point | step s | replay s | error | wire MB/step | model MB/step | error | dilation | faithful |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, summary in summaries.items():
        print(row(name, summary))


if __name__ == "__main__":
    main()
