"""Compare two sweeps (or runs) point by point: did time per step or bytes per step regress?

A point is matched across the two sides by its coordinates (replicator, nodes, link rate,
one-way delay), not by the sweep's point key, which also hashes the step count and every
setting: a team changing its optimizer's settings wants to see what that cost, point by point.
The workload must be the same on both sides (where a side records it): time and bytes of
different models are not comparable.

A point regresses when CURRENT exceeds BASELINE x (1 + threshold) by more than the noise: the
uncertainty of each side's median from its steps' spread (the standard error of the median,
estimated from the median absolute deviation of the per-step values), combined in quadrature,
read from each run's steps.csv. Where a side has no per-step data (committed
reports keep only summary.csv) its noise counts as zero and the table says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from netbench.reports.steps import per_step, read_steps, spread
from netbench.rundir.layout import RunDir
from netbench.rundir.summary import metric
from netbench.rundir.sweepdir import is_sweep, read_summary, read_sweep_json, run_path
from netbench.units import format_bytes, format_rate

__all__ = ["workload_of", "workload_mismatch", "CompareError", "PointFigures", "Row", "Comparison", "load_side", "compare", "to_markdown", "to_json", "parse_fraction"]

Key = tuple[str, int, int, float]
WIRE_TX = metric("wire_tx_bytes_per_step")  # bytes sent per node per step; its ``captured`` twin is the capture's MTU frames


class CompareError(ValueError):
    """Bad input to a comparison (one line for the user)."""


@dataclass(frozen=True)
class PointFigures:
    """One side's figures for one point."""

    label: str
    status: str
    step_time_s: float | None
    wire_bytes: float | None
    step_noise_s: float | None  # standard error of the median step time (from the steps' MAD); None without steps.csv
    wire_noise: float | None
    wire_source: str  # "capture" or "counters"


@dataclass(frozen=True)
class Row:
    """A matched point and the verdict on each measure."""

    label: str
    base: PointFigures
    cur: PointFigures
    step_ratio: float | None
    wire_ratio: float | None
    step_noise_rel: float | None  # combined noise relative to the baseline; None where neither side has steps
    wire_noise_rel: float | None
    step_regressed: bool
    wire_regressed: bool
    failed: bool


@dataclass
class Comparison:
    rows: list[Row]
    only_base: list[str]
    only_cur: list[str]
    max_slowdown: float
    max_bytes_growth: float
    time_advisory: bool
    notes: list[str] = field(default_factory=list)

    @property
    def step_regressions(self) -> list[str]:
        return [r.label for r in self.rows if r.step_regressed]

    @property
    def wire_regressions(self) -> list[str]:
        return [r.label for r in self.rows if r.wire_regressed]

    @property
    def failures(self) -> list[str]:
        return [r.label for r in self.rows if r.failed]

    def exit_code(self) -> int:
        """1 when a point regressed (time only counts unless advisory) or failed in CURRENT, else 0."""
        gating = self.wire_regressions + self.failures + ([] if self.time_advisory else self.step_regressions)
        return 1 if gating else 0

    def verdict(self) -> str:
        parts = []
        if self.step_regressions:
            parts.append(f"step time regressed beyond {self.max_slowdown:.0%} + noise"
                         f"{' (advisory)' if self.time_advisory else ''}: {', '.join(self.step_regressions)}")
        if self.wire_regressions:
            parts.append(f"wire bytes grew beyond {self.max_bytes_growth:.0%} + noise: {', '.join(self.wire_regressions)}")
        if self.failures:
            parts.append(f"failed in CURRENT: {', '.join(self.failures)}")
        return "; ".join(parts) if parts else f"no regression over {len(self.rows)} matched points"


def parse_fraction(text: str, option: str) -> float:
    """``10%`` or ``0.1`` -> 0.1; a negative or unreadable value is the user's error."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise CompareError(f"{option}: expected a percentage like 10% or a fraction like 0.1 (got {text!r})") from None
    if not math.isfinite(value) or value < 0:
        raise CompareError(f"{option}: must be a finite, non-negative fraction (got {text!r})")
    return value


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _label(replicator: str, nodes: int, bw_bps: float, delay_ms: float) -> str:
    return f"{replicator} {nodes}n {format_rate(bw_bps)} {delay_ms:g}ms"


def _key(replicator: str, nodes: Any, bw_bps: Any, delay_ms: Any) -> Key:
    return (str(replicator), int(float(nodes)), int(round(float(bw_bps))), round(float(delay_ms), 3))


def _figures(label: str, status: str, summary: dict[str, Any], run_dir: Path | None) -> PointFigures:
    """A point's step time and wire bytes (capture's MTU frames where captured), with the steps' spread."""
    captured = _num(summary.get(WIRE_TX.captured))
    wire, source = (captured, "capture") if captured is not None else (_num(summary.get(WIRE_TX.key)), "counters")
    steps = read_steps(run_dir)
    step_noise = wire_noise = None
    if steps is not None:
        frame = per_step(steps)
        if (s := spread(frame["step_s"])) is not None:
            step_noise = s.median_error
        if "wire_tx_bytes" in frame and (w := spread(frame["wire_tx_bytes"])) is not None:
            wire_noise = w.median_error
    return PointFigures(label, status, _num(summary.get("step_time_s")), wire, step_noise, wire_noise, source)


def _sweep_side(folder: Path) -> dict[Key, PointFigures]:

    try:
        frame = read_summary(folder)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise CompareError(f"{folder}/summary.csv: unreadable ({type(exc).__name__}: {exc})") from None
    need = {"replicator", "nodes", "bw_bps", "delay_ms", "status", "step_time_s"}
    if missing := need - set(frame.columns):
        raise CompareError(f"{folder}/summary.csv: not a sweep summary (no {', '.join(sorted(missing))} column)")
    side = {}
    for row in frame.to_dict("records"):
        try:
            key = _key(row["replicator"], row["nodes"], row["bw_bps"], row["delay_ms"])
        except (TypeError, ValueError):
            continue
        label = row.get("label") or _label(key[0], key[1], key[2], key[3])
        side[key] = _figures(str(label), str(row["status"]), row, run_path(folder, row.get("run_dir")))
    return side


def _run_side(run_dir: Path) -> dict[Key, PointFigures]:
    try:
        doc = json.loads(RunDir(run_dir).run_json.read_text())
        summary = doc["summary"]
        key = _key(summary["replicator"], summary["nodes"], summary["bw_bps"], summary["delay_ms"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CompareError(f"{run_dir}/run.json: unreadable ({type(exc).__name__}: {exc})") from None
    return {key: _figures(_label(*key), str(doc.get("status", summary.get("status", ""))), summary, run_dir)}


def workload_of(path: Path) -> dict[str, Any] | None:
    """The workload a sweep (sweep.json) or run (run.json) trained, with defaults filled in; None where not recorded."""
    from netbench.workloads.config import WorkloadConfig

    try:
        if is_sweep(path):
            raw = read_sweep_json(path)["scenario"]["workload"]
        else:
            raw = json.loads(RunDir(path).run_json.read_text())["config"]["workload"]
        return WorkloadConfig.model_validate(raw).model_dump(mode="json")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def workload_mismatch(base: dict[str, Any] | None, cur: dict[str, Any] | None) -> str | None:
    """What differs between two recorded workloads (``kind shapes -> transformer``), None when they agree or one is unknown."""
    if base is None or cur is None or base == cur:
        return None
    diff = [k for k in base if base.get(k) != cur.get(k)]
    return ", ".join(f"{k} {base.get(k)!r} -> {cur.get(k)!r}" for k in diff[:3])


def load_side(path: Path) -> dict[Key, PointFigures]:
    """A sweep folder (summary.csv) or one run's directory (run.json), as points by coordinates."""
    if is_sweep(path):
        return _sweep_side(path)
    if RunDir(path).written:
        return _run_side(path)
    if not path.exists():
        raise CompareError(f"{path}: no such folder")
    raise CompareError(f"{path}: neither a sweep folder (summary.csv) nor a run directory (run.json)")


def _ratio(cur: float | None, base: float | None) -> float | None:
    return cur / base if cur is not None and base else None


def _noise(a: float | None, b: float | None) -> float | None:
    """Both sides' spreads in quadrature; None when neither side has per-step data."""
    if a is None and b is None:
        return None
    return math.hypot(a or 0.0, b or 0.0)


def _regressed(base: float | None, cur: float | None, threshold: float, noise: float | None) -> bool:
    if base is None or cur is None:
        return False
    return cur > base * (1 + threshold) + (noise or 0.0)


def compare(base: dict[Key, PointFigures], cur: dict[Key, PointFigures], max_slowdown: float = 0.10,
            max_bytes_growth: float = 0.03, time_advisory: bool = False) -> Comparison:
    """Match points by coordinates and judge each against the thresholds and its noise."""
    rows = []
    for key in [k for k in base if k in cur]:
        b, c = base[key], cur[key]
        ok = b.status == "ok" and c.status == "ok"
        step_noise = _noise(b.step_noise_s, c.step_noise_s)
        wire_noise = _noise(b.wire_noise, c.wire_noise)
        rows.append(Row(
            label=b.label, base=b, cur=c, step_ratio=_ratio(c.step_time_s, b.step_time_s), wire_ratio=_ratio(c.wire_bytes, b.wire_bytes),
            step_noise_rel=step_noise / b.step_time_s if step_noise is not None and b.step_time_s else None,
            wire_noise_rel=wire_noise / b.wire_bytes if wire_noise is not None and b.wire_bytes else None,
            step_regressed=ok and _regressed(b.step_time_s, c.step_time_s, max_slowdown, step_noise),
            wire_regressed=ok and _regressed(b.wire_bytes, c.wire_bytes, max_bytes_growth, wire_noise),
            failed=b.status == "ok" and c.status != "ok",
        ))
    result = Comparison(rows, [base[k].label for k in base if k not in cur], [cur[k].label for k in cur if k not in base],
                        max_slowdown, max_bytes_growth, time_advisory)
    if any(r.base.step_noise_s is None for r in rows):
        result.notes.append("BASELINE has no per-step data (no runs/ with steps.csv): its noise counts as zero")
    if any(r.cur.step_noise_s is None for r in rows):
        result.notes.append("CURRENT has no per-step data (no runs/ with steps.csv): its noise counts as zero")
    if any(r.base.wire_source != r.cur.wire_source for r in rows):
        result.notes.append("wire bytes come from the capture on one side and interface counters on the other for some points")
    return result


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x - 1:+.1%}"


def _noise_pct(x: float | None) -> str:
    return "no steps" if x is None else f"±{x:.1%}"


def _sec(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def _bytes(x: float | None) -> str:
    return "" if x is None else format_bytes(x)


def table_rows(result: Comparison) -> list[list[str]]:
    """The table's cells, shared by the terminal, markdown and HTML views."""
    out = []
    for r in result.rows:
        mark = "FAILED" if r.failed else " ".join(
            x for x in ("SLOWER" if r.step_regressed else "", "BYTES" if r.wire_regressed else "") if x) or "ok"
        out.append([r.label, _sec(r.base.step_time_s), _sec(r.cur.step_time_s), _pct(r.step_ratio), _noise_pct(r.step_noise_rel),
                    _bytes(r.base.wire_bytes), _bytes(r.cur.wire_bytes), _pct(r.wire_ratio), _noise_pct(r.wire_noise_rel), mark])
    return out


HEADERS = ["point", "step base (s)", "step current (s)", "change", "noise", "wire base", "wire current", "change", "noise", "verdict"]


def to_markdown(result: Comparison, baseline: str, current: str) -> str:
    """A summary for a CI job's page: the verdict first, then the table."""
    code = result.exit_code()
    advisory = len(result.step_regressions) if result.time_advisory else 0
    head = "regression" if code else (f"no failing regression ({advisory} advisory step-time)" if advisory else "no regression")
    lines = [f"## netbench compare: {head}", "", f"`{baseline}` (baseline) vs `{current}` (current): {result.verdict()}.", "",
             f"Thresholds: step time +{result.max_slowdown:.0%}{' (advisory: does not fail)' if result.time_advisory else ''}, "
             f"wire bytes +{result.max_bytes_growth:.0%}, each beyond the points' noise (the standard error of each side's median, from the steps' median absolute deviation).", ""]
    lines += [f"- {n}" for n in result.notes]
    if result.only_base or result.only_cur:
        lines.append(f"- unmatched: {len(result.only_base)} point(s) only in baseline, {len(result.only_cur)} only in current")
    lines += ["", "| " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * (len(HEADERS) - 2) + "---|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(result)]
    return "\n".join(lines) + "\n"


def to_json(result: Comparison) -> dict[str, Any]:
    return {"exit_code": result.exit_code(), "verdict": result.verdict(), "max_slowdown": result.max_slowdown,
            "max_bytes_growth": result.max_bytes_growth, "time_advisory": result.time_advisory,
            "step_regressions": result.step_regressions, "wire_regressions": result.wire_regressions, "failures": result.failures,
            "only_baseline": result.only_base, "only_current": result.only_cur, "notes": result.notes,
            "points": [asdict(r) for r in result.rows]}
