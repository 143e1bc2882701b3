"""Sweep folders built by hand (summary.csv, sweep.json, runs/*/steps.csv): known numbers for report and compare
tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

RATES = {"10mbit": 1e7, "100mbit": 1e8, "1gbit": 1e9}


def write_sweep(
    folder: Path,
    points: list[dict],
    kind: str = "shapes",
    steps: int = 8,
    with_runs: bool = True,
    spread: float = 0.02,
    losses: dict[str, list[float]] | None = None,
    local: bool = True,
) -> Path:
    """One row per point (replicator, nodes, bw, step, wire; optional pred); per-step times alternate +-spread around
    the median.

    ``losses[replicator]`` gives each step's loss (both ranks the same) for that replicator's runs. Without ``local``
    (the measured local work the model needs) reports draw no model lines and interpolate the stored predictions
    instead.
    """
    folder.mkdir(parents=True)
    rows = []
    for i, p in enumerate(points):
        label = f"{p['replicator']} {p['nodes']}n {p['bw']} 0ms" + (f" {p['variant']}" if p.get("variant") else "")
        run_dir = f"runs/r{i}"
        row = {
            "key": f"k{i}",
            "label": label,
            "replicator": p["replicator"],
            "nodes": p["nodes"],
            "bw": p["bw"],
            "bw_bps": RATES[p["bw"]],
            "delay": "0ms",
            "delay_ms": 0.0,
            "status": p.get("status", "ok"),
            "reason": "",
            "run_dir": run_dir,
            "step_time_s": p["step"],
            "compute_time_s": p["step"] * 0.5,
            "compress_time_s": 0.0,
            "decode_time_s": 0.0,
            "comm_time_s": p["step"] * 0.4,
            "apply_time_s": 0.0,
            "payload_bytes_per_step": p["wire"] * 0.9,
            "wire_tx_bytes_per_step": p["wire"],
            "wire_rx_bytes_per_step": p["wire"],
            "pred_step_time_s": p.get("pred", p["step"]),
            "pred_comm_time_s": p["step"] * 0.4,
            "pred_compress_time_s": 0.0,
            "pred_local_time_s": p["step"] * 0.5,
            "pred_wire_tx_bytes_per_step": p["wire"],
            "pred_wire_rx_bytes_per_step": p["wire"],
            "pred_payload_bytes_per_step": p["wire"] * 0.9,
            "params": 1000,
            "statistic": "median",
            **({"variant": p["variant"]} if "variant" in p else {}),
        }
        if not local:
            row["pred_local_time_s"] = float("nan")
        rows.append(row)
        if with_runs:
            loss = (losses or {}).get(p["replicator"])
            n = len(loss) if loss else steps
            step_times = p["step"] * (1 + spread * np.where(np.arange(n) % 2, 1.0, -1.0))
            frame = pd.DataFrame(
                [
                    {
                        "step": s,
                        "rank": r,
                        "warmup": False,
                        "step_s": step_times[s],
                        "tx_bytes": p["wire"],
                        "loss": loss[s] if loss else 1.0,
                    }
                    for s in range(n)
                    for r in range(2)
                ]
            )
            (folder / run_dir).mkdir(parents=True)
            frame.to_csv(folder / run_dir / "steps.csv", index=False)
    pd.DataFrame(rows).to_csv(folder / "summary.csv", index=False)
    (folder / "sweep.json").write_text(
        json.dumps(
            {
                "scenario": {
                    "name": folder.name,
                    "workload": {
                        "kind": kind,
                        "shapes": "llama:d_model=32,layers=1,ffn=64,vocab=64",
                        "compute_ms": 50.0,
                    },
                }
            }
        )
    )
    return folder


def grid(
    step_scale: float = 1.0, wire_scale: float = 1.0, reps=("full", "dct"), rates=("10mbit", "100mbit")
) -> list[dict]:
    base = {"full": (1.0, 1_000_000.0), "dct": (0.2, 20_000.0), "random": (0.3, 150_000.0)}
    return [
        {
            "replicator": r,
            "nodes": 2,
            "bw": b,
            "step": base[r][0] * step_scale / (1 if b == "10mbit" else 2),
            "wire": base[r][1] * wire_scale,
        }
        for b in rates
        for r in reps
    ]
