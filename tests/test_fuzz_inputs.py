"""Files users hand netbench (scenario, topology, shapes and calibration files), fuzzed: every one either loads or is
one line of the reader's own error; never a traceback, never a hang.

The generators mix the keys each format knows with values of every TOML/JSON type (numbers out of range, nan and
inf, unit strings, nested tables) and raw bytes that are not text at all. A second test takes a sample of the same
files through the command line (`plan`), where each must end with exit 0 or exit 2 and one line.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from fuzz_formats import toml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbench.cli.app import main
from netbench.model.calibration import CalibrationError, read_calibration
from netbench.orchestrator.sweep.scenario import ScenarioError, load_scenario
from netbench.shapes import ShapeError, resolve_shapes
from netbench.topology import TopologyError, load_topology

SCENARIO_KEYS = [
    "name",
    "description",
    "grid",
    "more",
    "steps",
    "warmup",
    "timeout_s",
    "capture",
    "threads",
    "workload",
    "replicator",
    "tcp",
    "bw",
    "nodes",
    "delay",
    "topology",
    "x",
]
GRID_KEYS = ["bw", "replicator", "nodes", "delay", "gpus_per_node", "intra_bw", "topology", "wan_bw", "wan_delay", "y"]
TOPOLOGY_KEYS = [
    "sites",
    "wan",
    "nodes",
    "racks",
    "name",
    "lan_bw",
    "lan_delay",
    "between",
    "bw",
    "delay",
    "jitter",
    "loss",
    "reverse",
    "compute_scale",
    "up",
    "down",
    "nodes_per_rack",
    "oversubscription",
    "0",
    "1",
    "3",
    "z",
]
CALIBRATION_KEYS = ["version", "acks_per_segment", "overhead_s", "codec", "host", "schema", "encode", "decode", "w"]
UNITS = [
    "100mbit",
    "1gbit",
    "10gbit",
    "99gbit",
    "5kbit",
    "0ms",
    "20ms",
    "-5ms",
    "2s",
    "1%",
    "90%",
    "fast",
    "",
    "dct",
    "full",
    "star",
    "sites",
    "racks",
    "../x",
    "us-east",
    "[/x]",
    "\x1b[31m",
]


def _scalars() -> st.SearchStrategy:
    return st.one_of(
        st.integers(-(10**12), 10**12),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.sampled_from(UNITS),
        st.text(string.printable, max_size=12),
    )


def _tables(keys: list[str], depth: int = 2) -> st.SearchStrategy:
    value = (
        _scalars()
        if depth == 0
        else st.one_of(
            _scalars(),
            st.lists(_scalars(), max_size=4),
            _tables(keys, depth - 1),
            st.lists(_tables(keys, depth - 1), max_size=3),
        )
    )
    return st.dictionaries(st.sampled_from(keys), value, max_size=6)


def _text_or_junk(tables: st.SearchStrategy, render) -> st.SearchStrategy:
    return st.one_of(
        tables.map(lambda t: render(t).encode()), st.binary(max_size=64), st.text(max_size=80).map(str.encode)
    )


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


FUZZ = settings(
    max_examples=600,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _one_line(exc: Exception) -> None:
    assert str(exc) and "\n" not in str(exc), repr(exc)


@FUZZ
@given(data=_text_or_junk(_tables(SCENARIO_KEYS + GRID_KEYS), toml))
def test_scenario_files_load_or_are_one_scenario_error(
    tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        load_scenario(_write(tmp_path, "scenario.toml", data))
    except ScenarioError as exc:
        _one_line(exc)


@FUZZ
@given(data=_text_or_junk(_tables(TOPOLOGY_KEYS, depth=3), toml))
def test_topology_files_load_or_are_one_topology_error(tmp_path: Path, data: bytes) -> None:
    try:
        load_topology(_write(tmp_path, "topology.toml", data))
    except TopologyError as exc:
        _one_line(exc)


@FUZZ
@given(
    data=_text_or_junk(
        st.one_of(
            _tables(["shapes", "w", "b", "p0"]), st.lists(st.lists(st.integers(-3, 10**13), max_size=4), max_size=4)
        ),
        lambda t: json.dumps(t),
    )
)
def test_shapes_files_load_or_are_one_shape_error(tmp_path: Path, data: bytes) -> None:
    try:
        resolve_shapes(str(_write(tmp_path, "shapes.json", data)))
    except ShapeError as exc:
        _one_line(exc)


@FUZZ
@given(data=_text_or_junk(_tables(CALIBRATION_KEYS), lambda t: json.dumps(t, allow_nan=True)))
def test_calibration_files_load_or_are_one_calibration_error(tmp_path: Path, data: bytes) -> None:
    try:
        read_calibration(_write(tmp_path, "calibration.json", data))
    except CalibrationError as exc:
        _one_line(exc)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["--topology", "--shapes", "calibration"]),
    data=st.one_of(
        _text_or_junk(_tables(TOPOLOGY_KEYS, depth=3), toml), _text_or_junk(_tables(CALIBRATION_KEYS), json.dumps)
    ),
)
def test_plan_reads_each_file_to_exit_0_or_one_line_and_exit_2(
    tmp_path: Path, kind: str, data: bytes, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "input", data)
    argv = ["plan", "--replicator", "full", "--nodes", "2"]
    if kind == "calibration":
        monkeypatch.setenv("NETBENCH_CALIBRATION", str(path))
    else:
        monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "absent.json"))
        argv += [kind, str(path)] if kind == "--topology" else ["--shapes", str(path)]
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, data[:80], err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("netbench: error: "), err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("reader", "error"),
    [
        (load_scenario, ScenarioError),
        (load_topology, TopologyError),
        (read_calibration, CalibrationError),
        (lambda p: resolve_shapes(str(p)), ShapeError),
    ],
)
def test_a_fifo_in_place_of_a_file_is_an_error_not_a_hang(tmp_path: Path, reader, error) -> None:
    import os

    fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    with pytest.raises(error, match="not a regular file"):
        reader(fifo)
