"""Model error on a finished sweep, before and after the gloo/TCP terms: the fidelity grid's judgement.

"After" is the prediction the sweep stored for every point (``pred_step_time_s``). "Before" is
the same prediction with the communication term of the model as it stood before
:mod:`netbench.model.gloo_tcp` -- alpha-beta per call: hops x (delay + overhead) + bytes / rate --
evaluated here on each point's own run.json config and the sweep's calibration, so both columns
share every other input (local work, compression, the testbed's corrections).

    python scripts/fidelity_before_after.py reports/fidelity            # prints the table
    python scripts/fidelity_before_after.py reports/fidelity --write    # also writes before_after.md there

Points whose ``fidelity_ok`` column (when the sweep has one) is false are listed but left out of
the summary figures, as the targets ask.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd


def old_comm_s(config, shapes, scenario, calibration) -> float:
    """Alpha-beta communication per step, as ``steptime.exchange_cost`` computed it before the gloo/TCP terms."""
    from netbench.model.collectives import Link, cost, pattern
    from netbench.model.schemes import scheme_from_config

    total = 0.0
    for ex in scheme_from_config(config.replicator).exchanges(shapes, scenario.machines):
        if ex.collective == "none" or ex.calls == 0 or ex.bytes_per_step == 0:
            continue
        link = Link(scenario.up_bps, scenario.down_bps, scenario.delay_s + calibration.overhead(ex.collective))
        one = cost(
            pattern(ex.collective, scenario.algorithm, ex.bytes_per_step / ex.calls, scenario.machines),
            link,
            scenario.framing,
        )
        total += one.time_s * ex.calls / ex.period
    return total


def new_comm_s(config, shapes, scenario, calibration) -> float:
    from netbench.model.schemes import scheme_from_config
    from netbench.model.steptime import estimate

    return estimate(scheme_from_config(config.replicator), shapes, scenario, calibration).wire.time_s


def evaluate(folder: Path) -> pd.DataFrame:
    from netbench.calibrate.hostcache import load_calibration
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.prediction import scenario_for, workload_shapes

    summary = pd.read_csv(folder / "summary.csv")
    calibration = (
        load_calibration(folder / "calibration.json") if (folder / "calibration.json").exists() else load_calibration()
    )
    rows = []
    for _, r in summary.iterrows():
        if r.get("status") != "ok" or not isinstance(r.get("run_dir"), str):
            continue
        run_json = json.loads((folder / r["run_dir"] / "run.json").read_text())
        config = RunConfig.model_validate(run_json["config"])
        shapes = workload_shapes(config.workload, config.cluster.nodes)
        scenario = scenario_for(config.cluster, float(r["pred_local_time_s"]), calibration)
        old, new = old_comm_s(config, shapes, scenario, calibration), new_comm_s(config, shapes, scenario, calibration)
        after = float(r["pred_step_time_s"])
        before = after - new + old
        measured = float(r["step_time_s"])
        wire_meas = r.get("capture_wire_bytes_per_step")
        if not isinstance(wire_meas, float) or math.isnan(wire_meas):
            wire_meas = float(r["wire_tx_bytes_per_step"])
        ok = r.get("fidelity_ok", True)
        rows.append(
            {
                "point": r["label"],
                "measured_s": measured,
                "before_s": before,
                "after_s": after,
                "before_err": (before - measured) / measured,
                "after_err": (after - measured) / measured,
                "comm_measured_s": float(r["comm_time_s"]),
                "comm_before_s": old,
                "comm_after_s": new,
                "wire_err": (float(r["pred_wire_tx_bytes_per_step"]) - wire_meas) / wire_meas
                if wire_meas
                else float("nan"),
                "fidelity_ok": bool(ok) if not (isinstance(ok, float) and math.isnan(ok)) else True,
                "tcp_cc": run_json.get("cluster", {}).get("tcp", {}).get("cc"),
            }
        )
    return pd.DataFrame(rows)


def render(df: pd.DataFrame) -> str:
    judged = df[df["fidelity_ok"]]
    lines = [
        "# Fidelity grid: model before and after the gloo/TCP terms",
        "",
        "Before: alpha-beta communication (hops x (delay + overhead) + bytes / rate). After: gloo's pipeline over TCP",
        "(netbench/model/gloo_tcp.py). Every other input is the same (local work, compression, testbed corrections).",
        "Produced by `python scripts/fidelity_before_after.py reports/fidelity --write`.",
        "",
        f"Points: {len(df)} ok runs, {len(judged)} judged (fidelity ok), {len(df) - len(judged)} flagged not faithful.",
        "",
        "| | median abs error | max abs error | points beyond 25 % |",
        "|---|---|---|---|",
    ]
    for name in ("before", "after"):
        errs = judged[f"{name}_err"].abs()
        lines.append(
            f"| step time, {name} | {100 * errs.median():.1f} % | {100 * errs.max():.1f} % | {(errs > 0.25).sum()} |"
        )
    wire = judged["wire_err"].abs().dropna()
    if len(wire):
        lines.append(
            f"| wire bytes (tx, per node) | {100 * wire.median():.1f} % | {100 * wire.max():.1f} % | "
            f"{(wire > 0.25).sum()} |"
        )
    lines += [
        "",
        "| point | measured step | before | after | error before | error after | comm measured | comm before "
        "| comm after | wire bytes error | fidelity ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in df.iterrows():
        lines.append(
            f"| {r['point']} | {r['measured_s']:.4f} s | {r['before_s']:.4f} s | {r['after_s']:.4f} s | "
            f"{100 * r['before_err']:+.1f} % | "
            f"{100 * r['after_err']:+.1f} % | {r['comm_measured_s']:.4f} s | {r['comm_before_s']:.4f} s | "
            f"{r['comm_after_s']:.4f} s | "
            f"{100 * r['wire_err']:+.1f} % | {'yes' if r['fidelity_ok'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--write", action="store_true", help="write before_after.md into the folder")
    args = ap.parse_args()
    df = evaluate(args.folder)
    if df.empty:
        sys.exit(f"{args.folder}: no finished points in summary.csv")
    text = render(df)
    print(text)
    if args.write:
        (args.folder / "before_after.md").write_text(text)


if __name__ == "__main__":
    main()
