"""RunDir: one run's folder, made fresh for every run, and its workers' records read as they were written."""

from __future__ import annotations

from pathlib import Path

from netbench.rundir.layout import RunDir, finished, last_error, partial_records, record_files, start_record
from netbench.rundir.records import RecordWriter

T0 = 1_700_000_000.0


def test_a_second_run_of_the_same_name_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path / "out", "dct", "abc123", started=T0)
    first.records_path(0).write_text("mine\n")
    second = RunDir.create(tmp_path / "out", "dct", "abc123", started=T0)  # same second, label and run id
    assert second.path != first.path and second.path.name == f"{first.path.name}-2"
    assert second.workers.is_dir() and not second.records_path(0).exists()
    assert first.records_path(0).read_text() == "mine\n"  # nothing of the first run was reused
    assert first.path.name.endswith("-dct-abc123") and first.path.parent == tmp_path / "out"


def test_records_as_the_worker_wrote_them_and_a_half_line_skipped(tmp_path: Path) -> None:
    run_dir = RunDir.create(tmp_path, "full", "r1")
    with RecordWriter(run_dir.records_path(1)) as writer:
        writer.write({"event": "start", "rank": 1, "n_params": 42})
        writer.write({"event": "step", "rank": 1, "step": 0})
        writer.write({"event": "error", "rank": 1, "error": "gloo read failed"})
    with run_dir.records_path(1).open("a") as fh:
        fh.write('{"event": "done", "ra')  # killed mid-line: not a done record
    records = run_dir.all_records(2)
    assert records[0] == [] and [r["event"] for r in records[1]] == ["start", "step", "error"]
    assert run_dir.start(1)["n_params"] == 42 and run_dir.start(0) == {}
    assert not run_dir.finished(1) and last_error(records[1]) == "gloo read failed"
    assert finished([{"event": "step"}, {"event": "done"}]) and start_record([]) == {}


def test_a_worker_hosts_partial_records_are_found_by_rank(tmp_path: Path) -> None:
    paths = [partial_records(tmp_path, "job7", rank) for rank in (10, 2)]
    for path in paths:
        path.parent.mkdir(exist_ok=True)
        path.write_text("")
    (paths[0].parent / "rank3.jsonl.earlier-1").write_text("")  # an earlier attempt's, set aside: not a rank's file
    assert paths[0] == tmp_path / "job7.partial" / "rank10.jsonl"
    assert record_files(paths[0].parent) == {2: paths[1], 10: paths[0]}
