"""compare's --benchmark-json format: what github-action-benchmark's customSmallerIsBetter reads."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from netbench.reports.benchmark_json import FIELDS, REQUIRED, benchmark_entries


@dataclass(frozen=True)
class Point:
    label: str
    status: str
    step_time_s: float | None
    step_noise_s: float | None
    wire_bytes: float | None
    wire_noise: float | None


def check_format(doc: object) -> None:
    """customSmallerIsBetter: an array of objects with a string name and unit and a number value; range and extra
    strings.
    """
    assert isinstance(doc, list)
    names = [e["name"] for e in doc]
    assert len(names) == len(set(names)), "every series is named once"
    for entry in doc:
        assert isinstance(entry, dict) and set(REQUIRED) <= set(entry) <= set(FIELDS), entry
        for key, value in entry.items():
            assert isinstance(value, FIELDS[key]) and not isinstance(value, bool), (key, value)
        assert entry["name"] and math.isfinite(entry["value"])


def test_each_point_gives_its_step_time_and_wire_bytes() -> None:
    points = [
        Point("dct 2n 100mbit 20ms", "ok", 0.25, 0.004, 781_000.0, None),
        Point("full 2n 100mbit 20ms", "ok", 1.5, None, 56_000_000.0, 1200.0),
    ]
    doc = json.loads(json.dumps(benchmark_entries(points)))  # as the file holds it
    check_format(doc)
    assert [(e["name"], e["unit"], e["value"]) for e in doc] == [
        ("dct 2n 100mbit 20ms step time", "s", 0.25),
        ("dct 2n 100mbit 20ms wire bytes", "bytes/step", 781_000.0),
        ("full 2n 100mbit 20ms step time", "s", 1.5),
        ("full 2n 100mbit 20ms wire bytes", "bytes/step", 56_000_000.0),
    ]
    assert doc[0]["range"] == "± 0.004" and "range" not in doc[1]


def test_failed_and_unmeasured_points_are_left_out() -> None:
    points = [Point("a", "failed", 1.0, None, 1.0, None), Point("b", "ok", None, None, float("nan"), None)]
    assert benchmark_entries(points) == []
    check_format([])


def test_compare_writes_the_current_sides_series_with_benchmark_json(tmp_path) -> None:
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    current = tmp_path / "current"
    shutil.copytree(repo / "reports" / "ci", current, ignore=shutil.ignore_patterns("*.png", "report.*"))
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "netbench",
            "compare",
            str(repo / "reports" / "ci"),
            str(current),
            "--time-advisory",
            "--benchmark-json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    check_format(doc)
    assert (
        len(doc) == 2 * len(set(e["name"].rsplit(" ", 2)[0] for e in doc)) > 0
    )  # a step time and wire bytes per point
