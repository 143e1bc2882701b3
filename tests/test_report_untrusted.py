"""`netbench report` reads folders anyone may have written: it copies no file into the report, writes through no
planted link, and turns a damaged or crafted folder into one line and exit code 2 (never a traceback or a hang)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from report_cli import report
from rich.console import Console
from synthetic_sweep import grid, write_sweep

from netbench.rundir.sweepdir import run_path

SECRET = "netbench-test-secret-7f3a"


def sweep(tmp_path: Path, **kw) -> Path:
    return write_sweep(tmp_path / "sweep", grid(reps=("full",), rates=("10mbit",)), **kw)


def edit_summary(folder: Path, column: str, value, row: int = 0) -> None:
    frame = pd.read_csv(folder / "summary.csv")
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    frame.to_csv(folder / "summary.csv", index=False)


def edit_scenario(folder: Path, **values) -> None:
    doc = json.loads((folder / "sweep.json").read_text())
    doc["scenario"].update(values)
    (folder / "sweep.json").write_text(json.dumps(doc))


def run_dir(tmp_path: Path, **summary) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    base = {
        "run_id": "abc123",
        "replicator": "full",
        "nodes": 2,
        "delay_ms": 0.0,
        "status": "ok",
        "bw_bps": 1e8,
        "step_time_s": 0.5,
        "fidelity": {"ok": True, "reasons": [], "dilation": 1.0},
    }
    doc = {"status": summary.get("status", "ok"), "reason": summary.pop("reason", None), "summary": {**base, **summary}}
    (folder / "run.json").write_text(json.dumps(doc))
    return folder


# --------------------------------------------------------------- nothing copied into the report


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the sweep folder that the report must never carry, and a PNG beside it."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET + "\n")
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n" + SECRET.encode())
    return path


@pytest.mark.parametrize(
    "text",
    [
        "![e]({secret})",
        "![e](../secret.png)",
        "![e](/etc/hostname)",
        '<img src="{secret}">',
        "[link](../secret.txt)",
        "$\\undefined{x}$ 100$",
    ],
)
@pytest.mark.parametrize("where", ["description", "label", "reason"])
def test_no_text_of_the_folder_makes_the_report_inline_a_file(
    tmp_path: Path, secret: Path, text: str, where: str
) -> None:
    folder = write_sweep(tmp_path / "sweep", grid(reps=("full",), rates=("10mbit", "100mbit")))
    text = text.replace("{secret}", str(secret))
    if where == "description":
        edit_scenario(folder, description=text)
    elif where == "label":
        edit_summary(folder, "label", text)
    else:
        edit_summary(folder, "status", "failed", row=1)
        edit_summary(folder, "reason", text, row=1)
    done = report(str(folder))
    assert done.code == 0, done.err
    page = (folder / "report.html").read_text()
    images = re.findall(r'<img src="([^"]*)"', page)
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (folder / "report.md").read_text())
    assert len(images) == len(figures) >= 3 and all(src.startswith("data:image/png;base64,") for src in images)
    assert base64.b64encode(secret.read_bytes()).decode() not in page
    assert base64.b64encode((tmp_path / "secret.png").read_bytes()).decode() not in page
    assert (
        base64.b64encode(Path("/etc/hostname").read_bytes()).decode() not in page
        if Path("/etc/hostname").exists()
        else True
    )
    assert (
        "<img" not in page.replace('<img src="data:image/png', "")
        and text.split("(")[0].replace("<", "&lt;")[:6] in page
    )


def test_markdown_escaping_renders_the_text_as_written() -> None:
    from markdown_it import MarkdownIt

    from netbench.reports.escape import for_markdown

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    for text in ["![e](/etc/hostname)", "a | b", "# head", "1. x", "- x", "*b* _i_ `c`", "<b>x</b>", "&amp;", "a\\b"]:
        assert (
            md.render(for_markdown(text)).strip()
            == "<p>" + text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</p>"
        )


def test_run_path_stays_inside_the_sweep_folder(tmp_path: Path) -> None:
    (tmp_path / "sweep" / "runs" / "r0").mkdir(parents=True)
    (tmp_path / "sweep" / "runs" / "out").symlink_to(tmp_path)
    folder = tmp_path / "sweep"
    assert run_path(folder, "runs/r0") == folder / "runs" / "r0"
    assert [run_path(folder, p) for p in ("../sweep/runs/r0", str(tmp_path), "/etc", "runs/out", "", None, 5)] == [
        None
    ] * 7


# --------------------------------------------------------------- nothing written through a link


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


@pytest.mark.parametrize("name", ["report.html", "report.md", "time_vs_bandwidth.png", "step_breakdown.png"])
def test_report_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path, victim: Path, name: str) -> None:
    folder = sweep(tmp_path)
    (folder / name).symlink_to(victim)
    assert report(str(folder)).code == 0
    assert (
        victim.read_text() == "precious\n" and not (folder / name).is_symlink() and (folder / name).stat().st_size > 100
    )


def test_the_sweep_calibration_writes_shapes_json_under_a_fresh_name(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import netbench.calibrate.measure as measure_module
    from netbench.orchestrator.sweep.calibration import sweep_calibration
    from netbench.orchestrator.sweep.scenario import scenario_from_dict

    class Stop(Exception):
        pass

    def stop(options, fork=None):
        raise Stop(options.shapes)

    monkeypatch.setattr(measure_module, "measure", stop)
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "shapes.json").symlink_to(victim)
    scenario = scenario_from_dict({"calibrate": True, "grid": {"bw": ["100mbit"]}, "workload": {"kind": "mlp"}}, "", {})
    with pytest.raises(Stop):
        sweep_calibration(scenario, out, None, fresh=True)
    assert victim.read_text() == "precious\n" and not (out / "shapes.json").is_symlink()
    assert json.loads((out / "shapes.json").read_text())["shapes"]


# --------------------------------------------------------------- damaged or crafted folders: one line, exit 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sweep.json", "summary.csv"])
def test_a_fifo_in_a_sweep_folder_is_refused_without_waiting(tmp_path: Path, name: str) -> None:
    folder = sweep(tmp_path)
    (folder / name).unlink()
    os.mkfifo(folder / name)
    line = report(str(folder)).error_line
    assert "FIFO" in line if name == "sweep.json" else "summary.csv" in line


@pytest.mark.timeout(60)
def test_a_fifo_as_run_json_or_steps_csv_never_blocks(tmp_path: Path) -> None:
    folder = run_dir(tmp_path)
    (folder / "run.json").unlink()
    os.mkfifo(folder / "run.json")
    assert "FIFO" in report(str(folder)).error_line
    swept = sweep(tmp_path)
    (swept / "runs" / "r0" / "steps.csv").unlink()
    os.mkfifo(swept / "runs" / "r0" / "steps.csv")
    assert "FIFO" in report(str(swept)).error_line  # refused, as compare refuses it: one verdict per file


@pytest.mark.parametrize("name", ["sweep.json", "summary.csv"])
def test_a_linked_input_file_is_refused(tmp_path: Path, secret: Path, name: str) -> None:
    folder = sweep(tmp_path)
    (folder / name).unlink()
    (folder / name).symlink_to(secret)
    assert "symbolic link" in report(str(folder)).error_line


@pytest.mark.parametrize("name", ["sweep.json", "summary.csv", "run.json"])
def test_text_that_is_not_utf8_is_one_line(tmp_path: Path, name: str) -> None:
    folder = run_dir(tmp_path) if name == "run.json" else sweep(tmp_path)
    path = folder / name
    path.write_bytes(path.read_bytes().replace(b"shapes" if name == "sweep.json" else b"full", b"sh\xff", 1))
    line = report(str(folder)).error_line
    assert name in line and "UTF-8" in line


SWEEP_DOCS = [
    ({"scenario": {"description": 5}}, "scenario.description"),
    ({"scenario": {"grid": {"bw": "10mbit"}}}, "scenario.grid.bw"),
    ({"scenario": {"workload": {"compute_ms": "fast"}}}, "scenario.workload.compute_ms"),
    ({"scenario": []}, "scenario"),
    ({"scenario": {}, "calibration": "x"}, "calibration"),
    ({"scenario": {}, "calibration": {"software_overhead_s": "x"}}, "software_overhead_s"),
    ([1, 2], "JSON object"),
    ('{"scenario": ' * 100_000, "JSON"),
]


@pytest.mark.parametrize("doc, field", SWEEP_DOCS, ids=[f for _, f in SWEEP_DOCS])
def test_sweep_json_of_the_wrong_types_is_one_line(tmp_path: Path, doc, field: str) -> None:
    folder = sweep(tmp_path)
    (folder / "sweep.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    line = report(str(folder)).error_line
    assert "sweep.json" in line and field in line, line


SUMMARY_EDITS = [
    ("drop", "label", "'label'"),
    ("drop", "status", "'status'"),
    ("drop", "nodes", "'nodes'"),
    ("set", ("nodes", "two"), "'nodes'"),
    ("set", ("nodes", 1e9), "'nodes'"),
    ("set", ("nodes", 2.5), "'nodes'"),
    ("set", ("bw_bps", 0), "'bw_bps'"),
    ("set", ("bw_bps", "inf"), "'bw_bps'"),
    ("set", ("delay_ms", -5), "'delay_ms'"),
    ("set", ("step_time_s", "[/]"), "'step_time_s'"),
    ("set", ("step_time_s", 0), "'step_time_s'"),
    ("set", ("wire_tx_bytes_per_step", 1e300), "'wire_tx_bytes_per_step'"),
    ("set", ("pred_step_time_s", -1), "'pred_step_time_s'"),
    ("text", "", "empty"),
    ("text", 'a,b\n"unclosed\n', "summary.csv"),
]


@pytest.mark.parametrize("how, what, expected", SUMMARY_EDITS, ids=[f"{h}-{w}" for h, w, _ in SUMMARY_EDITS])
def test_a_summary_without_its_columns_or_numbers_is_one_line(tmp_path: Path, how: str, what, expected: str) -> None:
    folder = sweep(tmp_path)
    if how == "drop":
        pd.read_csv(folder / "summary.csv").drop(columns=[what]).to_csv(folder / "summary.csv", index=False)
    elif how == "set":
        edit_summary(folder, *what)
    else:
        (folder / "summary.csv").write_text(what)
    line = report(str(folder)).error_line
    assert "summary.csv" in line and expected in line, line


RUN_DOCS = [
    ({"summary": {"nodes": "two"}}, "summary.nodes"),
    ({"summary": {"run_id": None}}, "summary.run_id"),
    ({"summary": {"fidelity": {"ok": True, "reasons": 5}}}, "summary.fidelity.reasons"),
    ({"summary": {"step_time_s": "slow"}}, "summary.step_time_s"),
    ({"summary": {"predicted": []}}, "summary.predicted"),
    ({"summary": 3}, "summary"),
    ({"exec": {"nodes": [{"rank": "x"}], "command": ["true"]}}, "exec.nodes[0].rank"),
]


@pytest.mark.parametrize("change, field", RUN_DOCS, ids=[f for _, f in RUN_DOCS])
def test_run_json_of_the_wrong_types_is_one_line(tmp_path: Path, change: dict, field: str) -> None:
    folder = run_dir(tmp_path)
    doc = json.loads((folder / "run.json").read_text())
    for key, value in change.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and isinstance(doc.get(key), dict) else value
    (folder / "run.json").write_text(json.dumps(doc))
    line = report(str(folder)).error_line
    assert "run.json" in line and field in line, line
    assert "two" not in line and "slow" not in line  # names the field, never echoes what it held


# --------------------------------------------------------------- texts reach the terminal as text

HOSTILE = "[/x] [red]red[/red] \x1b[2J\x1b]0;title\x07 \u202eevil \r\n second"


def test_markup_and_escapes_in_a_runs_reason_print_as_text(tmp_path: Path) -> None:
    folder = run_dir(
        tmp_path,
        status="failed",
        reason=HOSTILE,
        fidelity={"ok": False, "reasons": [HOSTILE], "dilation": 1.0},
        replicator=HOSTILE,
    )
    done = report(str(folder))
    assert done.code == 0, done.err
    shown = done.out + done.err
    assert (
        "[/x]" in shown
        and "[red]red[/red]" in shown
        and "\x1b" not in shown
        and "\u202e" not in shown
        and "\x07" not in shown
    )


def test_markup_and_escapes_in_a_sweeps_labels_print_as_text(tmp_path: Path) -> None:
    folder = write_sweep(tmp_path / "sweep", grid(reps=("full",), rates=("10mbit", "100mbit")))
    edit_summary(folder, "label", HOSTILE)  # the worst point's label is printed
    edit_summary(folder, "status", "failed", row=1)
    edit_summary(folder, "reason", HOSTILE, row=1)
    done = report(str(folder))
    assert done.code == 0, done.err
    assert "[/x]" in done.out and "\x1b" not in done.out + done.err
    text = (folder / "report.md").read_text()
    assert "\x1b" not in text and "\u202e" not in text and "\\[/x\\]" in text


def test_the_worker_failure_line_prints_markup_as_text() -> None:
    from netbench.reports.escape import for_terminal

    console = Console(record=True, width=200, file=open(os.devnull, "w"))
    reason = "worker 1: KeyError: [/x] \x1b[31m"
    console.print(f"[red]run failed:[/] {for_terminal(reason)}")
    assert "run failed: worker 1: KeyError: [/x] [31m" in console.export_text()
