#!/usr/bin/env python3
"""How fast ``netbench plan`` answers, and how its utilisation model compares with Streaming DiLoCo's Table 4.

1. Wall time of the planning commands (a fresh interpreter each, so no cache of the model is warm; the calibration
   given as a file, so nothing is measured), median of ``--repeat``, against the 3 s target:

       netbench plan --shapes llama-7b -r all --nodes 8,64,512
       netbench plan --shapes llama-7b -r all --topology scenarios/topologies/three_sites_asymmetric.toml

2. Table 4 of arXiv 2501.18512 (Gbit/s for 50/80/90/95/99 % compute utilisation; 1B/24 layers/0.1 s, 10B/48/0.8 s,
   100B/108/4.9 s; H = 100), Data-Parallel and DiLoCo columns: the paper's figure, ours on the paper's grid
   (50 log-spaced points from 0.1 to 1000 Gbit/s) and the difference in grid steps, with the ideal backend (the
   paper's assumptions) and with NCCL's model over RDMA (its latencies added).

    python3 scripts/bench_plan.py                   # both parts
    python3 scripts/bench_plan.py --skip-timing     # the table alone (no subprocesses)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.model.accelerators import accelerator  # noqa: E402
from netbench.model.backends import CodecCost, IdealBackend, NcclBackend  # noqa: E402
from netbench.model.compute import model_shape  # noqa: E402
from netbench.model.nccl import NetProfile  # noqa: E402
from netbench.model.schemes import SchemeSettings, build_scheme, shape_key  # noqa: E402
from netbench.model.shapes_from_count import synthetic_shapes  # noqa: E402
from netbench.model.steptime import Scenario  # noqa: E402
from netbench.model.utilization import PAPER_GRID, bandwidth_for, on_grid  # noqa: E402

TARGET_S = 3.0
TOPOLOGY = REPO / "scenarios" / "topologies" / "three_sites_asymmetric.toml"
COMMANDS = {
    "llama-7b -r all --nodes 8,64,512": ["--shapes", "llama-7b", "-r", "all", "--nodes", "8,64,512"],
    "llama-7b -r all --topology three_sites_asymmetric": [
        "--shapes",
        "llama-7b",
        "-r",
        "all",
        "--topology",
        str(TOPOLOGY),
    ],
}
TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)
TABLE4 = {
    ("1B", 1e9, 24, 0.1): {"full": (86.8, 152.6, 184.2, 222.3, 569.0), "diloco": (1.4, 6.2, 13.3, 23.3, 86.8)},
    ("10B", 1e10, 48, 0.8): {"full": (104.8, 222.3, 222.3, 268.3, 471.5), "diloco": (1.7, 7.5, 16.0, 33.9, 104.8)},
    ("100B", 1e11, 108, 4.9): {"full": (184.2, 323.8, 390.7, 390.7, 471.5), "diloco": (3.0, 11.0, 23.3, 49.4, 184.2)},
}
COLUMN = {"full": "Data-Parallel", "diloco": "DiLoCo H=100"}
SETTINGS = {"full": SchemeSettings(grad_dtype="bf16"), "diloco": SchemeSettings(grad_dtype="bf16", sync_every=100)}


def calibration_file() -> Path:
    """This host's cached calibration (measured once first where there is none)."""
    from netbench.calibrate.hostcache import cache_path

    path = cache_path()
    if not path.exists():
        subprocess.run([sys.executable, "-m", "netbench", "calibrate"], cwd=REPO, check=True, capture_output=True)
    return path


def time_commands(repeat: int) -> dict[str, list[float]]:
    calib = calibration_file()
    out: dict[str, list[float]] = {}
    for label, args in COMMANDS.items():
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "netbench", "plan", *args, "--calibration", str(calib), "--json"],
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            runs.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"bench_plan: {label} failed: {done.stderr.strip()}")
        out[label] = runs
    return out


def steps_between(ours_bps: float | None, paper_gbit: float) -> int | None:
    if ours_bps is None:
        return None
    paper = min(range(len(PAPER_GRID)), key=lambda i: abs(PAPER_GRID[i] / 1e9 - paper_gbit))
    return PAPER_GRID.index(ours_bps) - paper


def backends(shapes, model):
    yield "ideal", IdealBackend(shapes=shapes, model=model, codec=CodecCost(None))
    yield (
        "nccl-rdma",
        NcclBackend(
            shapes=shapes,
            model=model,
            codec=CodecCost(None),
            accelerator=accelerator("h100-sxm"),
            net=NetProfile(transport="rdma", channels=16),
        ),
    )


def table4() -> list[dict]:
    rows = []
    for (name, params, layers, step_s), columns in TABLE4.items():
        shapes = shape_key(synthetic_shapes(int(params)))
        model = model_shape(shapes, layers=layers)
        scenario = Scenario(nodes=2, up_bps=1e9, down_bps=1e9, compute_s=step_s)
        for label, backend in backends(shapes, model):
            for replicator, paper in columns.items():
                scheme = build_scheme(replicator, SETTINGS[replicator])
                for target, figure in zip(TARGETS, paper):
                    answer = bandwidth_for(backend.step, scheme, scenario, target)
                    ours = on_grid(answer["bw_bps"])
                    rows.append(
                        {
                            "model": name,
                            "backend": label,
                            "method": COLUMN[replicator],
                            "target": target,
                            "paper_gbit": figure,
                            "ours_exact_gbit": answer["bw_bps"] / 1e9 if answer["bw_bps"] else None,
                            "ours_grid_gbit": ours / 1e9 if ours else None,
                            "grid_steps": steps_between(ours, figure),
                        }
                    )
    return rows


def print_table4(rows: list[dict]) -> None:
    print(
        "Streaming DiLoCo Table 4 (Gbit/s for 50/80/90/95/99 % compute utilization): paper | ours on its grid (steps)"
    )
    for backend in dict.fromkeys(r["backend"] for r in rows):
        print(f"  backend {backend}")
        for model in dict.fromkeys(r["model"] for r in rows):
            for method in dict.fromkeys(r["method"] for r in rows):
                cells = [r for r in rows if (r["backend"], r["model"], r["method"]) == (backend, model, method)]
                text = "  ".join(
                    f"{c['paper_gbit']:>6.1f}|{c['ours_grid_gbit'] or float('nan'):>6.1f} ({c['grid_steps']:+d})"
                    for c in cells
                )
                print(f"    {model:>4} {method:<14} {text}")
        within = [r for r in rows if r["backend"] == backend]
        exact = sum(r["grid_steps"] == 0 for r in within)
        worst = max(abs(r["grid_steps"]) for r in within)
        print(f"    {exact} of {len(within)} cells on the paper's grid point, every cell within {worst} step(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (median)")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    doc: dict = {}
    if not args.skip_timing:
        timings = time_commands(args.repeat)
        print(f"netbench plan, fresh interpreter each, calibration from a file (median of {args.repeat}):")
        for label, runs in timings.items():
            median = statistics.median(runs)
            verdict = "meets" if median < TARGET_S else "misses"
            print(f"  {label:<48} {median:6.2f} s  ({median / TARGET_S:.2f} of the {TARGET_S:g} s target: {verdict})")
        doc["timings_s"] = timings
    start = time.perf_counter()
    rows = table4()
    print_table4(rows)
    print(f"  (the whole table, both backends: {time.perf_counter() - start:.2f} s)")
    doc["table4"] = rows
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
