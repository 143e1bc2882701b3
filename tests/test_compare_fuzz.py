"""netbench compare on thousands of crafted pairs of folders: every one ends 0, 1 or 2 with no traceback, and 0 only for
a CURRENT sweep that holds every point it should, none failed, every figure finite.

Hypothesis builds both sides (a sweep folder with summary.csv, sweep.json and runs/*/steps.csv, a run directory, or
bytes where a file should be); each pair runs through the real entry point in this process.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbench.cli.app import main

POINTS = [("full", 2, 1e7), ("dct", 2, 1e7), ("full", 2, 1e8), ("dct", 4, 1e8)]
COLUMNS = [
    "label",
    "replicator",
    "nodes",
    "bw_bps",
    "delay_ms",
    "status",
    "reason",
    "run_dir",
    "step_time_s",
    "wire_tx_bytes_per_step",
]
TEXT = st.text(alphabet=st.sampled_from('ab [/]|`*<>$\\,"\n\r\t\x1b\x07\x00\u202eé'), max_size=12)


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy, one_in: int = 8) -> st.SearchStrategy:
    """``usual``, and ``odd`` about once in ``one_in`` draws: most pairs are near a real sweep, some far from it."""
    return st.integers(0, one_in - 1).flatmap(lambda i: odd if i == 0 else usual)


FIGURE = mostly(
    st.floats(min_value=1e-3, max_value=1e6),
    st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0]), st.sampled_from(["", "abc"])),
    12,
)
STATUS = mostly(st.just("ok"), st.sampled_from(["failed", "ok ", "OK", "", "[/x]"]), 12)


@dataclass
class Row:
    point: int
    label: str
    status: str
    step: float | str
    wire: float | str
    steps: str  # none, good, inf, bytes
    nodes_text: str | None = None  # a crafted nodes cell in place of the point's


@dataclass
class SideSpec:
    kind: str  # sweep, run, garbage
    rows: list[Row] = field(default_factory=list)
    dropped: frozenset[str] = frozenset()
    sweep_json: str = "none"  # none, grid, all-grid, workload, bytes, json
    grid: tuple[int, ...] = ()
    raw: bytes = b""
    json_doc: object = None


ROWS = st.builds(
    Row,
    point=st.integers(0, len(POINTS) - 1),
    label=mostly(st.just(""), TEXT, 3),
    status=STATUS,
    step=FIGURE,
    wire=FIGURE,
    steps=mostly(st.sampled_from(["none", "none", "good"]), st.sampled_from(["inf", "bytes"]), 20),
    nodes_text=mostly(st.none(), st.sampled_from(["abc", "", "2.5", "inf", "0", "1e400"]), 30),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["scenario", "grid", "workload", "more", "bw", "kind", "summary", "status"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)


@st.composite
def sides(draw) -> SideSpec:
    """One side; its sweep.json mostly records the grid its rows were measured from, as a real sweep's does."""
    rows = draw(
        mostly(st.lists(ROWS, min_size=1, max_size=6, unique_by=lambda r: r.point), st.lists(ROWS, max_size=6), 6)
    )
    recorded = draw(
        mostly(
            st.sampled_from(["own", "own", "own", "none", "all-grid"]),
            st.sampled_from(["grid", "workload", "bytes", "json"]),
            8,
        )
    )
    grid = (
        tuple(sorted({r.point for r in rows}))
        if recorded == "own"
        else draw(st.lists(st.integers(0, len(POINTS) - 1), max_size=4).map(tuple))
    )
    return SideSpec(
        kind=draw(mostly(st.just("sweep"), st.sampled_from(["run", "garbage"]), 10)),
        rows=rows,
        dropped=draw(mostly(st.just(frozenset()), st.frozensets(st.sampled_from(COLUMNS), min_size=1, max_size=2), 15)),
        sweep_json="grid" if recorded == "own" else recorded,
        grid=grid,
        raw=draw(st.binary(max_size=40)),
        json_doc=draw(JSON),
    )


SIDES = sides()


@st.composite
def pairs(draw) -> tuple[SideSpec, SideSpec]:
    """BASELINE and CURRENT: mostly a CURRENT measured from BASELINE's grid (a few rows lost, figures changed), else any
    two.
    """
    base = draw(SIDES)
    if draw(st.integers(0, 2)) == 0:
        return base, draw(SIDES)
    rows = [
        replace(
            r,
            step=draw(mostly(st.just(r.step), FIGURE, 4)),
            wire=draw(mostly(st.just(r.wire), FIGURE, 6)),
            status=draw(mostly(st.just(r.status), STATUS, 6)),
        )
        for r in base.rows
        if draw(mostly(st.just(True), st.just(False), 10))
    ]
    other = draw(SIDES)
    return base, replace(
        base, rows=rows, **draw(mostly(st.just({}), st.just({"sweep_json": other.sweep_json, "grid": other.grid}), 6))
    )


def _cell(value: float | str) -> str:
    return value if isinstance(value, str) else repr(value)


def _grid_doc(points: set[int], kind: str = "shapes") -> dict:
    more = [
        {
            "replicator": [POINTS[i][0]],
            "nodes": [POINTS[i][1]],
            "bw": [f"{int(POINTS[i][2] / 1e6)}mbit"],
            "delay": ["0ms"],
        }
        for i in sorted(points)
    ]
    first, rest = (more[0], more[1:]) if more else ({"replicator": ["random"], "nodes": [8], "bw": ["1gbit"]}, [])
    return {"scenario": {"grid": first, "more": rest, "workload": {"kind": kind}}}


def _write_steps(folder: Path, how: str) -> None:
    if how == "none":
        return
    folder.mkdir(parents=True, exist_ok=True)
    if how == "bytes":
        (folder / "steps.csv").write_bytes(b"step,rank,step_s\n\xff\xfe,0,1\n")
        return
    value = "inf" if how == "inf" else "1.0"
    lines = ["step,rank,warmup,step_s,tx_bytes"] + [
        f"{s},{r},False,{value if s == 1 else 1.0 + s / 100},1000" for s in range(4) for r in range(2)
    ]
    (folder / "steps.csv").write_text("\n".join(lines) + "\n")


def _write_sweep(folder: Path, spec: SideSpec) -> None:
    buf = io.StringIO()
    columns = [c for c in COLUMNS if c not in spec.dropped]
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for i, row in enumerate(spec.rows):
        replicator, nodes, bw = POINTS[row.point]
        writer.writerow(
            {
                "label": row.label,
                "replicator": replicator,
                "nodes": row.nodes_text if row.nodes_text is not None else nodes,
                "bw_bps": bw,
                "delay_ms": 0.0,
                "status": row.status,
                "reason": row.label,
                "run_dir": f"runs/r{i}",
                "step_time_s": _cell(row.step),
                "wire_tx_bytes_per_step": _cell(row.wire),
            }
        )
        _write_steps(folder / "runs" / f"r{i}", row.steps)
    (folder / "summary.csv").write_text(buf.getvalue())
    if spec.sweep_json == "grid":
        (folder / "sweep.json").write_text(json.dumps(_grid_doc(set(spec.grid))))
    elif spec.sweep_json == "all-grid":
        (folder / "sweep.json").write_text(json.dumps(_grid_doc(set(range(len(POINTS))))))
    elif spec.sweep_json == "workload":
        (folder / "sweep.json").write_text(json.dumps({"scenario": {"workload": {"kind": "transformer"}}}))
    elif spec.sweep_json == "bytes":
        (folder / "sweep.json").write_bytes(spec.raw)
    elif spec.sweep_json == "json":
        (folder / "sweep.json").write_text(json.dumps(spec.json_doc))


def _write_side(folder: Path, spec: SideSpec) -> None:
    folder.mkdir()
    if spec.kind == "sweep":
        _write_sweep(folder, spec)
    elif spec.kind == "run":
        row = spec.rows[0] if spec.rows else Row(0, "", "ok", 1.0, 1000.0, "none")
        replicator, nodes, bw = POINTS[row.point]
        summary = {
            "replicator": replicator,
            "nodes": nodes,
            "bw_bps": bw,
            "delay_ms": 0.0,
            "step_time_s": row.step,
            "wire_tx_bytes_per_step": row.wire,
        }
        doc = spec.json_doc if spec.sweep_json == "json" else {"status": row.status, "summary": summary}
        (folder / "run.json").write_text(json.dumps(doc))
        _write_steps(folder, row.steps)
    else:
        (folder / "summary.csv").write_bytes(spec.raw)


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["compare", *args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else -1
    return code, out.getvalue(), err.getvalue()


def _good(value: float | str) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value >= 0


def _current_is_sound(spec: SideSpec) -> bool:
    """What a pass (exit 0) promises about a well-formed CURRENT sweep: no failed row, every ok row's figures finite."""
    return all(r.status == "ok" and _good(r.step) and _good(r.wire) and r.steps != "inf" for r in spec.rows)


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
@given(pair=pairs(), json_output=st.booleans())
def test_compare_ends_0_1_or_2_in_one_line_and_passes_only_a_sound_sweep(
    pair: tuple[SideSpec, SideSpec], json_output: bool
) -> None:
    base, cur = pair
    with tempfile.TemporaryDirectory() as tmp:
        _write_side(Path(tmp) / "base", base)
        _write_side(Path(tmp) / "cur", cur)
        code, out, err = _run(str(Path(tmp) / "base"), str(Path(tmp) / "cur"), *(["--json"] if json_output else []))
    assert code in (0, 1, 2), (code, out, err)
    assert "Traceback" not in out + err
    if code == 2:
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("netbench: error: "), err
        return
    assert err == "", err
    if json_output:
        doc = json.loads(out)
        assert doc["exit_code"] == code and all("\n" not in line for line in doc["problems"])
        verdict = doc["verdict"]
    else:
        verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("FAIL: ") == (code == 1), verdict
    if code == 0 and cur.kind == "sweep" and not any(r.nodes_text is not None for r in cur.rows):
        assert _current_is_sound(cur), (cur, out)
        if base.kind == "sweep" and cur.sweep_json == "none" and base.rows:  # no grid: every BASELINE point is due
            assert {r.point for r in base.rows} <= {r.point for r in cur.rows}, (base, cur, out)
