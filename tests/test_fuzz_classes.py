"""The classes of untrusted input, each one generator: cost that grows with the input, library configuration files
in the working directory, values from files echoed, and commands that disagree on one file.

A new class is one more generator here; a new case of a class is one more entry of its table. Every check goes
through the code a command runs (the readers, the fit, the CLI's entry point), and each asserts what the class is
about: time linear (or, for the fit, quadratic) in the input, a library's parameters netbench's own, no planted value
in any output, one verdict per file.
"""

from __future__ import annotations

import ast
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from report_cli import netbench
from synthetic_sweep import grid, write_sweep

from netbench import untrusted
from netbench.model import nccl_tests
from netbench.orchestrator.sweep.scenario import ScenarioError, scenario_from_dict
from netbench.reports import plots, target
from netbench.rundir.reading import csv_rows
from netbench.rundir.sweepdir import read_summary
from netbench.schedule.parse import ScheduleError, parse_text

REPO = Path(__file__).resolve().parent.parent
SECRET = 481516  # planted in files as a number: an output holding it echoed the file

# ---- cost at growing sizes ------------------------------------------------------------------------------------------


def _sweep_rows_naming_one_run(folder: Path, rows: int) -> Path:
    """A sweep whose ``rows`` summary rows all name the first point's run directory."""
    write_sweep(folder, grid(reps=("full",), rates=("10mbit",)), steps=400)
    frame = pd.read_csv(folder / "summary.csv")
    frame = pd.concat([frame] * rows, ignore_index=True)
    frame["key"] = [f"k{i}" for i in range(rows)]
    frame.to_csv(folder / "summary.csv", index=False)
    return folder


def _nccl_rows(n: int) -> list[tuple[float, float]]:
    return [(8.0 * (i + 1), 1e-5 + 8.0 * (i + 1) / (1e9 if i < n // 2 else 3e8)) for i in range(n)]


def _report_reading(folder: Path) -> Callable[[], object]:
    def read() -> object:
        untrusted.begin_command([])
        frame = read_summary(folder)
        return plots.with_step_spread(frame, folder), target.loss_curves(frame, folder)

    return read


def _points_tables(n: int) -> Callable[[], object]:
    table = {"nodes": [2, 3, 4], "bw": ["10mbit", "20mbit", "30mbit"]}
    data = {"grid": {"replicator": ["full"]}, "points": [table] * n}

    def refuse() -> object:
        with pytest.raises(ScenarioError, match="points"):
            scenario_from_dict(data)
        return None

    return refuse


def _schedule(n: int) -> Callable[[], object]:
    text = "time_s,rate\n" + "".join(f"{i},10mbit\n" for i in range(n))
    return lambda: parse_text(text, "s.csv")


# name -> (order of growth, size n, setup(tmp, n) -> the work timed); each timed at n and 4n
GROWTH: dict[str, tuple[int, int, Callable[[Path, int], Callable[[], object]]]] = {
    "report's readers, rows naming one steps.csv": (
        1,
        150,
        lambda tmp, n: _report_reading(_sweep_rows_naming_one_run(tmp / f"s{n}", n)),
    ),
    "NCCL fit's three-segment search": (2, 80, lambda tmp, n: lambda: nccl_tests._best_cut(_nccl_rows(n), 3)),
    "sweep point count of [[points]] tables": (1, 800, lambda tmp, n: _points_tables(n)),
    "schedule reader": (1, 1000, lambda tmp, n: _schedule(n)),
    "CSV rows as the parser splits them": (1, 200_000, lambda tmp, n: lambda: csv_rows("a\r\n1\r" * n)),
}


def _median_time(work: Callable[[], object], runs: int = 5) -> float:
    """The median of ``runs`` timings, the garbage collector held off (a full collection walks every object the
    process holds, a cost of the heap, not of the input)."""
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            started = time.perf_counter()
            work()
            times.append(time.perf_counter() - started)
    finally:
        gc.enable()
    return statistics.median(times)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(GROWTH))
def test_cost_grows_no_faster_than_stated(tmp_path: Path, name: str) -> None:
    """Time at n and at 4n: the ratio of medians stays under twice what the stated order gives (4 for linear, 16
    for quadratic), so a cost one order higher (16 or 64) fails even on a shared machine."""
    order, n, setup = GROWTH[name]
    small, large = setup(tmp_path, n), setup(tmp_path, 4 * n)
    small(), large()  # warm: imports, caches of the interpreter
    ratio = _median_time(large) / max(_median_time(small), 1e-6)
    assert ratio < 2 * 4**order, f"{name}: 4x the input took {ratio:.1f}x the time (stated: O(n^{order}))"


def test_fit_search_matches_the_exhaustive_one() -> None:
    """The prefix-sum search finds the cuts the exhaustive one (every range fitted point by point) finds, or cuts of
    the same least error where several are exact (a line of two pieces cut in three)."""

    def exhaustive(points: list[tuple[float, float]], pieces: int) -> tuple[float, list[tuple[int, int]]]:
        n = len(points)
        if pieces == 1:
            return nccl_tests._line(points)[2], [(0, n)]
        best: tuple[float, list[tuple[int, int]]] = (math.inf, [])
        for cut in range(2, n - 2 * (pieces - 1) + 1):
            head = nccl_tests._line(points[:cut])[2]
            tail_sse, tail = exhaustive(points[cut:], pieces - 1)
            if head + tail_sse < best[0]:
                best = (head + tail_sse, [(0, cut)] + [(a + cut, b + cut) for a, b in tail])
        return best

    for n in range(6, 19, 3):
        for noise in (0.0, 0.01, 0.2):
            points = [(s, t * (1 + noise * math.sin(7 * i))) for i, (s, t) in enumerate(_nccl_rows(n))]
            for pieces in (2, 3):
                (ours, cuts), (least, best) = nccl_tests._best_cut(points, pieces), exhaustive(points, pieces)
                assert cuts == best or ours <= least * (1 + 1e-9) + 1e-12  # the same cuts, or a tie at the least


def test_a_file_named_on_every_row_is_read_once(tmp_path: Path) -> None:
    folder = _sweep_rows_naming_one_run(tmp_path / "s", 50)
    untrusted.begin_command([])
    plots.with_step_spread(read_summary(folder), folder)
    spent = untrusted._reading.spent
    steps = next(folder.glob("runs/*/steps.csv")).stat().st_size
    assert spent < (folder / "summary.csv").stat().st_size + 2 * steps


def test_the_byte_budget_is_said_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _sweep_rows_naming_one_run(tmp_path / "s", 3)
    monkeypatch.setattr(untrusted, "READ_BUDGET", (folder / "summary.csv").stat().st_size - 1)
    line = netbench("report", str(folder)).error_line
    assert "bytes one command reads" in line


# ---- library configuration files in the working directory -----------------------------------------------------------

RC_KEYS = {
    "lines.markersize": ["100000", "1e308", "x"],
    "font.size": ["x", "-1", "1e308"],
    "text.usetex": ["True"],
    "savefig.dpi": ["6000", "x"],
    "figure.figsize": ["400, 400", "x"],
    "backend": ["TkAgg", "module://os"],
    "text.latex.preamble": [r"\input{/etc/hostname}"],
    "axes.prop_cycle": ["cycler('color', ['r'])", "__import__('os')"],
}
PROBE = (
    "import json, os, sys; os.chdir(sys.argv[1]); "
    "from netbench.reports.drawing import matplotlib as m; "
    "print(json.dumps({k: str(m.rcParams[k]) for k in json.loads(sys.argv[2])} | {'backend': m.get_backend()}))"
)


def _drawing_parameters(cwd: Path, env: dict[str, str]) -> dict[str, str]:
    keys = [k for k in RC_KEYS if k != "backend"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(cwd), json.dumps(keys)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "pepper" not in done.stderr and "hostname" not in done.stderr, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def own_parameters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _drawing_parameters(tmp_path_factory.mktemp("clean"), {})


@pytest.mark.timeout(300)
@settings(max_examples=examples(6), deadline=None, database=None)
@given(
    lines=st.lists(
        st.sampled_from(list(RC_KEYS)).flatmap(
            lambda k: st.sampled_from(RC_KEYS[k]).map(lambda v: f"{k}: {v} # pepper")
        ),
        min_size=1,
        max_size=4,
    ),
    where=st.sampled_from(["cwd", "MPLCONFIGDIR", "MATPLOTLIBRC", "HOME", "stylelib"]),
)
def test_matplotlib_takes_no_configuration_from_the_folder(
    tmp_path_factory: pytest.TempPathFactory, own_parameters: dict[str, str], lines: list[str], where: str
) -> None:
    """A matplotlibrc (or a style file) in the working directory, $MPLCONFIGDIR, $MATPLOTLIBRC or ~/.config changes
    nothing netbench draws with, and is never echoed."""
    base = tmp_path_factory.mktemp("rc")
    text = "\n".join(lines) + "\n"
    env: dict[str, str] = {}
    if where == "cwd":
        (base / "matplotlibrc").write_text(text)
    elif where in ("MPLCONFIGDIR", "stylelib"):
        (base / "stylelib").mkdir()
        (base / ("matplotlibrc" if where == "MPLCONFIGDIR" else "stylelib/pepper.mplstyle")).write_text(text)
        env["MPLCONFIGDIR"] = str(base)
    elif where == "MATPLOTLIBRC":
        (base / "rc").write_text(text)
        env["MATPLOTLIBRC"] = str(base / "rc")
    else:
        (base / ".config" / "matplotlib").mkdir(parents=True)
        (base / ".config" / "matplotlib" / "matplotlibrc").write_text(text)
        env["HOME"] = str(base)
    assert _drawing_parameters(base, env) == own_parameters


def test_only_the_drawing_module_imports_matplotlib() -> None:
    """Every figure netbench draws (report's, plan's) takes pyplot from netbench.reports.drawing, configured there."""
    package = Path(untrusted.__file__).parent  # the netbench package
    importers = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
                importers.append(str(path.relative_to(package)))
    assert sorted(set(importers)) == ["reports/drawing.py"]


@pytest.mark.timeout(60)
def test_a_fifo_named_matplotlibrc_never_blocks(tmp_path: Path, own_parameters: dict[str, str]) -> None:
    os.mkfifo(tmp_path / "matplotlibrc")
    assert _drawing_parameters(tmp_path, {}) == own_parameters


# ---- values from files echoed ---------------------------------------------------------------------------------------

NCCL_LOG = (REPO / "tests" / "fixtures" / "nccl_tests" / "gcp-a3mega-2x8-h100-all_reduce.txt").read_text()
FIT = {"ranks": 2, "segments": [{"upto_bytes": 1e12, "latency_s": 0.0, "bus_Bps": 1e9}]}
# name -> (file name, text with V standing for the planted value, argv (OUT: an output file) before the file)
ECHOED = {
    "schedule times out of order": ("s.csv", "time_s,rate\nV,10mbit\n1,20mbit\n", ["sweep", "--dry-run", "--schedule"]),
    "trace stamps out of order": ("s.mahi", "0\nV\n1\n", ["sweep", "--dry-run", "--schedule"]),
    "schedule link cell": ("s.csv", "time_s,link,rate\n0,nV\x1b[31m,10mbit\n", ["sweep", "--dry-run", "--schedule"]),
    "schedule link name": ("s.csv", "time_s,link,rate\n0,nV,10mbit\n", ["sweep", "--dry-run", "--schedule"]),
    "schedule change that sets nothing": ("s.csv", "time_s,link,rate\nV,*,\n", ["sweep", "--dry-run", "--schedule"]),
    "fit collective name": (
        "f.json",
        json.dumps({"kind": "nccl-tests-fit", "collectives": {"\x1b[31mV": FIT}}),
        ["plan", "-r", "full", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration"],
    ),
    "fit source": (
        "f.json",
        json.dumps({"kind": "nccl-tests-fit", "collectives": {"all_reduce": {**FIT, "source": "\x1b]0;V\x07"}}}),
        ["plan", "-r", "full", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration"],
    ),
    "fit bandwidth below every bound": (
        "f.json",
        json.dumps({"collectives": {"all_reduce": {**FIT, "segments": [{"upto_bytes": 1e12, "bus_Bps": 5e-324}]}}}),
        ["plan", "-r", "full", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration"],
    ),
    "nccl-tests rank number": (
        "log.txt",
        NCCL_LOG.replace("#  Rank  0 Group", "#  Rank  V" + "9" * 5000 + " Group", 1),
        ["calibrate", "--out", "OUT", "--from-nccl-tests"],
    ),
    "nccl-tests table times": (
        "log.txt",
        NCCL_LOG.replace("    203.2 ", "  1e-300 ").replace("    254.0 ", "   1e300 ").replace("   364.6 ", " V.0 "),
        ["calibrate", "--out", "OUT", "--from-nccl-tests"],
    ),
}


@pytest.mark.parametrize("case", list(ECHOED))
def test_no_value_from_a_file_is_echoed(tmp_path: Path, case: str) -> None:
    name, text, argv = ECHOED[case]
    path = tmp_path / name
    path.write_text(text.replace("V", str(SECRET)))
    done = netbench(*(str(tmp_path / "out.json") if a == "OUT" else a for a in argv), str(path))
    shown = done.out + done.err
    assert done.code in (0, 2), (done.code, done.err[-2000:])
    assert "Traceback" not in shown and "\x1b" not in shown and "\x07" not in shown, shown[-2000:]
    assert str(SECRET) not in shown.replace(str(tmp_path), ""), shown[-2000:]
    if done.code == 2:
        assert done.error_line


def test_a_path_holding_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "a[" / "x]"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "nccl_tests" / "gcp-a3mega-2x8-h100-all_reduce.txt", folder / "l.txt")
    done = netbench("calibrate", "--from-nccl-tests", str(folder / "l.txt"), "--out", str(folder / "fit.json"))
    assert done.code == 0 and "Traceback" not in done.err, done.err[-2000:]
    assert str(folder / "l.txt") in done.out + done.err


# ---- commands that disagree on one file -----------------------------------------------------------------------------


def _steps_csv(folder: Path) -> Path:
    return next(folder.glob("runs/*/steps.csv"))


def _plant(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _with(path: Path, key: str, value: float) -> None:
    """``path``'s JSON object with ``key`` set to ``value`` (NaN and Infinity written as Python's JSON writes them)."""
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, key: value}))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


# name -> what is done to a sweep folder
DAMAGE: dict[str, Callable[[Path], None]] = {
    "a byte that is not UTF-8 in steps.csv": lambda f: _plant(_steps_csv(f), _steps_csv(f).read_bytes() + b"\xff\n"),
    "a FIFO as steps.csv": lambda f: _fifo(f / "runs" / "r0" / "steps.csv"),
    "NaN in sweep.json": lambda f: _with(f / "sweep.json", "x", float("nan")),
    "Infinity in sweep.json": lambda f: _with(f / "sweep.json", "x", -float("inf")),
    "summary rows split by a bare carriage return": lambda f: _plant(
        f / "summary.csv", (f / "summary.csv").read_bytes().replace(b"\n", b"\r", 2)
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_report_and_compare_give_one_verdict(tmp_path: Path, damage: str) -> None:
    clean = write_sweep(tmp_path / "clean", grid(reps=("full",), rates=("10mbit", "100mbit")))
    damaged = write_sweep(tmp_path / "damaged", grid(reps=("full",), rates=("10mbit", "100mbit")))
    DAMAGE[damage](damaged)
    before = sorted(p.name for p in damaged.iterdir())
    reported = netbench("report", str(damaged))
    compared = netbench("compare", str(clean), str(damaged))
    assert (reported.code == 2) == (compared.code == 2), (reported.err, compared.err)
    if reported.code == 2:  # refused before anything was drawn or written
        assert sorted(p.name for p in damaged.iterdir()) == before


CALIBRATIONS = {
    "NaN": lambda doc: doc.update(compression_s_per_param={"full": float("nan")}),
    "Infinity": lambda doc: doc.update(software_overhead_s=float("inf")),
    "a negative cost": lambda doc: doc.update(software_overhead_s=-1.0),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CALIBRATIONS))
def test_report_calibration_writes_nothing_it_refuses(tmp_path: Path, case: str) -> None:
    folder = write_sweep(tmp_path / "s", grid(reps=("full",), rates=("10mbit", "100mbit")))
    doc = json.loads((REPO / "reports" / "target" / "calibration.json").read_text())
    CALIBRATIONS[case](doc)
    (tmp_path / "cal.json").write_text(json.dumps(doc))
    before = {p: p.read_bytes() for p in (folder / "summary.csv", folder / "sweep.json")}
    done = netbench("report", str(folder), "--calibration", str(tmp_path / "cal.json"))
    assert done.code == 2 and done.error_line
    assert {p: p.read_bytes() for p in before} == before
    assert netbench("report", str(folder)).code == 0  # the folder still reports


def test_json_readers_refuse_nan_and_infinity_at_parse() -> None:
    for text in ('{"a": NaN}', '{"a": Infinity}', "[-Infinity]"):
        with pytest.raises(untrusted.BadInput, match="not a number JSON holds"):
            untrusted.parse_json(text, "x.json")


def test_schedule_errors_name_the_change(tmp_path: Path) -> None:
    with pytest.raises(ScheduleError, match=r"change 2 comes before change 1$"):
        parse_text(f"time_s,rate\n{SECRET},10mbit\n1,20mbit\n", "s.csv")


# ---- numbers and lists at the edges of every option ------------------------------------------------------------------

EDGES = {
    "plan --nodes of 33 counts": ["plan", "-r", "full", "--nodes", ",".join(map(str, range(2, 35)))],
    "sweep --bw of 33 rates": [
        "sweep",
        "--dry-run",
        "-r",
        "full",
        "--bw",
        ",".join(f"{i + 10}mbit" for i in range(33)),
    ],
    "plan --mfu 5e-324": ["plan", "-r", "full", "--accelerator", "h100-sxm", "--mfu", "5e-324"],
    "plan --mfu 1e400": ["plan", "-r", "full", "--accelerator", "h100-sxm", "--mfu", "1e400"],
    "plan --seq 0": ["plan", "-r", "full", "--accelerator", "h100-sxm", "--batch", "8", "--seq", "0"],
}


@pytest.mark.parametrize("case", list(EDGES))
def test_options_hold_their_declared_bounds(case: str) -> None:
    assert netbench(*EDGES[case]).error_line


def test_the_console_writes_no_control_character_it_did_not_style() -> None:
    import io

    from rich.table import Table

    from netbench.reports.terminal import make_console

    out = io.StringIO()
    console = make_console(file=out, force_terminal=True)
    table = Table("name")
    table.add_row("\x1b]0;pepper\x07 \u202eevil")
    console.print(table)
    console.print("[/x] path a[/x]/b.json", highlight=False)
    text = out.getvalue()
    assert "\x07" not in text and "\u202e" not in text and "\x1b]0" not in text
    assert "a[/x]/b.json" in text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["report.md", "report.html", "time_vs_bandwidth.png"])
def test_an_output_name_that_is_a_folder_is_refused_before_anything_is_written(tmp_path: Path, name: str) -> None:
    folder = write_sweep(tmp_path / "s", grid(reps=("full",), rates=("10mbit", "100mbit")))
    (folder / name).mkdir()
    before = sorted(p.name for p in folder.iterdir())
    assert "a folder where the report writes a file" in netbench("report", str(folder)).error_line
    assert sorted(p.name for p in folder.iterdir()) == before
