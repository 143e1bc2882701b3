"""Crafted inputs of every class netbench must survive as root: reading runs no code, a message never shows a file's
content, every reader refuses links, FIFOs and folders alike, writes never go where others can redirect them, and
no input, however large, costs more than the check that refuses it.

Each case is one crafted file or folder, run through the real entry point (in this process where that is safe, in a
child where a failing case would abort or import into the test process itself).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest
from report_cli import Outcome, netbench
from synthetic_sweep import write_sweep

from netbench import safe_files, untrusted
from netbench.child import NETBENCH_ROOT
from netbench.model.calibration import Calibration

REPO = Path(__file__).resolve().parent.parent
STORED_RUN = next((REPO / "reports" / "target" / "runs").glob("*full*"))
SECRET = "root:$6$pepper$c2VjcmV0:19000:0:99999:7:::"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")


def one_line(outcome: Outcome, *needles: str) -> str:
    line = outcome.error_line
    assert "Traceback" not in outcome.err and all(n in line for n in needles), line
    return line


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file only root reads, whose first line no message may show."""
    path = tmp_path / "shadow"
    path.write_text(SECRET + "\nbin:*:19000:0:99999:7:::\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def calibration(tmp_path: Path) -> Path:
    path = tmp_path / "calibration.json"
    path.write_text(Calibration().model_dump_json())
    return path


def stored_sweep(folder: Path, workload: dict) -> Path:
    """A one-point sweep folder whose run directory is a real run's, its recorded workload replaced by ``workload``."""
    write_sweep(folder, [{"replicator": "full", "nodes": 2, "bw": "100mbit", "step": 0.5, "wire": 1e6}])
    run = folder / "runs" / "r0"
    shutil.rmtree(run)
    shutil.copytree(STORED_RUN, run)
    doc = json.loads((run / "run.json").read_text())
    doc["config"]["workload"] = workload
    doc.pop("workload", None)  # a run recorded before its shapes were
    (run / "run.json").write_text(json.dumps(doc))
    return folder


# ---- reading runs no code ----------------------------------------------------------------------------------------


def test_report_with_a_calibration_imports_no_module_a_stored_run_names(
    tmp_path: Path, calibration: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = stored_sweep(tmp_path / "sweep", {"kind": "python:plantedwl:make"})
    (folder / "plantedwl.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\ndef make(): pass\n")
    monkeypatch.chdir(folder)
    outcome = netbench("report", ".", "--calibration", str(calibration))
    assert outcome.code == 0, outcome.err
    assert not (tmp_path / "ran").exists() and "plantedwl" not in sys.modules
    summary = pd.read_csv(folder / "summary.csv")
    assert "recorded no parameter shapes" in summary.loc[0, "prediction_error"]


def test_a_stored_transformer_is_predicted_from_its_declared_shapes_never_built(
    tmp_path: Path, calibration: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """9e10 parameters (360 GB of fp32) as a stored run may ask: predicted from shapes, no tensor allocated."""
    from netbench import workloads

    def refuse(*_args: object) -> None:
        raise AssertionError("a stored workload was built")

    monkeypatch.setattr(workloads, "build_workload", refuse, raising=False)
    huge = {"kind": "transformer", "d_model": 8192, "n_layers": 110, "n_heads": 64}
    folder = stored_sweep(tmp_path / "sweep", huge)
    outcome = netbench("report", str(folder), "--calibration", str(calibration))
    assert outcome.code == 0, outcome.err
    summary = pd.read_csv(folder / "summary.csv")
    assert pd.isna(summary.loc[0, "prediction_error"]) and summary.loc[0, "pred_step_time_s"] > 0, summary.iloc[0]


def test_a_stored_workload_beyond_the_command_lines_limits_is_bad_input(tmp_path: Path, calibration: Path) -> None:
    too_big = {"kind": "transformer", "d_model": 8, "n_layers": 100_000_000, "n_heads": 1}  # 1.2e9 tensors
    folder = stored_sweep(tmp_path / "sweep", too_big)
    one_line(netbench("report", str(folder), "--calibration", str(calibration)), "workload", "tensors")


def _dry_run_child(tmp_path: Path, workload: str) -> subprocess.CompletedProcess:
    """`sweep SCENARIO --dry-run` in a child, in a folder holding a module that leaves a marker when imported."""
    (tmp_path / "plantedwl.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\ndef make(): pass\n")
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(f'[workload]\nkind = "{workload}"\n[grid]\nbw = ["100mbit"]\nreplicator = ["full"]\n')
    return subprocess.run(
        [sys.executable, "-c", "from netbench.cli.app import main; main()", "sweep", str(scenario), "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": NETBENCH_ROOT},
        timeout=120,
    )


@pytest.mark.parametrize("workload", ["python:plantedwl:make", "python:os:abort"])
def test_a_dry_run_imports_and_calls_nothing(tmp_path: Path, workload: str) -> None:
    done = _dry_run_child(tmp_path, workload)
    assert done.returncode == 0 and "full 2n" in done.stdout, (done.returncode, done.stderr)
    assert not (tmp_path / "ran").exists()


def _planted(folder: Path, names: list[str], marker: Path) -> None:
    for name in names:
        real = Path(sysconfig.get_paths()["stdlib"]) / f"{name}.py"
        mark = f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"
        (folder / f"{name}.py").write_text(mark + f"exec(compile(open({str(real)!r}).read(), {str(real)!r}, 'exec'))\n")


def _module_run(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """``python -S -m ARGV`` in ``cwd``: without site, nothing but the interpreter's own start-up is imported first."""
    paths = [NETBENCH_ROOT, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
    return subprocess.run(
        [sys.executable, "-S", "-m", *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def test_python_m_netbench_imports_nothing_from_the_working_directory(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    work = tmp_path / "work"
    work.mkdir()
    _planted(work, ["typing", "enum", "json", "dataclasses", "inspect"], marker)
    done = _module_run(work, "netbench", "--help")
    assert done.returncode == 0 and "Usage" in done.stdout, done.stderr
    assert not marker.exists(), marker.read_text()


def test_python_m_netbench_stops_where_the_interpreter_already_imported_from_there(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    work = tmp_path / "work"
    work.mkdir()
    _planted(work, ["keyword"], marker)  # imported by the interpreter's own module lookup, before netbench
    done = _module_run(work, "netbench", "--help")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "keyword" in lines[0] and "python -P" in lines[0], done.stderr
    assert "Usage" not in done.stdout


# ---- a message never shows a file's content ---------------------------------------------------------------------


def test_a_schedule_that_is_a_secret_file_is_refused_without_its_content(tmp_path: Path, secret: Path) -> None:
    line = one_line(netbench("run", "--out", str(tmp_path / "out"), "--schedule", str(secret)), "--schedule")
    assert "root" not in line.replace(str(tmp_path), "") and "19000" not in line


def test_a_scenarios_schedule_pointing_at_a_secret_file_shows_none_of_it(tmp_path: Path, secret: Path) -> None:
    scenario = tmp_path / "sub" / "scenario.toml"
    scenario.parent.mkdir()
    scenario.write_text('schedule = "../shadow"\n[grid]\nreplicator = ["full"]\n')
    line = one_line(netbench("sweep", str(scenario), "--dry-run"), "schedule")
    assert "root" not in line.replace(str(tmp_path), "") and "19000" not in line


def test_a_scenarios_values_are_not_echoed(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(f'[grid]\nbw = ["{SECRET}"]\ndelay = ["{SECRET}"]\n')
    line = one_line(netbench("sweep", str(scenario), "--dry-run"), "grid.bw[0]: cannot read rate")
    assert "pepper" not in line


# ---- every reader refuses the same things -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--topology", "{dir}"],
        ["sweep", "{dir}", "--dry-run"],
        ["plan", "--shapes", "{dir}/x.json"],
        ["run", "--schedule", "{dir}"],
    ],
    ids=["topology", "scenario", "shapes", "schedule"],
)
def test_a_folder_where_a_file_belongs_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    folder = tmp_path / "folder"
    (folder / "x.json").mkdir(parents=True)
    args = [a.replace("{dir}", str(folder)) for a in argv]
    one_line(netbench(*args, *(["--out", str(tmp_path / "out")] if args[0] == "run" else [])), "directory")


def test_a_folder_as_calibration_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cal").mkdir()
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "cal"))
    one_line(netbench("plan", "--nodes", "2"), "directory")


def test_a_folder_as_summary_csv_is_one_line(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_sweep(tmp_path / name, [{"replicator": "full", "nodes": 2, "bw": "100mbit", "step": 0.5, "wire": 1e6}])
    (tmp_path / "b" / "summary.csv").unlink()
    (tmp_path / "b" / "summary.csv").mkdir()
    one_line(netbench("compare", str(tmp_path / "a"), str(tmp_path / "b")), "directory")


def test_compare_follows_no_link_in_a_folder(tmp_path: Path, secret: Path) -> None:
    for name in ("a", "b"):
        write_sweep(tmp_path / name, [{"replicator": "full", "nodes": 2, "bw": "100mbit", "step": 0.5, "wire": 1e6}])
    (tmp_path / "b" / "summary.csv").unlink()
    (tmp_path / "b" / "summary.csv").symlink_to(secret)
    line = one_line(netbench("compare", str(tmp_path / "a"), str(tmp_path / "b")), "symbolic link")
    assert "pepper" not in line


def test_a_link_the_command_line_names_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "topology.toml"
    real.write_text('[racks]\nracks = 2\nnodes_per_rack = 2\nbw = "1gbit"\n')
    (tmp_path / "link.toml").symlink_to(real)
    outcome = netbench("plan", "--topology", str(tmp_path / "link.toml"), "-r", "full")
    assert outcome.code == 0, outcome.err


# ---- writes ---------------------------------------------------------------------------------------------------


def test_report_run_dir_refuses_a_run_directory_others_may_write(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    run.chmod(0o777)
    one_line(netbench("report", str(run)), "RUN_DIR", "writable by every user")
    assert not (run / "timeline.png").exists() and not (run / "schedule.png").exists()


def test_a_planted_link_at_a_workers_partial_folder_is_refused(tmp_path: Path) -> None:
    from netbench.rundir.layout import partial_records
    from netbench.rundir.records import RecordWriter

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    path = partial_records(out, "exp1", 0)
    path.parent.symlink_to(elsewhere)
    with pytest.raises(safe_files.UnsafeOutput, match="symbolic link"):
        RecordWriter(path)
    assert list(elsewhere.iterdir()) == []


@needs_root
def test_a_partial_folder_another_user_made_is_refused(tmp_path: Path) -> None:
    from netbench.rundir.layout import partial_records
    from netbench.rundir.records import RecordWriter

    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o1777)  # a shared folder: anyone may create a name in it
    path = partial_records(out, "exp1", 0)
    path.parent.mkdir()
    (path.parent / "rank1.jsonl").write_text('{"event": "step"}\n')  # a planted rank's records
    os.chown(path.parent, 65534, 65534)
    with pytest.raises(safe_files.UnsafeOutput, match="owned by uid 65534"):
        RecordWriter(path)


def test_exec_writes_its_declared_shapes_by_the_one_write_rule(tmp_path: Path) -> None:
    from netbench.orchestrator.exec.execute import _model_config  # the function that writes the file
    from netbench.rundir.layout import RunDir

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    run_dir = RunDir(tmp_path / "run")
    run_dir.path.mkdir()
    run_dir.payload_shapes.symlink_to(victim)
    config = _exec_config()
    declared = {"event": "payload", "shapes": {"w": [4, 4]}, "replicator": {"name": "full"}}
    _model_config(config, run_dir, {0: [declared]})
    assert victim.read_text() == "precious\n" and not run_dir.payload_shapes.is_symlink()
    assert json.loads(run_dir.payload_shapes.read_text()) == {"shapes": {"w": [4, 4]}}


def _exec_config():
    from netbench.emulation.spec import ClusterSpec
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.exec.execute import ExecConfig

    run = RunConfig(cluster=ClusterSpec(nodes=2, up={"rate_bps": 1e8}, down={"rate_bps": 1e8}))
    return ExecConfig(run=run, command=("true",))


# ---- trust in what is not ours ----------------------------------------------------------------------------------


@needs_root
@pytest.mark.parametrize("tamper", ["another owner", "writable by others"])
def test_a_cache_entry_not_the_users_own_counts_as_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tamper: str
) -> None:
    from netbench.calibrate import hostcache
    from netbench.declarations.registry import names

    monkeypatch.setenv("NETBENCH_CACHE_DIR", str(tmp_path / "cache"))
    key = {"host": "test"}
    measured = {n: 1e-9 for n in names()}
    calib = Calibration(source="measured", host_key=key, encode_s_per_param=measured, decode_s_per_param=measured)
    (tmp_path / "cache").mkdir(mode=0o700)
    path = hostcache.cache_path(key)
    path.write_text(calib.model_dump_json())
    path.chmod(0o644)
    assert hostcache.cached(key) is not None  # the user's own entry is used
    if tamper == "another owner":
        os.chown(path, 65534, 65534)
    else:
        path.chmod(0o666)
    assert hostcache.cached(key) is None


def test_a_calibrations_text_with_escape_sequences_is_refused_in_one_printable_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cal.json"
    path.write_text(
        Calibration(source="measured").model_dump_json().replace('"host":""', '"host":"\\u001b]0;pwned\\u0007"')
    )
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(path))
    outcome = netbench("plan", "--nodes", "2")
    line = one_line(outcome, "host")
    assert "\x1b" not in outcome.err and "\x07" not in outcome.err and "pwned" not in line


# ---- no traceback -----------------------------------------------------------------------------------------------

DEEP_TOML = "a = " + "[" * 3000 + "]" * 3000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000
LONG_INT = "9" * 5000
SITES = '[[sites]]\nname = "a"\nnodes = 2\nlan_bw = "1gbit"\n[[sites]]\nname = "b"\nnodes = 2\nlan_bw = "1gbit"\n'
WAN = '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n'


@pytest.mark.parametrize(
    ("argv", "name", "text", "needle"),
    [
        (["plan", "--topology"], "t.toml", DEEP_TOML, "nested more than 32 deep"),
        (["plan", "--topology"], "t.toml", f"[[sites]]\nnodes = {LONG_INT}\n", "longer than 19 digits"),
        (["sweep", "--dry-run", "--schedule"], "s.toml", DEEP_TOML, "nested more than 32 deep"),
        (["sweep", "--dry-run", "--schedule"], "s.mahi", "0\n" + LONG_INT + "\n", "more than 12 digits"),
        (["sweep", "--dry-run", "--schedule"], "s.mahi", "\u00b2\n", "a rate trace has the columns"),
        (["sweep", "--dry-run", "--schedule"], "s.mahi", "0\n\u00b2\n", "line 2: expected a whole number"),
        (["sweep", "--dry-run", "--schedule"], "s.csv", ",,,\n,,\n", "no header line"),
        (["sweep", "--dry-run"], "sc.toml", DEEP_TOML, "nested more than 32 deep"),
        (["sweep", "--dry-run"], "sc.toml", f"steps = {LONG_INT}\n", "longer than 19 digits"),
        (["plan", "--shapes"], "s.json", DEEP_JSON, "nested more than 32 deep"),
        (["plan", "--shapes"], "s.json", LONG_INT, "longer than 19 digits"),
        (["plan", "--shapes"], "s.json", json.dumps({"shapes": {"w": [10**11] * 10_000}}), "1 to 16"),
        (["plan", "--shapes"], "s.json", json.dumps({"shapes": {"w": [10**11] * 16}}), "more than 1e+11 parameters"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_crafted_files_are_one_line(tmp_path: Path, argv: list[str], name: str, text: str, needle: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    one_line(netbench(*argv, str(path)), needle)


@pytest.mark.parametrize("text", [DEEP_JSON, f'{{"version": {LONG_INT}}}'], ids=["deep", "long"])
def test_crafted_calibrations_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    (tmp_path / "cal.json").write_text(text)
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "cal.json"))
    one_line(netbench("plan", "--nodes", "2"), "JSON")


@pytest.mark.parametrize("key", ["\u00b2", "\u0663", "03", "-1", "4"])
def test_node_names_python_half_accepts_are_no_node(tmp_path: Path, key: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(SITES + WAN + f'[nodes."{key}"]\nbw = "10mbit"\n')
    one_line(netbench("plan", "--topology", str(path), "-r", "full"), "there is no node")


@pytest.mark.parametrize(
    "text",
    [
        SITES + WAN + '[nodes.1]\ndelay = "5ms"\n',
        '[racks]\nracks = 2\nnodes_per_rack = 2\nbw = "1gbit"\n[nodes.1]\ndelay = "5ms"\n',
    ],
)
def test_a_node_delay_without_a_rate_keeps_its_lan_rate(tmp_path: Path, text: str) -> None:
    from netbench.topology import load_topology

    path = tmp_path / "t.toml"
    path.write_text(text)
    topology = load_topology(path)
    up = topology.access_link(1).forward
    assert up.delay_s == pytest.approx(0.005) and up.rate_bps == 1e9


TRACE_EVENTS = [
    [{"ph": "X", "cat": "step", "pid": 1, "ts": 0, "dur": 5}],  # no args
    [{"ph": "X", "cat": "step", "pid": "1", "ts": 0, "dur": 5, "args": {"step": 1}}],
    [{"ph": "X", "cat": "step", "pid": 1, "ts": "0", "dur": 5, "args": {"step": [1]}}],
    [{"ph": "X", "cat": "step", "pid": 1, "ts": 0, "dur": 1e308, "args": {"step": 1}}, 5, None, "x"],
    [{"ph": "C", "pid": 1000, "name": "n0", "ts": 0, "args": {"Mbit/s": "fast"}}],
    [{"ph": "X", "cat": "step", "pid": 1, "ts": 0, "dur": 5, "args": {"step": 1}, "tid": 10**12}],
]


@pytest.mark.parametrize("events", TRACE_EVENTS)
def test_a_crafted_trace_draws_less_never_fails(tmp_path: Path, events: list) -> None:
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    (run / "trace.json").write_text(json.dumps({"traceEvents": events, "otherData": {"dilation": "x"}}))
    outcome = netbench("report", str(run))
    assert outcome.code == 0 and "Traceback" not in outcome.err, outcome.err


@pytest.mark.parametrize("text", [DEEP_JSON, '{"traceEvents": 5}', "[1]", '{"traceEvents": [' + LONG_INT + "]}"])
def test_an_unreadable_trace_is_one_note(tmp_path: Path, text: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    (run / "trace.json").write_text(text)
    outcome = netbench("report", str(run))
    assert outcome.code == 0 and "timeline: not drawn" in outcome.out + outcome.err, outcome.err


def test_a_sweep_reports_timeline_section_survives_a_crafted_trace(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    write_sweep(folder, [{"replicator": "full", "nodes": 2, "bw": "100mbit", "step": 0.5, "wire": 1e6}])
    (folder / "runs" / "r0" / "trace.json").write_text(DEEP_JSON)
    outcome = netbench("report", str(folder))
    assert outcome.code == 0, outcome.err
    assert "not drawn" in (folder / "report.md").read_text()


# ---- every limit before the work it bounds ----------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("argv", "name", "text", "needle"),
    [
        (["plan", "-r", "full", "--topology"], "t.toml", SITES.replace("nodes = 2", "nodes = 8000", 1) + WAN, "4096"),
        (["plan", "-r", "full", "--topology"], "t.toml", SITES.replace("nodes = 2", "nodes = 1000000000", 1), "4096"),
        (
            ["plan", "-r", "full", "--topology"],
            "t.toml",
            '[racks]\nracks = 100\nnodes_per_rack = 4000\nbw = "1gbit"\n',
            "a topology holds at most 4096",
        ),
        (
            ["sweep", "--dry-run", "--schedule"],
            "s.csv",
            ",".join(f"c{i}" for i in range(40_000)) + "\n",
            "40000 columns",
        ),
        (["sweep", "--dry-run", "--schedule"], "s.csv", "time_s,rate\n" + "1,10mbit\n" * 600_000, "600000 rows"),
        (["sweep", "--dry-run", "--schedule"], "s.mahi", "0\n999999999999\n", "past the longest schedule"),
        (
            ["sweep", "--dry-run"],
            "sc.toml",
            "[grid]\nnodes = "
            + str(list(range(2, 65)))
            + "\nbw = "
            + json.dumps([f"{i + 10}mbit" for i in range(100)])
            + "\ndelay = "
            + json.dumps([f"{i}ms" for i in range(200)])
            + "\n",
            "a sweep runs at most 2000",
        ),
    ],
    ids=[
        "8000 nodes",
        "1e9 nodes",
        "400000 racked nodes",
        "40000 columns",
        "600000 rows",
        "a year of trace",
        "1e6 points",
    ],
)
def test_limits_are_checked_before_the_work_they_bound(
    tmp_path: Path, argv: list[str], name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    one_line(netbench(*argv, str(path)), needle)


def test_ten_thousand_points_are_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "sc.toml"
    path.write_text(
        "[grid]\nnodes = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\nbw = "
        + json.dumps([f"{i + 10}mbit" for i in range(1000)])
        + "\n"
    )
    one_line(netbench("sweep", str(path), "--dry-run"), "points; a sweep runs at most 2000")


@pytest.mark.parametrize("sites", ["50000", "129"])
def test_plan_refuses_more_sites_than_a_graph_holds(sites: str) -> None:
    one_line(
        netbench("plan", "--topology", "sites", "--sites", sites, "--nodes", sites, "--wan-bw", "100mbit"), "--sites"
    )


def test_reading_never_waits_on_a_fifo_planted_as_a_trace(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    os.mkfifo(run / "trace.json")
    outcome = netbench("report", str(run))
    assert outcome.code == 0 and "FIFO" in outcome.out + outcome.err
    assert stat.S_ISFIFO(os.lstat(run / "trace.json").st_mode)


def test_the_reader_is_the_only_one() -> None:
    """Every module reads what others wrote through netbench.untrusted: the readers it replaced are gone."""
    package = REPO / "netbench"
    assert not (package / "small_files.py").exists()
    assert not hasattr(safe_files, "read_regular") and not hasattr(safe_files, "read_utf8")
    assert untrusted.TRACE.max_bytes and untrusted.SCHEDULE.max_bytes
