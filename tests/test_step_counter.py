"""The run watcher counts a worker's recorded steps incrementally, and never a half-written line; it sees when the
worker has joined (its start event)."""

from __future__ import annotations

from pathlib import Path

from netbench.rundir.layout import StepCounter


def test_counts_complete_step_lines_as_they_arrive(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    count = StepCounter(path)
    assert count() == 0 and not count.started  # no file yet
    path.write_bytes(b'{"event": "start"}\n{"event": "step", "step": 1}\n{"event": "st')
    assert count() == 1  # the third line is still being written
    assert count.started  # the worker has joined its process group
    assert not count.done
    with path.open("ab") as fh:
        fh.write(b'ep", "step": 2}\n{"event": "step", "step": 3}\n{"event": "done"}\n')
    assert count() == 3
    assert count.done  # its last record: every step and the totals are there
    assert count() == 3  # nothing new, nothing counted twice
    assert count.offset == path.stat().st_size
