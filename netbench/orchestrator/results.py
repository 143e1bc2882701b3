"""Turn worker records and captures into steps.csv, run.json and the run summary.

steps.csv has one row per node per step; the summary uses steps after warm-up only, and for
times the slowest node (the cluster moves at its pace): the largest per-node median.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from netbench.capture.pcap import by_peer, parse_pcap, per_step

TIME_FIELDS = ("step_s", "compute_s", "compress_s", "comm_s", "decode_s", "apply_s")


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of a worker's record file (a killed worker may leave half a line)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def steps_frame(records_by_rank: dict[int, list[dict]]) -> pd.DataFrame:
    rows = [r for recs in records_by_rank.values() for r in recs if r.get("event") == "step"]
    if not rows:
        return pd.DataFrame(columns=["rank", "step"])
    return pd.DataFrame(rows).drop(columns=["event"]).sort_values(["step", "rank"]).reset_index(drop=True)


def step_windows(steps: pd.DataFrame, rank: int) -> pd.DataFrame:
    """(step, t_from, t_to] per step of one rank; windows tile the rank's run like its counters."""
    mine = steps[steps["rank"] == rank].sort_values("step")
    t_from = [mine["t_start"].iloc[0], *mine["t_end"].iloc[:-1].tolist()]
    return pd.DataFrame({"step": mine["step"].to_numpy(), "t_from": t_from, "t_to": mine["t_end"].to_numpy()})


def attach_capture(steps: pd.DataFrame, pcaps: dict[int, Path], addresses: dict[int, str]) -> tuple[pd.DataFrame, dict]:
    """Add capture_* columns to ``steps`` from each rank's pcap; also returns bytes by peer."""
    frames, peers = [], {}
    for rank, path in pcaps.items():
        if steps.empty or rank not in set(steps["rank"]):
            continue
        packets = parse_pcap(path, addresses[rank])
        captured = per_step(packets, step_windows(steps, rank)).assign(rank=rank)
        frames.append(captured)
        peers[rank] = by_peer(packets)
    if not frames:
        return steps, peers
    return steps.merge(pd.concat(frames), on=["rank", "step"], how="left"), peers


def _median(values: list[float]) -> float | None:
    clean = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(clean) if clean else None


def summarize(steps: pd.DataFrame, warmup_steps: int) -> dict[str, Any]:
    """Medians after warm-up: times at the slowest node, bytes per node."""
    measured = steps[~steps["warmup"].astype(bool)] if "warmup" in steps else steps
    if measured.empty:
        return {"steps_measured": 0}
    per_node = measured.groupby("rank")
    out: dict[str, Any] = {"steps_measured": int(measured["step"].nunique())}
    for field in TIME_FIELDS:
        out[field.replace("_s", "_time_s") if field != "step_s" else "step_time_s"] = float(per_node[field].median().max())
    byte_fields = {
        "payload_bytes_per_step": "payload_bytes",
        "wire_tx_bytes_per_step": "tx_bytes",
        "wire_rx_bytes_per_step": "rx_bytes",
        "capture_wire_bytes_per_step": "capture_tx_wire_bytes",
        "capture_rx_wire_bytes_per_step": "capture_rx_wire_bytes",
        "capture_payload_bytes_per_step": "capture_tx_payload_bytes",
        "capture_ack_only_bytes_per_step": "capture_tx_ack_only_bytes",
    }
    nodes = {}
    for name, column in byte_fields.items():
        if column in measured:
            medians = per_node[column].median()
            out[name] = float(medians.median())
            for rank, value in medians.items():
                nodes.setdefault(int(rank), {})[name] = float(value)
    out["per_node"] = nodes
    last = measured[measured["step"] == measured["step"].max()]
    out["final_loss"] = _median(last["loss"].tolist())
    first = measured[measured["step"] == measured["step"].min()]
    out["first_loss"] = _median(first["loss"].tolist())
    if "capture_tx_wire_bytes" in measured and "tx_bytes" in measured:
        both = measured[measured["tx_bytes"] > 0]
        if not both.empty:
            rel = (both["capture_tx_wire_bytes"] - both["tx_bytes"]).abs() / both["tx_bytes"]
            out["capture_vs_counter_max_rel_diff"] = float(rel.max())
            out["capture_vs_counter_median_rel_diff"] = float(rel.median())
    return out


def write_steps_csv(steps: pd.DataFrame, path: Path) -> None:
    steps.to_csv(path, index=False)


def write_run_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
