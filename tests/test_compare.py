"""netbench compare: matching by configuration, thresholds beyond noise, exit codes through the console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from synthetic_sweep import grid, write_sweep

from netbench.orchestrator.sweep.scenario import recorded_grid_points
from netbench.reports.compare import PointFigures, Side, compare, parse_fraction
from netbench.reports.compare import load_side as load_folder


def load_side(path: Path) -> Side:
    """A folder as ``netbench compare`` reads it: a recorded grid expanded by the sweep's own rules."""
    return load_folder(path, recorded_grid_points)


NETBENCH = (
    str(Path(sys.executable).parent / "netbench")
    if (Path(sys.executable).parent / "netbench").exists()
    else shutil.which("netbench")
)


def nb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([NETBENCH, *args], capture_output=True, text=True, timeout=120)


def figs(
    step: float, wire: float, step_noise: float | None = None, wire_noise: float | None = None, status: str = "ok"
) -> PointFigures:
    return PointFigures("p", status, step, wire, step_noise, wire_noise, "counters")


def side(points: dict) -> Side:
    """A side of hand-made figures (no grid recorded: every BASELINE point is expected in CURRENT)."""
    return Side(points, None, tuple(p for p in points.values() if not p.ok), None, len(points))


def test_matching_is_by_coordinates_not_point_key(tmp_path) -> None:
    base = write_sweep(tmp_path / "base", grid())
    cur = write_sweep(tmp_path / "cur", grid(reps=("full", "random")))
    frame = pd.read_csv(cur / "summary.csv")
    frame["key"] = "other"  # another step count or setting changes the key; the coordinates still match
    frame.to_csv(cur / "summary.csv", index=False)
    result = compare(load_side(base), load_side(cur))
    assert [r.label for r in result.rows] == ["full 2n 10mbit 0ms", "full 2n 100mbit 0ms"]
    assert result.only_base == ["dct 2n 10mbit 0ms", "dct 2n 100mbit 0ms"]
    assert result.only_cur == ["random 2n 10mbit 0ms", "random 2n 100mbit 0ms"]


def test_points_sharing_coordinates_are_told_apart_by_their_variant(tmp_path) -> None:
    (star,) = grid(reps=("full",), rates=("10mbit",))
    sites = dict(star, variant="sites2 wan 10mbit 5ms", step=2.0)
    base = write_sweep(tmp_path / "base", [dict(star, variant=""), sites])
    result = compare(
        load_side(base), load_side(write_sweep(tmp_path / "cur", [dict(star, variant=""), dict(sites, step=4.0)]))
    )
    assert [r.label for r in result.rows] == ["full 2n 10mbit 0ms", "full 2n 10mbit 0ms sites2 wan 10mbit 5ms"]
    assert result.step_regressions == ["full 2n 10mbit 0ms sites2 wan 10mbit 5ms"]
    gone = compare(load_side(base), load_side(write_sweep(tmp_path / "star only", [dict(star, variant="")])))
    assert gone.only_base == ["full 2n 10mbit 0ms sites2 wan 10mbit 5ms"] and gone.exit_code() == 1


def test_a_recorded_scenario_expects_its_explicit_points_with_their_variants(tmp_path) -> None:
    folder = write_sweep(tmp_path / "s", [dict(p, variant="") for p in grid(reps=("full",), rates=("10mbit",))])
    doc = json.loads((folder / "sweep.json").read_text())
    doc["scenario"].update(
        grid={"replicator": "full", "bw": "10mbit", "nodes": 2},
        points=[
            {"topology": "sites", "wan_bw": "10mbit", "wan_delay": "5ms", "nodes": 4},
            {"topology": "sites", "nodes": 4, "shard_within": "site"},
        ],
    )
    (folder / "sweep.json").write_text(json.dumps(doc))
    assert load_side(folder).expected == {
        ("full", 2, 10_000_000, 0.0, ""),
        ("full", 4, 10_000_000, 0.0, "sites2 wan 10mbit 5ms"),
        ("full", 4, 10_000_000, 0.0, "sharded in sites sites2 wan 100mbit 0ms"),
    }


def test_threshold_is_exceeded_only_beyond_the_noise() -> None:
    key = ("full", 2, 10_000_000, 0.0, "")
    base = side({key: figs(1.0, 1000.0)})
    assert compare(base, side({key: figs(1.15, 1000.0)}), 0.10).step_regressions == ["p"]  # 15 % > 10 %, no noise known
    assert compare(base, side({key: figs(1.15, 1000.0, step_noise=0.03)}), 0.10).step_regressions == [
        "p"
    ]  # 1.15 > 1.10 + 0.03
    assert (
        compare(base, side({key: figs(1.15, 1000.0, step_noise=0.06)}), 0.10).step_regressions == []
    )  # within 1.10 + 0.06
    both = compare(
        side({key: figs(1.0, 1000.0, step_noise=0.03)}), side({key: figs(1.15, 1000.0, step_noise=0.04)}), 0.10
    )
    assert both.step_regressions == [] and both.rows[0].step_noise_rel == pytest.approx(0.05)  # hypot(0.03, 0.04)
    grown = compare(base, side({key: figs(1.0, 1050.0)}), 0.10, 0.03)
    assert grown.wire_regressions == ["p"] and grown.exit_code() == 1
    assert compare(base, side({key: figs(1.0, 1020.0)}), 0.10, 0.03).exit_code() == 0
    assert (
        compare(base, side({key: figs(1.5, 1000.0)}), time_advisory=True).exit_code() == 0
    )  # time reported, not gating
    assert compare(base, side({key: figs(1.0, 1000.0, status="failed")})).exit_code() == 1
    assert compare(base, side({key: figs(0.5, 500.0)})).exit_code() == 0  # faster and smaller is fine


def test_noise_comes_from_the_steps_spread(tmp_path) -> None:
    side = load_side(write_sweep(tmp_path / "s", grid(), spread=0.1))
    point = side.points[("full", 2, 10_000_000, 0.0, "")]
    # per-step times 0.9 and 1.1 alternate: MAD 0.1, standard error of the median 1.4826 * 1.2533 * 0.1 / sqrt(8)
    assert point.step_noise_s == pytest.approx(1.4826 * 1.2533 * 0.1 / 8**0.5, rel=1e-6)
    assert point.wire_noise == 0.0
    bare = load_side(write_sweep(tmp_path / "bare", grid(), with_runs=False))
    assert bare.points[("full", 2, 10_000_000, 0.0, "")].step_noise_s is None


def test_parse_fraction() -> None:
    assert parse_fraction("10%", "--x") == pytest.approx(0.1) and parse_fraction("0.03", "--x") == 0.03
    for bad in ("-5%", "abc", "nan"):
        with pytest.raises(ValueError):
            parse_fraction(bad, "--x")


def _scaled(folder: Path, out: Path, column: str, factor: float) -> Path:
    """A copy of a sweep folder with one summary column scaled (per-step files scaled alike)."""
    shutil.copytree(folder, out)
    frame = pd.read_csv(out / "summary.csv")
    frame[column] *= factor
    frame.to_csv(out / "summary.csv", index=False)
    step_column = {"step_time_s": "step_s", "wire_tx_bytes_per_step": "tx_bytes"}[column]
    for steps in out.glob("runs/*/steps.csv"):
        s = pd.read_csv(steps)
        s[step_column] *= factor
        s.to_csv(steps, index=False)
    return out


def test_exit_codes_through_the_console_script(tmp_path) -> None:
    base = write_sweep(tmp_path / "base", grid())
    same = nb("compare", str(base), str(base))
    assert same.returncode == 0, same.stderr
    assert "no regression over 4 matched points" in same.stdout

    slow = _scaled(base, tmp_path / "slow", "step_time_s", 1.3)
    out = nb("compare", str(base), str(slow), "--max-slowdown", "10%")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "FAIL: 4 slower (4 points matched)"
    assert "slower: full 2n 10mbit 0ms: step time +30.0% beyond +10% + noise ±" in out.stdout
    assert sum(line.startswith("slower: ") for line in lines) == 4
    assert nb("compare", str(base), str(slow), "--max-slowdown", "40%").returncode == 0
    assert nb("compare", str(base), str(slow), "--time-advisory").returncode == 0  # CI: timing informs, never fails

    grown = _scaled(base, tmp_path / "grown", "wire_tx_bytes_per_step", 1.05)
    out = nb("compare", str(base), str(grown), "--time-advisory")
    assert out.returncode == 1 and "bytes: dct 2n 10mbit 0ms: wire bytes +5.0% beyond +3% + noise" in out.stdout
    assert nb("compare", str(base), str(grown), "--max-bytes-growth", "6%").returncode == 0

    other = write_sweep(tmp_path / "other", grid(rates=("1gbit",)))
    out = nb("compare", str(base), str(other))
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1
    assert "nothing to compare" in out.stderr
    transformer = write_sweep(tmp_path / "transformer", grid(), kind="transformer")
    out = nb("compare", str(base), str(transformer))  # same grid, another model: not comparable
    assert out.returncode == 2 and "workloads differ (kind 'shapes' -> 'transformer'" in out.stderr
    for bad in (
        [str(tmp_path / "missing"), str(base)],
        [str(base), str(tmp_path)],
        [str(base), str(base), "--max-slowdown", "x"],
    ):
        out = nb("compare", *bad)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (bad, out.stderr)


def test_json_markdown_and_run_directories(tmp_path) -> None:
    base = write_sweep(tmp_path / "base", grid())
    slow = _scaled(base, tmp_path / "slow", "step_time_s", 1.3)
    md = tmp_path / "summary.md"
    out = nb("compare", str(base), str(slow), "--json", "--markdown", str(md))
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["exit_code"] == 1 and len(doc["step_regressions"]) == 4 and doc["wire_regressions"] == []
    assert doc["points"][0]["step_ratio"] == pytest.approx(1.3)
    text = md.read_text()
    assert text.startswith("## netbench compare: regression") and "| full 2n 10mbit 0ms |" in text and "+30.0%" in text
    # a run directory (run.json + steps.csv) compares against the matching point of a sweep
    run = tmp_path / "run"
    shutil.copytree(base / "runs" / "r0", run)
    row = pd.read_csv(base / "summary.csv").iloc[0]
    (run / "run.json").write_text(
        json.dumps(
            {
                "status": "ok",
                "summary": {
                    "replicator": row["replicator"],
                    "nodes": int(row["nodes"]),
                    "bw_bps": float(row["bw_bps"]),
                    "delay_ms": 0.0,
                    "step_time_s": float(row["step_time_s"]),
                    "wire_tx_bytes_per_step": float(row["wire_tx_bytes_per_step"]),
                },
            }
        )
    )
    out = nb("compare", str(base), str(run))
    assert out.returncode == 0 and "no regression over 1 matched points" in out.stdout
