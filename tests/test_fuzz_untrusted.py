"""Every reader of what others wrote, fuzzed through the real entry point: topology, schedule (CSV, TOML, rate trace,
Mahimahi), scenario, shapes, calibration, a sweep folder, a run directory and its trace.json.

Each generated file mixes what its format knows (keys, columns, unit strings, numbers) with the classes of crafted
input netbench has to survive: nesting thousands deep, integers of thousands of digits, digits that are not ASCII
("²", "٣"), escape sequences and markup, counts far beyond every cap, bytes that are not text. Every case must end with
exit 0, 1 (compare's regression) or 2 and one line, never a traceback, never a terminal escape, never a hang, and
never a line of the secret file a crafted path may lead to. The counts scale with the hypothesis profile
(tests/conftest.py).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any

from conftest import examples
from fuzz_formats import toml
from hypothesis import given, settings
from hypothesis import strategies as st
from report_cli import Outcome, netbench

from netbench import untrusted
from netbench.model.calibration import Calibration
from netbench.reports import timeline

REPO = Path(__file__).resolve().parent.parent
STORED_RUN = next((REPO / "reports" / "target" / "runs").glob("*full*"))
RUN_JSON = json.loads((STORED_RUN / "run.json").read_text())
MARK = "pepper"  # in every crafted string: a message that shows it echoed the file

DEEP = ["[" * n + "]" * n for n in (33, 200, 5000)]
LONG_DIGITS = ["x = " + "9" * 5000, "9" * 5000, "0\n" + "9" * 5000 + "\n"]  # beyond what int() converts
HUGE_INTS = [10**19, -(10**19), 10**400, 10**4000]
CRAFTED_TEXT = [
    f"root:{MARK}:19000:0:99999:7:::",
    f"\x1b[31m{MARK}",
    f"\x1b]0;{MARK}\x07",
    f"[/]{MARK}[red]",
    f"\u202e{MARK}",
    "\u00b2",
    "\u0663",
    "03",
    "1e999",
    "nan",
    "-0",
    "9" * 30,
    "\u00b2mbit",
    "100mbit",
    "1gbit",
    "10gbit",
    "5ms",
    "0ms",
    "1%",
    "*",
    "n0",
    "n1",
    "site0--site1",
    "up",
    "down",
    "",
]


def crafted_scalars() -> st.SearchStrategy:
    return st.one_of(
        st.integers(-5, 70),
        st.integers(-(10**12), 10**12),
        st.sampled_from(HUGE_INTS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.sampled_from(CRAFTED_TEXT),
        st.text(string.printable, max_size=10),
    )


def tables(keys: list[str], depth: int = 2) -> st.SearchStrategy:
    names = st.one_of(st.sampled_from(keys), st.sampled_from(CRAFTED_TEXT))
    value = (
        crafted_scalars()
        if depth == 0
        else st.one_of(
            crafted_scalars(),
            st.lists(crafted_scalars(), max_size=5),
            tables(keys, depth - 1),
            st.lists(tables(keys, depth - 1), max_size=3),
        )
    )
    return st.dictionaries(names, value, max_size=6)


def as_json(data: Any) -> str:
    return json.dumps(data, allow_nan=True)


def files(structured: st.SearchStrategy, render, raw: list[str]) -> st.SearchStrategy:
    """File contents: the format rendered from ``structured``, a crafted text of ``raw``, or bytes that are not text."""
    crafted = st.builds(lambda text, v: text.replace("V", str(v)), st.sampled_from(raw), st.sampled_from(HUGE_INTS))
    return st.one_of(
        structured.map(lambda t: render(t).encode()),
        structured.map(lambda t: render(t).encode()),
        crafted.map(str.encode),
        st.sampled_from(DEEP + LONG_DIGITS).map(str.encode),
        st.binary(max_size=64),
    )


def ended_well(outcome: Outcome, codes: tuple[int, ...] = (0, 2)) -> None:
    """Exit 0 (or another allowed code) or 2 with one line; no traceback, no escape sequence, no echoed secret."""
    text = outcome.out + outcome.err
    assert outcome.code in codes, (outcome.code, outcome.err[-2000:])
    assert "Traceback" not in text and "\x1b" not in text and "\x07" not in text, outcome.err[-2000:]
    assert MARK not in outcome.err, outcome.err
    if outcome.code == 2:
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("netbench: error: "), outcome.err


def through_cli(data: bytes, name: str, *argv: str) -> None:
    """``data`` written as ``name`` in a fresh folder, ``netbench ARGV`` run with FILE standing for it: it must end
    well (:func:`ended_well`); the folder is removed."""
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    path = folder / name
    path.write_bytes(data)
    try:
        ended_well(netbench(*(str(path) if a == "FILE" else a for a in argv)))
    finally:
        shutil.rmtree(folder)


# ---- topology ---------------------------------------------------------------------------------------------------

TOPOLOGY_KEYS = ["sites", "wan", "nodes", "racks", "name", "lan_bw", "lan_delay", "between", "bw", "delay", "jitter"]
TOPOLOGY_KEYS += ["loss", "reverse", "compute_scale", "up", "down", "nodes_per_rack", "oversubscription", "0", "1", "3"]
TOPOLOGY_RAW = [
    '[[sites]]\nname = "a"\nnodes = V\nlan_bw = "1gbit"\n[[sites]]\nname = "b"\nnodes = 2\nlan_bw = "1gbit"\n'
    '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n',
    '[racks]\nracks = V\nnodes_per_rack = 2\nbw = "1gbit"\n',
    '[racks]\nracks = 2\nnodes_per_rack = 2\nbw = "1gbit"\n[nodes."\u00b2"]\ndelay = "5ms"\n',
    '[racks]\nracks = 2\nnodes_per_rack = 2\nbw = "1gbit"\n[nodes.1]\ndelay = "5ms"\n',
    "a = " + "[" * 40 + "]" * 40,
]


@settings(max_examples=examples(600))
@given(data=files(tables(TOPOLOGY_KEYS, depth=3), toml, TOPOLOGY_RAW))
def test_topology_files(data: bytes) -> None:
    through_cli(data, "topology.toml", "plan", "-r", "full", "--topology", "FILE")


# ---- schedules: CSV, TOML, rate trace, Mahimahi ------------------------------------------------------------------

SCHEDULE_COLUMNS = ["time_s", "link", "rate", "delay", "jitter", "loss", "state", "compute_scale", "time", "x"]


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def schedule_csvs(columns: list[str]) -> st.SearchStrategy:
    cell = st.one_of(st.sampled_from(CRAFTED_TEXT), st.integers(-3, 10**6), st.floats(allow_nan=True))
    return st.builds(
        csv_text,
        st.lists(st.sampled_from(columns), min_size=1, max_size=8),
        st.lists(st.lists(cell, max_size=9), max_size=8),
    )


def mahimahi() -> st.SearchStrategy:
    stamps = st.lists(st.integers(0, 10**6), max_size=60)
    line = st.one_of(st.integers(0, 10**13).map(str), st.sampled_from(CRAFTED_TEXT))
    return st.one_of(
        stamps.map(lambda s: "\n".join(map(str, sorted(s))) + "\n"),
        stamps.map(lambda s: "\n".join(map(str, s)) + "\n"),
        st.lists(line, min_size=1, max_size=20).map(lambda s: "\n".join(["0", *s]) + "\n"),
    )


def schedule_tomls() -> st.SearchStrategy:
    change = st.dictionaries(st.sampled_from(SCHEDULE_COLUMNS), crafted_scalars(), max_size=5)
    return st.one_of(
        st.lists(change, max_size=6).map(lambda cs: "".join("[[change]]\n" + toml(c) for c in cs)),
        tables(["change", *SCHEDULE_COLUMNS]).map(toml),
    )


SCHEDULE_RAW = [
    "time_s,link,rate\n0,*,Vmbit\n",
    "time_s,rate\n0,10mbit\nV,20mbit\n",
    ",,,\n,,\n",
    "0\nV\n",
    "\u00b2\n",
    "time_s," + ",".join(f"c{i}" for i in range(40)) + "\n",
]


@settings(max_examples=examples(800))
@given(
    form=st.sampled_from(["schedule.csv", "trace.csv", "trace.mahi", "schedule.toml"]),
    data=st.data(),
)
def test_schedule_files_in_all_four_forms(form: str, data: st.DataObject) -> None:
    structured = {
        "schedule.csv": schedule_csvs(SCHEDULE_COLUMNS),
        "trace.csv": schedule_csvs(["time_s", "time", "rate", "delay", "link"]),
        "trace.mahi": mahimahi(),
        "schedule.toml": schedule_tomls(),
    }[form]
    content = data.draw(files(structured, str, SCHEDULE_RAW))
    through_cli(content, form, "sweep", "--dry-run", "-r", "full", "--bw", "100mbit", "--schedule", "FILE")


# ---- scenario -----------------------------------------------------------------------------------------------------

SCENARIO_KEYS = ["name", "grid", "more", "points", "steps", "warmup", "timeout_s", "workload", "replicator", "tcp"]
SCENARIO_KEYS += ["schedule", "bw", "nodes", "delay", "topology", "sites", "racks", "kind", "shapes", "rank_order"]
SCENARIO_RAW = [
    '[grid]\nnodes = [2, 3]\nbw = ["10mbit"]\nreplicator = ["full"]\nsteps = V\n',
    '[workload]\nkind = "python:os:abort"\n',
    '[workload]\nkind = "shapes"\nshapes = "/dev/zero"\n',
    '[workload]\nkind = "transformer"\nd_model = 8\nn_layers = V\nn_heads = 1\n',
    'schedule = "/etc/shadow"\n',
    "[grid]\nbw = [" + ", ".join(f'"{i + 10}mbit"' for i in range(300)) + "]\nnodes = [2, 3, 4, 5, 6, 7, 8]\n",
]


@settings(max_examples=examples(500))
@given(data=files(tables(SCENARIO_KEYS, depth=3), toml, SCENARIO_RAW))
def test_scenario_files(data: bytes) -> None:
    through_cli(data, "scenario.toml", "sweep", "FILE", "--dry-run")


# ---- shapes and calibration ---------------------------------------------------------------------------------------

SHAPES_RAW = ['{"shapes": {"w": [V]}}', '{"shapes": {"w": [2, 2]}, "b": ' + "[" * 50 + "]" * 50 + "}", "[[V, 4]]"]


@settings(max_examples=examples(400))
@given(
    data=files(
        st.one_of(
            tables(["shapes", "w", "b", "p0"]),
            st.lists(st.lists(st.one_of(st.integers(-3, 10**13), st.sampled_from(HUGE_INTS)), max_size=20), max_size=5),
        ),
        as_json,
        SHAPES_RAW,
    )
)
def test_shapes_files(data: bytes) -> None:
    through_cli(data, "shapes.json", "plan", "-r", "full", "--nodes", "2", "--shapes", "FILE")


CALIBRATION_KEYS = list(Calibration.model_fields) + ["x"]
CALIBRATION_RAW = ['{"version": V}', '{"host": "\\u001b]0;pepper\\u0007"}', '{"software_overhead_s": V}']


@settings(max_examples=examples(300))
@given(data=files(tables(CALIBRATION_KEYS), as_json, CALIBRATION_RAW))
def test_calibration_files(data: bytes) -> None:
    through_cli(data, "calibration.json", "plan", "-r", "full", "--nodes", "2", "--calibration", "FILE")


# ---- a run directory and its trace --------------------------------------------------------------------------------


def mutated(doc: Any, path: list[Any], value: Any) -> Any:
    """``doc`` with the field at ``path`` (as far as it exists) replaced by ``value``."""
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        if isinstance(node, dict) and key in node and isinstance(node[key], (dict, list)):
            node = node[key]
        else:
            break
    if isinstance(node, dict):
        node[path[-1]] = value
    return out


RUN_FIELDS = [["summary", k] for k in RUN_JSON["summary"]] + [["config", k] for k in RUN_JSON["config"]]
RUN_FIELDS += [[k] for k in RUN_JSON] + [["config", "workload", "kind"], ["summary", "fidelity", "reasons"]]


@settings(max_examples=examples(400))
@given(
    fields=st.lists(st.sampled_from(RUN_FIELDS), min_size=1, max_size=3),
    values=st.lists(
        st.one_of(crafted_scalars(), st.lists(crafted_scalars(), max_size=3), tables(["a"], 1)), min_size=3
    ),
)
def test_run_directories(fields: list[list[str]], values: list[Any]) -> None:
    doc = RUN_JSON
    for field, value in zip(fields, values):
        doc = mutated(doc, field, value)
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    run = folder / "run"
    shutil.copytree(STORED_RUN, run)
    (run / "run.json").write_text(json.dumps(doc, allow_nan=True, default=str))
    ended_well(netbench("report", str(run)))
    shutil.rmtree(folder)


def trace_events() -> st.SearchStrategy:
    number = st.one_of(
        st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(HUGE_INTS)
    )
    anything = st.one_of(number, st.sampled_from(CRAFTED_TEXT), st.none(), st.booleans(), st.lists(number, max_size=2))
    event = st.fixed_dictionaries(
        {},
        optional={
            "ph": st.sampled_from(["X", "C", "M", "B", 5]),
            "cat": st.one_of(st.just("step"), anything),
            "name": st.one_of(st.sampled_from(["compute", "communicate", "n0 (Mbit/s)"]), anything),
            "pid": st.one_of(st.sampled_from([1, 2, 1000, 3000]), anything),
            "tid": st.one_of(st.sampled_from([1, 2, 3]), anything),
            "ts": number,
            "dur": number,
            "args": st.one_of(
                st.fixed_dictionaries(
                    {}, optional={"step": st.one_of(st.integers(0, 3), anything), "warmup": anything, "Mbit/s": number}
                ),
                anything,
            ),
        },
    )
    return st.lists(st.one_of(event, anything), max_size=40)


@settings(max_examples=examples(1000))
@given(
    events=trace_events(), dilation=st.one_of(st.floats(allow_nan=True), st.sampled_from(["x", None, 0, -1, 10**30]))
)
def test_trace_events_are_kept_only_where_usable(events: list[Any], dilation: Any) -> None:
    """The timeline's reading of a trace, without drawing: every event either usable and typed, or dropped (a trace
    past the reader's caps is one BadInput)."""
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    (folder / "trace.json").write_text(json.dumps({"traceEvents": events, "otherData": {"dilation": dilation}}))
    try:
        doc = timeline.load_trace(folder)
    except untrusted.BadInput as exc:
        assert "\n" not in str(exc)
        shutil.rmtree(folder)
        return
    assert doc is not None and 0 < doc["dilation"] <= timeline.MAX_DILATION
    usable = doc["events"]
    for title, step in timeline.median_and_slowest(usable):
        ranks = {e["pid"] for e in usable if e["ph"] == "X"}
        assert title and isinstance(step, int) and ranks
        steps = [e for e in usable if e["cat"] == "step" and e["args"]["step"] == step]
        t0 = min(e["ts"] for e in steps)
        t1 = max(e["ts"] + e["dur"] for e in steps)
        assert math.isfinite(t1 - t0)
        timeline.step_rows(usable, step, t0, t1)  # the rows a panel draws, without drawing them
        timeline.link_samples(usable, t0, t1)
    shutil.rmtree(folder)


@settings(max_examples=examples(12))
@given(events=trace_events())
def test_report_run_dir_draws_a_crafted_trace_or_says_why_not(events: list[Any]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    run = folder / "run"
    shutil.copytree(STORED_RUN, run)
    steps = [
        {"ph": "X", "cat": "step", "pid": 1 + r, "ts": s * 1000, "dur": 900, "tid": 1, "args": {"step": s}}
        for s in range(3)
        for r in range(2)
    ]
    (run / "trace.json").write_text(json.dumps({"traceEvents": steps + events}, allow_nan=True))
    ended_well(netbench("report", str(run)))
    shutil.rmtree(folder)


# ---- nccl-tests logs and their fits --------------------------------------------------------------------------------

NCCL_LOG = (REPO / "tests" / "fixtures" / "nccl_tests" / "nccl-issue450-4x8-v100-socket-all_reduce.txt").read_text()
NCCL_ROW = "{size} {count} float sum {time} {algbw} {busbw} 1e-06 {time} {algbw} {busbw} 1e-06"


def nccl_logs() -> st.SearchStrategy:
    """nccl-tests tables whose rows carry crafted sizes, times and bandwidths, the published log cut or doubled."""
    cell = st.one_of(crafted_scalars().map(str), st.sampled_from(["8388608", "-1", "0", "1e309", "N/A"]))
    row = st.builds(NCCL_ROW.format, size=cell, count=cell, time=cell, algbw=cell, busbw=cell)
    header = NCCL_LOG[: NCCL_LOG.index("     8388608")]
    return st.one_of(
        st.lists(row, max_size=12).map(lambda rows: header + "\n".join(rows) + "\n"),
        st.integers(0, len(NCCL_LOG)).map(lambda n: NCCL_LOG[:n]),
        st.just(NCCL_LOG * 2),
    )


@settings(max_examples=examples(300))
@given(data=st.one_of(nccl_logs().map(str.encode), files(st.just({}), as_json, ["V"])))
def test_nccl_tests_logs(data: bytes) -> None:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    (folder / "log.txt").write_bytes(data)
    try:
        ended_well(
            netbench("calibrate", "--from-nccl-tests", str(folder / "log.txt"), "--out", str(folder / "fit.json"))
        )
    finally:
        shutil.rmtree(folder)


NCCL_FIT_KEYS = ["collective", "segments", "upto_bytes", "latency_s", "bus_Bps", "ranks", "nodes", "regimes", "x"]


@settings(max_examples=examples(200))
@given(data=files(tables(NCCL_FIT_KEYS, depth=3), as_json, ['{"segments": V}', '{"ranks": V}']))
def test_nccl_calibration_files(data: bytes) -> None:
    through_cli(
        data, "fit.json", "plan", "-r", "full", "--nodes", "2", "--backend", "nccl", "--nccl-calibration", "FILE"
    )
