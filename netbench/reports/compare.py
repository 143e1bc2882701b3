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

A gate must not pass a broken sweep: a point CURRENT was asked to run (its sweep.json's grid, or
every BASELINE point where it records none) but does not hold, a CURRENT point that failed, and
a figure that is not a finite number (either side) each fail it, one line per problem. Nothing
comparable (the grids share no point, or the workloads differ) is exit 2, unless CURRENT is
broken on its own.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from netbench.reports.compare_inputs import CompareError, Key, PointFigures, Side, clean_text, key_label, load_side
from netbench.units import format_bytes

__all__ = [
    "workload_mismatch",
    "CompareError",
    "PointFigures",
    "Side",
    "Problem",
    "Row",
    "Comparison",
    "load_side",
    "compare",
    "to_markdown",
    "to_json",
    "parse_fraction",
    "markdown_text",
    "table_rows",
    "HEADERS",
]


@dataclass(frozen=True)
class Problem:
    """One line of the verdict: what is wrong with which point; ``gating`` ones make the exit code 1."""

    kind: str  # missing, failed, not finite, slower, bytes, not compared
    label: str
    why: str
    gating: bool = True

    def line(self) -> str:
        return f"{self.kind}: {self.label}: {self.why}"


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
    broken: bool = False  # a figure on either side is not a finite number: nothing to judge


@dataclass
class Comparison:
    rows: list[Row]
    only_base: list[str]  # BASELINE points CURRENT was not asked to run (its grid changed)
    only_cur: list[str]
    max_slowdown: float
    max_bytes_growth: float
    time_advisory: bool
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    nothing_comparable: str | None = None  # why no point can be compared (grids share none, workloads differ)

    @property
    def step_regressions(self) -> list[str]:
        return [r.label for r in self.rows if r.step_regressed]

    @property
    def wire_regressions(self) -> list[str]:
        return [r.label for r in self.rows if r.wire_regressed]

    @property
    def failures(self) -> list[str]:
        return [p.label for p in self.problems if p.kind == "failed"]

    def labels(self, kind: str) -> list[str]:
        return [p.label for p in self.problems if p.kind == kind]

    def exit_code(self) -> int:
        """1 when CURRENT is broken or a point regressed (time only counts unless advisory), 2 when nothing compares,
        else 0.
        """
        if any(p.gating for p in self.problems):
            return 1
        return 2 if self.nothing_comparable else 0

    def verdict(self) -> str:
        """The summary line: counts of each kind of problem, or the clean result."""
        gating = [p for p in self.problems if p.gating]
        if gating:
            counts = {kind: sum(p.kind == kind for p in gating) for kind in dict.fromkeys(p.kind for p in gating)}
            what = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            where = (
                f"; nothing to compare: {self.nothing_comparable}"
                if self.nothing_comparable
                else f" ({len(self.rows)} points matched)"
            )
            return f"FAIL: {what}{where}"
        if self.nothing_comparable:
            return f"nothing to compare: {self.nothing_comparable}"
        advisory = len(self.labels("slower"))
        return f"no {'failing ' if advisory else ''}regression over {len(self.rows)} matched points" + (
            f" ({advisory} advisory step-time)" if advisory else ""
        )


def parse_fraction(text: str, option: str) -> float:
    """``10%`` or ``0.1`` -> 0.1; a negative or unreadable value is the user's error."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise CompareError(
            f"{option}: expected a percentage like 10% or a fraction like 0.1 (got {clean_text(repr(text), 40)})"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise CompareError(f"{option}: must be a finite, non-negative fraction (got {clean_text(repr(text), 40)})")
    return value


def workload_mismatch(base: dict[str, Any] | None, cur: dict[str, Any] | None) -> str | None:
    """What differs between two recorded workloads (``kind shapes -> transformer``), None when they agree or one is
    unknown.
    """
    if base is None or cur is None or base == cur:
        return None
    diff = [k for k in base if base.get(k) != cur.get(k)]
    return clean_text(", ".join(f"{k} {base.get(k)!r} -> {cur.get(k)!r}" for k in diff[:3]), 300)


def _ratio(cur: float, base: float) -> float | None:
    return cur / base if math.isfinite(cur) and math.isfinite(base) and base else None


def _noise(a: float | None, b: float | None) -> float | None:
    """Both sides' spreads in quadrature; None when neither side has per-step data."""
    if a is None and b is None:
        return None
    return math.hypot(a or 0.0, b or 0.0)


def _regressed(base: float, cur: float, threshold: float, noise: float | None) -> bool:
    return cur > base * (1 + threshold) + (noise or 0.0)


def _row(b: PointFigures, c: PointFigures, max_slowdown: float, max_bytes_growth: float) -> Row:
    broken = bool(b.ok and b.broken_figures()) or bool(c.ok and c.broken_figures())
    judged = b.ok and c.ok and not broken
    step_noise = _noise(b.step_noise_s, c.step_noise_s)
    wire_noise = _noise(b.wire_noise, c.wire_noise)
    return Row(
        label=b.label,
        base=b,
        cur=c,
        step_ratio=_ratio(c.step_time_s, b.step_time_s),
        wire_ratio=_ratio(c.wire_bytes, b.wire_bytes),
        step_noise_rel=step_noise / b.step_time_s if judged and step_noise is not None and b.step_time_s else None,
        wire_noise_rel=wire_noise / b.wire_bytes if judged and wire_noise is not None and b.wire_bytes else None,
        step_regressed=judged and _regressed(b.step_time_s, c.step_time_s, max_slowdown, step_noise),
        wire_regressed=judged and _regressed(b.wire_bytes, c.wire_bytes, max_bytes_growth, wire_noise),
        failed=not c.ok,
        broken=broken,
    )


def _change(ratio: float | None, noise: float | None, limit: float) -> str:
    return f"{_pct(ratio)} beyond +{limit:.0%} + noise {_noise_pct(noise)}"


def _regression_problems(result: Comparison) -> list[Problem]:
    out = []
    for r in result.rows:
        if r.step_regressed:
            out.append(
                Problem(
                    "slower",
                    r.label,
                    f"step time {_change(r.step_ratio, r.step_noise_rel, result.max_slowdown)}"
                    + (" (advisory)" if result.time_advisory else ""),
                    gating=not result.time_advisory,
                )
            )
        if r.wire_regressed:
            out.append(
                Problem(
                    "bytes", r.label, f"wire bytes {_change(r.wire_ratio, r.wire_noise_rel, result.max_bytes_growth)}"
                )
            )
    return out


def _missing(base: Side, cur: Side) -> list[Problem]:
    """Points CURRENT was asked to run (its grid; without one, every BASELINE point) that it does not hold."""
    if cur.expected is None:
        return [
            Problem("missing", p.label, "in BASELINE, not in CURRENT (which records no grid)")
            for k, p in base.points.items()
            if k not in cur.points
        ]
    return [
        Problem(
            "missing",
            base.points[k].label if k in base.points else key_label(k),
            "CURRENT's grid asks for it, CURRENT has no row",
        )
        for k in sorted(cur.expected - cur.points.keys(), key=str)
    ]


def _side_problems(base: Side, cur: Side, matched: list[Key]) -> list[Problem]:
    """What is wrong with CURRENT on its own, and with the BASELINE figures it is held against."""
    out = [
        Problem("failed", p.label, f"CURRENT status {p.status}" + (f": {p.reason}" if p.reason else ""))
        for p in cur.failed
    ]
    out += [
        Problem("not finite", p.label, f"CURRENT {why}")
        for p in cur.points.values()
        if p.ok
        for why in p.broken_figures()
    ]
    out += [
        Problem("not finite", base.points[k].label, f"BASELINE {why}")
        for k in matched
        if base.points[k].ok
        for why in base.points[k].broken_figures()
    ]
    out += [
        Problem("not compared", base.points[k].label, f"BASELINE status {base.points[k].status}", gating=False)
        for k in matched
        if not base.points[k].ok
    ]
    return out


def _notes(rows: list[Row]) -> list[str]:
    notes = []
    if any(r.base.step_noise_s is None for r in rows):
        notes.append("BASELINE has no per-step data (no runs/ with steps.csv): its noise counts as zero")
    if any(r.cur.step_noise_s is None for r in rows):
        notes.append("CURRENT has no per-step data (no runs/ with steps.csv): its noise counts as zero")
    if any(r.base.wire_source != r.cur.wire_source for r in rows):
        notes.append("wire bytes come from the capture on one side and interface counters on the other for some points")
    return notes


def _why_nothing_comparable(base: Side, cur: Side, matched: list[Key], workloads_differ: str | None) -> str | None:
    if workloads_differ:
        return f"the workloads differ ({workloads_differ})"
    asked = cur.expected if cur.expected is not None else (base.points.keys() if not cur.rows else frozenset())
    if matched or any(k in asked for k in base.points):
        return None
    return (
        f"no point of CURRENT matches one of BASELINE ({len(base.points)} vs {len(cur.points)} points by "
        "replicator, nodes, "
        "rate and delay)"
    )


def compare(
    base: Side, cur: Side, max_slowdown: float = 0.10, max_bytes_growth: float = 0.03, time_advisory: bool = False
) -> Comparison:
    """Match points by coordinates, judge each against the thresholds and its noise, and list what is broken."""
    differs = workload_mismatch(base.workload, cur.workload)
    matched = [] if differs else [k for k in base.points if k in cur.points]
    rows = [_row(base.points[k], cur.points[k], max_slowdown, max_bytes_growth) for k in matched]
    nothing = _why_nothing_comparable(base, cur, matched, differs)
    asked = cur.expected if cur.expected is not None else frozenset()
    result = Comparison(
        rows,
        [p.label for k, p in base.points.items() if k not in cur.points and k not in asked and not differs],
        [p.label for k, p in cur.points.items() if k not in base.points],
        max_slowdown,
        max_bytes_growth,
        time_advisory,
        notes=_notes(rows),
        nothing_comparable=nothing,
    )
    missing = _missing(base, cur) if not nothing or cur.expected is not None else []
    result.problems = missing + _side_problems(base, cur, matched) + _regression_problems(result)
    return result


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x - 1:+.1%}"


def _noise_pct(x: float | None) -> str:
    return "no steps" if x is None else f"±{x:.1%}"


def _sec(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else f"{x:g}"


def _bytes(x: float) -> str:
    return format_bytes(x) if math.isfinite(x) else f"{x:g}"


def _mark(r: Row) -> str:
    if r.failed:
        return "FAILED"
    if not r.base.ok:
        return "BASELINE FAILED"
    if r.broken:
        return "NOT FINITE"
    return " ".join(x for x in ("SLOWER" if r.step_regressed else "", "BYTES" if r.wire_regressed else "") if x) or "ok"


def table_rows(result: Comparison) -> list[list[str]]:
    """The table's cells, shared by the terminal, markdown and HTML views."""
    return [
        [
            r.label,
            _sec(r.base.step_time_s),
            _sec(r.cur.step_time_s),
            _pct(r.step_ratio),
            _noise_pct(r.step_noise_rel),
            _bytes(r.base.wire_bytes),
            _bytes(r.cur.wire_bytes),
            _pct(r.wire_ratio),
            _noise_pct(r.wire_noise_rel),
            _mark(r),
        ]
        for r in result.rows
    ]


HEADERS = [
    "point",
    "step base (s)",
    "step current (s)",
    "change",
    "noise",
    "wire base",
    "wire current",
    "change",
    "noise",
    "verdict",
]
_MARKDOWN_SPECIAL = set("\\`*_{}[]<>()#!|~&$")


def markdown_text(text: str) -> str:
    """Untrusted text as literal markdown: one line, every character markdown (or GitHub's extensions) reads escaped."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in clean_text(text, 10_000))


def to_markdown(result: Comparison, baseline: str, current: str) -> str:
    """A summary for a CI job's page: the verdict first, the problems, then the table."""
    code = result.exit_code()
    advisory = len(result.labels("slower")) if result.time_advisory else 0
    head = {1: "regression", 2: "nothing to compare"}.get(code) or (
        f"no failing regression ({advisory} advisory step-time)" if advisory else "no regression"
    )
    lines = [
        f"## netbench compare: {head}",
        "",
        f"Compared {markdown_text(baseline)} (baseline) with {markdown_text(current)} (current): "
        f"{markdown_text(result.verdict())}.",
        "",
        "Thresholds: step time "
        f"+{result.max_slowdown:.0%}{' (advisory: does not fail)' if result.time_advisory else ''}, "
        f"wire bytes +{result.max_bytes_growth:.0%}, each beyond the points' noise (the standard error of each "
        "side's median, from the steps' median absolute deviation).",
        "",
    ]
    lines += [f"- {markdown_text(p.line())}" for p in result.problems]
    lines += [f"- {n}" for n in result.notes]
    if result.only_base or result.only_cur:
        lines.append(
            f"- unmatched: {len(result.only_base)} point(s) only in baseline, {len(result.only_cur)} only in current"
        )
    lines += ["", "| " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * (len(HEADERS) - 2) + "---|"]
    lines += ["| " + " | ".join([markdown_text(cells[0]), *cells[1:]]) + " |" for cells in table_rows(result)]
    return "\n".join(lines) + "\n"


def _finite_or_text(value: Any) -> Any:
    """JSON has no nan or inf: such figures become the strings ``"nan"``, ``"inf"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value:g}"
    if isinstance(value, dict):
        return {k: _finite_or_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_text(v) for v in value]
    return value


def to_json(result: Comparison) -> dict[str, Any]:
    return _finite_or_text(
        {
            "exit_code": result.exit_code(),
            "verdict": result.verdict(),
            "max_slowdown": result.max_slowdown,
            "max_bytes_growth": result.max_bytes_growth,
            "time_advisory": result.time_advisory,
            "nothing_comparable": result.nothing_comparable,
            "problems": [p.line() for p in result.problems],
            "step_regressions": result.step_regressions,
            "wire_regressions": result.wire_regressions,
            "failures": result.failures,
            "missing": result.labels("missing"),
            "not_finite": result.labels("not finite"),
            "only_baseline": result.only_base,
            "only_current": result.only_cur,
            "notes": result.notes,
            "points": [asdict(r) for r in result.rows],
        }
    )
