"""netbench compare as a CI gate run as root: a broken CURRENT sweep fails it, crafted folders end in one line.

Each case runs the real entry point (:func:`netbench.cli.app.main`) in this process; the cases that
could hang (a FIFO where a file should be) run the console script in a child with a time limit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from synthetic_sweep import grid, write_sweep

from netbench.cli.app import main

REPO = Path(__file__).resolve().parent.parent
CI_REPORT = REPO / "reports" / "ci"


def run_compare(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``netbench compare ARGS`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["compare", *args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert "Traceback" not in err and all(n in err for n in needles), err


def with_grid(folder: Path, reps=("full", "dct"), rates=("10mbit", "100mbit")) -> Path:
    """Record in sweep.json the grid the synthetic sweep ran (as a real sweep does)."""
    doc = json.loads((folder / "sweep.json").read_text())
    doc["scenario"]["grid"] = {"bw": list(rates), "replicator": list(reps), "nodes": [2], "delay": ["0ms"]}
    (folder / "sweep.json").write_text(json.dumps(doc))
    return folder


def edit_summary(folder: Path, edit) -> Path:
    frame = pd.read_csv(folder / "summary.csv")
    frame = edit(frame)
    frame.to_csv(folder / "summary.csv", index=False)
    return folder


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    base = with_grid(write_sweep(tmp_path / "base", grid()))
    cur = tmp_path / "cur"
    shutil.copytree(base, cur)
    return base, cur


# ---- a broken CURRENT sweep fails the gate -------------------------------------------------------------------------


def test_the_committed_ci_sweep_holds_its_grid_and_passes_against_itself(tmp_path) -> None:
    copy = tmp_path / "ci"
    shutil.copytree(CI_REPORT, copy)
    code, out, err = run_compare(str(CI_REPORT), str(copy))
    assert code == 0 and out.strip().splitlines()[-1] == "no regression over 20 matched points", (out, err)


def test_a_current_sweep_holding_one_of_twenty_points_fails(tmp_path) -> None:
    copy = edit_summary(shutil.copytree(CI_REPORT, tmp_path / "ci"), lambda f: f.iloc[:1])
    code, out, _ = run_compare(str(CI_REPORT), str(copy))
    lines = out.strip().splitlines()
    assert code == 1
    assert sum(line.startswith("missing: ") for line in lines) == 19
    assert "missing: dct 2n 10mbit 0ms: CURRENT's grid asks for it, CURRENT has no row" in lines
    assert lines[-1] == "FAIL: 19 missing (1 points matched)"


def test_an_empty_current_sweep_fails_rather_than_skipping(tmp_path) -> None:
    copy = edit_summary(shutil.copytree(CI_REPORT, tmp_path / "ci"), lambda f: f.iloc[:0])
    code, out, _ = run_compare(str(CI_REPORT), str(copy))
    assert code == 1 and out.strip().splitlines()[-1].startswith("FAIL: 20 missing")
    (copy / "sweep.json").unlink()  # no grid recorded: every BASELINE point is expected
    code, out, _ = run_compare(str(CI_REPORT), str(copy))
    assert code == 1 and "missing: full 2n 10mbit 0ms: in BASELINE, not in CURRENT" in out


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "-1.0"])
def test_a_non_finite_step_time_everywhere_fails(tmp_path, value: str) -> None:
    copy = edit_summary(shutil.copytree(CI_REPORT, tmp_path / "ci"), lambda f: f.assign(step_time_s=float(value)))
    code, out, _ = run_compare(str(CI_REPORT), str(copy), "--time-advisory")
    lines = out.strip().splitlines()
    assert code == 1 and sum(line.startswith("not finite: ") for line in lines) == 20, out
    assert any(line.startswith("not finite: full 2n 10mbit 0ms: CURRENT step time is ") for line in lines)
    assert lines[-1] == "FAIL: 20 not finite (20 points matched)"


def test_non_finite_bytes_on_either_side_and_in_steps_fail(pair) -> None:
    base, cur = pair
    edit_summary(cur, lambda f: f.assign(wire_tx_bytes_per_step=[float("inf"), 1.0, 1.0, 1.0]))
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and "not finite: full 2n 10mbit 0ms: CURRENT wire bytes is inf" in out
    code, out, _ = run_compare(str(cur), str(base))
    assert code == 1 and "not finite: full 2n 10mbit 0ms: BASELINE wire bytes is inf" in out
    steps = pd.read_csv(base / "runs" / "r1" / "steps.csv").assign(step_s=float("inf"))
    steps.to_csv(cur / "runs" / "r1" / "steps.csv", index=False)
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and "not finite: dct 2n 10mbit 0ms: CURRENT steps.csv step times are not all finite numbers" in out


def test_a_failed_point_in_current_fails_wherever_it_is(pair) -> None:
    base, cur = pair
    extra = {
        "key": "kx",
        "label": "random 2n 10mbit 0ms",
        "replicator": "random",
        "nodes": 2,
        "bw": "10mbit",
        "bw_bps": 1e7,
        "delay": "0ms",
        "delay_ms": 0.0,
        "status": "failed",
        "reason": "worker 1 exited 1",
    }
    edit_summary(cur, lambda f: pd.concat([f, pd.DataFrame([extra])], ignore_index=True))
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and "failed: random 2n 10mbit 0ms: CURRENT status failed: worker 1 exited 1" in out
    assert out.strip().splitlines()[-1] == "FAIL: 1 failed (4 points matched)"
    # a failed row beside an ok one for the same point (a stale row) still fails
    edit_summary(
        cur, lambda f: pd.concat([f.iloc[:4], f.iloc[:1].assign(key="stale", status="failed")], ignore_index=True)
    )
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and "failed: full 2n 10mbit 0ms: CURRENT status failed" in out


def test_a_grid_change_is_told_apart_from_a_missing_point(pair, tmp_path) -> None:
    base, cur = pair
    # CURRENT was asked for fewer points and holds them all: the rest are not compared, not missing
    edit_summary(with_grid(cur, reps=("full",)), lambda f: f[f["replicator"] == "full"])
    code, out, _ = run_compare(str(base), str(cur))
    assert (
        code == 0
        and "missing" not in out
        and "unmatched (not compared): 2 (dct 2n 10mbit 0ms, dct 2n 100mbit 0ms)" in out
    )
    # its grid still asks for dct: the same rows are a broken sweep
    with_grid(cur)
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and out.strip().splitlines()[-1] == "FAIL: 2 missing (2 points matched)"
    # grids that share no point: nothing comparable, exit 2 (CI skips the check)
    other = with_grid(write_sweep(tmp_path / "other", grid(rates=("1gbit",))), rates=("1gbit",))
    code, out, err = run_compare(str(base), str(other))
    one_line_error(code, out, err, "nothing to compare")
    # ... unless CURRENT is broken on its own
    edit_summary(other, lambda f: f.iloc[:1])
    code, out, _ = run_compare(str(base), str(other))
    assert code == 1 and "missing: dct 2n 1gbit 0ms" in out and "nothing to compare" in out.strip().splitlines()[-1]


def test_a_changed_workload_is_exit_2_unless_current_is_broken(pair, tmp_path) -> None:
    base, _ = pair
    other = with_grid(write_sweep(tmp_path / "t", grid(), kind="transformer"))
    code, out, err = run_compare(str(base), str(other))
    one_line_error(code, out, err, "workloads differ (kind 'shapes' -> 'transformer'")
    edit_summary(other, lambda f: f.assign(status=["ok", "ok", "ok", "failed"]))
    code, out, _ = run_compare(str(base), str(other))
    assert code == 1 and "failed: dct 2n 100mbit 0ms" in out


# ---- printed text is literal -----------------------------------------------------------------------------------------

EVIL = "full [/x] [bold red]x\x1b[2J\x07 | `code` <img src=x> *b* $m$"


def test_labels_with_markup_print_literally_on_terminal_json_and_markdown(pair, tmp_path) -> None:
    base, cur = pair
    edit_summary(base, lambda f: f.assign(label=[EVIL, "b", "c", "d"]))
    md = tmp_path / "m.md"
    code, out, err = run_compare(str(base), str(cur), "--markdown", str(md))
    assert code == 0 and err == "" and "\x1b" not in out and "\x07" not in out
    assert "full [/x] [bold red]x" in out  # rich shows the brackets, not a markup error
    text = md.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| full"))
    assert row.startswith(r"| full \[/x\] \[bold red\]x\[2J \| \`code\` \<img src=x\> \*b\* \$m\$ | ")
    assert row.count(" | ") == 9  # the label's pipe cannot add a column
    code, out, _ = run_compare(str(base), str(cur), "--json")
    assert code == 0 and json.loads(out)["points"][0]["label"].startswith("full [/x] [bold red]x[2J | `code`")


def test_failure_reasons_and_paths_are_one_literal_line(pair, tmp_path) -> None:
    base, cur = pair
    edit_summary(
        cur, lambda f: f.assign(status=["failed", "ok", "ok", "ok"], reason=["[/x]\nline two\x1b[31m", "", "", ""])
    )
    code, out, _ = run_compare(str(base), str(cur))
    assert code == 1 and "failed: full 2n 10mbit 0ms: CURRENT status failed: [/x] line two[31m" in out.splitlines()
    odd = tmp_path / "[/x]\x1b]0;t\x07"
    shutil.copytree(base, odd)
    code, out, err = run_compare(str(base), str(odd))
    assert code == 0 and "\x1b" not in out and "[/x]" in out


# ---- --markdown is never written through a link or into a stranger's folder ----------------------------------------


def test_markdown_replaces_a_planted_symlink_instead_of_writing_through_it(pair, tmp_path) -> None:
    base, cur = pair
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "summary.md"
    link.symlink_to(victim)
    code, _, err = run_compare(str(base), str(cur), "--markdown", str(link))
    assert code == 0, err
    assert victim.read_text() == "precious\n" and not link.is_symlink()
    assert link.read_text().startswith("## netbench compare: no regression")


def test_markdown_replaces_an_existing_step_summary_file(pair, tmp_path) -> None:
    base, cur = pair
    summary = tmp_path / "step_summary"
    summary.write_text("earlier text\n")
    code, _, _ = run_compare(str(base), str(cur), "--markdown", str(summary))
    assert code == 0 and summary.read_text().startswith("## netbench compare:") and "earlier" not in summary.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a folder to another user")
def test_markdown_into_a_folder_another_user_owns_is_refused(pair, tmp_path) -> None:
    base, cur = pair
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    os.chown(stranger, 65534, 65534)
    code, out, err = run_compare(str(base), str(cur), "--markdown", str(stranger / "m.md"))
    one_line_error(code, out, err, "--markdown", "owned by uid 65534")
    assert list(stranger.iterdir()) == []


def test_markdown_into_a_world_writable_folder_is_refused(pair, tmp_path) -> None:
    base, cur = pair
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code, out, err = run_compare(str(base), str(cur), "--markdown", str(shared / "m.md"))
    one_line_error(code, out, err, "--markdown", "writable by every user")
    assert list(shared.iterdir()) == []


# ---- crafted folders: one line, exit 2, no hang ---------------------------------------------------------------------


def _fifo_case(folder: Path, name: str) -> Path:
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    return folder


@pytest.mark.parametrize("name", ["summary.csv", "sweep.json", "runs/r0/steps.csv"])
def test_a_fifo_in_place_of_a_file_ends_in_one_line_not_a_hang(pair, name: str) -> None:
    base, cur = pair
    _fifo_case(cur, name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "compare", str(base), str(cur)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    one_line_error(done.returncode, done.stdout, done.stderr, "not a regular file")


def test_a_fifo_run_json_ends_in_one_line(tmp_path) -> None:
    run = _fifo_case(tmp_path / "run", "run.json")
    base = write_sweep(tmp_path / "base", grid())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "compare", str(base), str(run)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    one_line_error(done.returncode, done.stdout, done.stderr, "not a regular file")


CRAFTED = [
    ("summary.csv", b"replicator,nodes\n\xff\xfe,2\n", "not UTF-8"),
    ("summary.csv", b"", "empty"),
    ("summary.csv", b"a,b\n1,2\n", "not a sweep summary"),
    (
        "summary.csv",
        b"replicator,nodes,bw_bps,delay_ms,status,step_time_s,wire_tx_bytes_per_step\nfull,2,inf,0,ok,1,1\n",
        "bw_bps",
    ),
    (
        "summary.csv",
        b"replicator,nodes,bw_bps,delay_ms,status,step_time_s,wire_tx_bytes_per_step\nfull,two,1e7,0,ok,1,1\n",
        "nodes",
    ),
    (
        "summary.csv",
        b"replicator,nodes,bw_bps,delay_ms,status,step_time_s,wire_tx_bytes_per_step\nfull,1e400,1e7,0,ok,1,1\n",
        "nodes",
    ),
    (
        "summary.csv",
        b"replicator,nodes,bw_bps,delay_ms,status,step_time_s,wire_tx_bytes_per_step\n,2,1e7,0,ok,1,1\n",
        "replicator",
    ),
    ("summary.csv", b'replicator,nodes\n"unclosed,2\n', "CSV"),
    ("sweep.json", b"\xff{}", "not UTF-8"),
    ("sweep.json", b"{not json", "not valid JSON"),
    ("sweep.json", b"[1, 2]", "not a JSON object"),
    ("sweep.json", b'{"scenario": 5}', "scenario is not an object"),
    ("sweep.json", b'{"scenario": {"workload": "x"}}', "workload not readable"),
    ("sweep.json", b'{"scenario": {"workload": {"kind": 7}}}', "workload not readable"),
    ("sweep.json", b'{"scenario": {"grid": {"bw": 5}}}', "grid not readable"),
    ("sweep.json", b'{"scenario": {"grid": {"bw": ["fast"]}}}', "grid not readable"),
    ("sweep.json", b'{"scenario": {"grid": {}, "more": {"a": 1}}}', "grid not readable"),
    (
        "sweep.json",
        b'{"scenario": {"grid": {"bw": ["1mbit"], "nodes": '
        + json.dumps(list(range(2, 1000))).encode()
        + b', "delay": '
        + json.dumps([f"{i}ms" for i in range(200)]).encode()
        + b"}}}",
        "at most",
    ),
    ("sweep.json", b"[" * 100_000, "JSON"),
    ("runs/r0/steps.csv", b"step,rank,step_s\n\xff,0,1\n", "not UTF-8"),
]


@pytest.mark.parametrize(("name", "content", "needle"), CRAFTED, ids=[f"{n}:{c[:24]!r}" for n, c, _ in CRAFTED])
def test_crafted_files_end_in_one_line_and_exit_2(pair, name: str, content: bytes, needle: str) -> None:
    base, cur = pair
    (cur / name).write_bytes(content)
    code, out, err = run_compare(str(base), str(cur))
    one_line_error(code, out, err, needle)
    code, out, err = run_compare(str(cur), str(base))  # the same from the BASELINE side
    one_line_error(code, out, err, needle)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"summary": []},
        {"summary": {"replicator": "full"}},
        {"status": "ok"},
        {"summary": {"replicator": "full", "nodes": 2, "bw_bps": 1e7, "delay_ms": 0}, "config": {"workload": 3}},
    ],
)
def test_crafted_run_json_ends_in_one_line(tmp_path, doc) -> None:
    base = write_sweep(tmp_path / "base", grid())
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(doc))
    code, out, err = run_compare(str(base), str(run))
    one_line_error(code, out, err, "run.json")


def test_a_run_dir_outside_the_sweep_folder_is_not_read(pair, tmp_path) -> None:
    base, cur = pair
    elsewhere = tmp_path / "elsewhere"
    _fifo_case(elsewhere, "steps.csv")
    edit_summary(cur, lambda f: f.assign(run_dir=[str(elsewhere), "../elsewhere", "runs/r2", "runs/r3"]))
    code, out, err = run_compare(str(base), str(cur))
    assert code == 0, (out, err)
