"""A sweep's report: measured vs predicted per point, the model's error, and the figures.

Everything is rebuilt from the sweep folder (summary.csv, sweep.json), so ``netbench report``
gives the same report after the fact, and ``--calibration`` re-predicts every point from its
run's own records with other model constants.

Errors are relative to the measurement: (predicted - measured) / measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from netbench.model.calibration import Calibration, load_calibration
from netbench.orchestrator.config import RunConfig
from netbench.reports.sweep import PREDICTED, predict_point, read_summary, run_path, write_summary
from netbench.units import format_bytes

__all__ = ["Accuracy", "ReportResult", "accuracy", "generate_report", "repredict", "load_sweep_json", "TARGETS"]

# The done-when: median |step error| <= 10 %, every point within 25 %, wire bytes within 3 %.
TARGETS = {"step_median": 0.10, "step_max": 0.25, "wire_max": 0.03}


@dataclass(frozen=True)
class Accuracy:
    """The model's error over the points that measured and predicted successfully."""

    points: int
    step_median_abs: float | None
    step_max_abs: float | None
    step_worst: str
    wire_max_abs: float | None
    wire_worst: str

    def meets_targets(self) -> bool:
        return (self.points > 0 and self.step_median_abs <= TARGETS["step_median"]
                and self.step_max_abs <= TARGETS["step_max"] and self.wire_max_abs <= TARGETS["wire_max"])


@dataclass(frozen=True)
class ReportResult:
    markdown: Path
    figures: list[Path]
    accuracy: Accuracy

    def accuracy_lines(self) -> list[str]:
        a = self.accuracy
        if not a.points:
            return ["model accuracy: no point both measured and predicted"]
        return [
            f"step time: median |error| {a.step_median_abs:.1%}, max |error| {a.step_max_abs:.1%} ({a.step_worst}) over {a.points} points",
            f"wire bytes (tx and rx): max |error| {a.wire_max_abs:.1%} ({a.wire_worst})",
        ]


# The capture's figure for each direction, where a point has one: above 2.5gbit (offloads on) the
# interface counters count GSO super-packets with one set of headers, the capture the MTU frames
# a real wire carries, which is what the model predicts.
CAPTURED_WIRE = {"wire_tx_bytes_per_step": "capture_wire_bytes_per_step", "wire_rx_bytes_per_step": "capture_rx_wire_bytes_per_step"}


def with_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Add err_* columns (relative, signed) for step time, communication and wire bytes (captured frames where captured)."""
    out = frame.copy()
    for name, captured in CAPTURED_WIRE.items():
        if name in out and captured in out:
            out[name] = pd.to_numeric(out[captured]).fillna(pd.to_numeric(out[name]))
    for name in ("step_time_s", "comm_time_s", "wire_tx_bytes_per_step", "wire_rx_bytes_per_step", "payload_bytes_per_step"):
        pred = f"pred_{name}"
        if name in out and pred in out:
            out[f"err_{name}"] = (pd.to_numeric(out[pred]) - pd.to_numeric(out[name])) / pd.to_numeric(out[name])
    return out


def accuracy(frame: pd.DataFrame) -> Accuracy:
    """Median and max |error| of step time; max |error| of wire bytes (either direction)."""
    ok = frame[(frame["status"] == "ok") & frame["pred_step_time_s"].notna()] if "pred_step_time_s" in frame else frame.iloc[0:0]
    if "fidelity_ok" in ok:  # a point whose emulation was not faithful measures the host, not the cluster
        ok = ok[ok["fidelity_ok"].astype(str).str.lower() != "false"]
    if ok.empty:
        return Accuracy(0, None, None, "", None, "")
    step = ok["err_step_time_s"].abs()
    wire = pd.concat([ok["err_wire_tx_bytes_per_step"].abs(), ok["err_wire_rx_bytes_per_step"].abs()], axis=1).max(axis=1)
    return Accuracy(
        points=len(ok), step_median_abs=float(step.median()), step_max_abs=float(step.max()),
        step_worst=str(ok.loc[step.idxmax(), "label"]), wire_max_abs=float(wire.max()), wire_worst=str(ok.loc[wire.idxmax(), "label"]),
    )


def load_sweep_json(folder: Path) -> dict[str, Any]:
    path = folder / "sweep.json"
    return json.loads(path.read_text()) if path.exists() else {}


def sweep_calibration_of(doc: dict[str, Any]) -> Calibration:
    """The calibration a sweep's predictions used, as recorded in its sweep.json."""
    data = {k: v for k, v in doc.get("calibration", {}).items() if k != "path"}
    return Calibration.model_validate(data) if data else Calibration()


def repredict(folder: Path, calibration_path: Path) -> None:
    """Re-predict every measured point from its run directory with another calibration."""
    calib = load_calibration(calibration_path)
    frame = read_summary(folder)
    for i, row in frame.iterrows():
        run_dir = run_path(folder, row["run_dir"])
        if row["status"] != "ok" or run_dir is None or not (run_dir / "run.json").exists():
            continue
        run_json = run_dir / "run.json"
        config = RunConfig.model_validate(json.loads(run_json.read_text())["config"])
        predicted = predict_point(config, run_json.parent, calib)
        for key in PREDICTED:
            frame.loc[i, f"pred_{key}"] = predicted.get(key, float("nan"))
        frame.loc[i, "prediction_error"] = predicted.get("error", "")
    write_summary(folder, frame)
    doc = load_sweep_json(folder)
    doc["calibration"] = {"path": str(calibration_path), **json.loads(calib.model_dump_json())}
    (folder / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")


def _pct(x: Any) -> str:
    return "" if pd.isna(x) else f"{x:+.1%}"


def _sec(x: Any) -> str:
    return "" if pd.isna(x) else f"{x:.3f}"


def _bytes(x: Any) -> str:
    return "" if pd.isna(x) else format_bytes(float(x))


def _points_table(frame: pd.DataFrame) -> str:
    rows = ["| point | step meas. (s) | step model (s) | error | comm meas. (s) | comm model (s) | enc+dec meas. (s) | enc+dec model (s) "
            "| local (s) | payload/step | wire tx meas. | wire tx model | error | wire rx error | faithful |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in frame.itertuples():
        if r.status != "ok":
            rows.append(f"| {r.label} | failed: {r.reason} |" + " |" * 13)
            continue
        encdec = (r.compress_time_s or 0) + (r.decode_time_s or 0)
        pred_encdec = r.pred_compress_time_s + (0 if pd.isna(getattr(r, "pred_decode_time_s", float("nan"))) else r.pred_decode_time_s)
        faithful = {"true": "yes", "false": f"no: {getattr(r, 'fidelity_reasons', '')}"}.get(str(getattr(r, "fidelity_ok", "")).lower(), "")
        rows.append(
            f"| {r.label} | {_sec(r.step_time_s)} | {_sec(r.pred_step_time_s)} | {_pct(r.err_step_time_s)} | {_sec(r.comm_time_s)} "
            f"| {_sec(r.pred_comm_time_s)} | {_sec(encdec)} | {_sec(pred_encdec)} | {_sec(r.pred_local_time_s)} "
            f"| {_bytes(r.payload_bytes_per_step)} | {_bytes(r.wire_tx_bytes_per_step)} | {_bytes(r.pred_wire_tx_bytes_per_step)} "
            f"| {_pct(r.err_wire_tx_bytes_per_step)} | {_pct(r.err_wire_rx_bytes_per_step)} | {faithful} |")
    return "\n".join(rows)


def _header(doc: dict[str, Any], frame: pd.DataFrame) -> list[str]:
    scn = doc.get("scenario", {})
    calib = doc.get("calibration", {})
    grid = scn.get("grid", {})
    work = scn.get("workload", {})
    what = f"shapes `{work.get('shapes')}`, compute {work.get('compute_ms'):g} ms (sleep)" if work.get("kind") == "shapes" else f"`{work.get('kind')}`"
    params = frame["params"].dropna()
    lines = [f"# Sweep `{scn.get('name', '?')}`", ""]
    if scn.get("description"):
        lines += [scn["description"], ""]
    lines += [
        f"- grid: bw {', '.join(grid.get('bw', []))}; replicators {', '.join(grid.get('replicator', []))}; "
        f"nodes {', '.join(map(str, grid.get('nodes', [])))}; delay {', '.join(grid.get('delay', []))}",
        f"- workload: {what}" + (f", {int(params.iloc[0]):,} parameters" if not params.empty else ""),
        f"- per point: {scn.get('steps')} measured steps after {scn.get('warmup')} warm-up; times are the slowest node's median (its mean for replicators that communicate periodically), bytes per node per step; wire bytes are the capture's MTU frames where captured",
        f"- model constants: {calib.get('source', 'defaults')} ({calib.get('path')}; {calib.get('created') or 'not measured'})",
        f"- generated {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
        "",
    ]
    return lines


def _accuracy_section(acc: Accuracy) -> list[str]:
    if not acc.points:
        return ["## Model accuracy", "", "No point was both measured and predicted.", ""]

    def mark(ok: bool) -> str:
        return "meets" if ok else "**misses**"

    return [
        "## Model accuracy", "",
        "The model predicts encode/decode (calibrated per parameter) and communication (link rate, delay, framing, "
        "per-message overhead); each point's local work (forward/backward + optimizer update) is its own measurement.", "",
        "| metric | value | target | |", "|---|---:|---:|---|",
        f"| step time, median abs. error | {acc.step_median_abs:.1%} | <= {TARGETS['step_median']:.0%} | {mark(acc.step_median_abs <= TARGETS['step_median'])} |",
        f"| step time, max abs. error | {acc.step_max_abs:.1%} ({acc.step_worst}) | <= {TARGETS['step_max']:.0%} | {mark(acc.step_max_abs <= TARGETS['step_max'])} |",
        f"| wire bytes tx/rx, max abs. error | {acc.wire_max_abs:.1%} ({acc.wire_worst}) | <= {TARGETS['wire_max']:.0%} | {mark(acc.wire_max_abs <= TARGETS['wire_max'])} |",
        f"| points | {acc.points} | | |", "",
    ]


def generate_report(folder: Path) -> ReportResult:
    """Write report.md and the figures into ``folder`` from its summary.csv and sweep.json."""
    from netbench.reports.plots import make_figures

    doc = load_sweep_json(folder)
    frame = with_errors(read_summary(folder))
    acc = accuracy(frame) if not frame.empty else Accuracy(0, None, None, "", None, "")
    figures = make_figures(frame, doc, sweep_calibration_of(doc), folder) if not frame.empty else []
    lines = _header(doc, frame) + _accuracy_section(acc)
    lines += ["## Figures", ""] + [f"![{f.stem}]({f.name})" for f in figures] + [""]
    lines += ["## Points", "", _points_table(frame), ""]
    path = folder / "report.md"
    path.write_text("\n".join(lines))
    return ReportResult(path, figures, acc)
