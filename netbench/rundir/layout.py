"""A run directory's layout, and reading the worker records in it: written down once, used by every launcher.

`netbench run`, `netbench exec`, rank 0 of `netbench worker` and the sweep all make or read the
same folder::

    OUT/STAMP-LABEL-RUNID/
        steps.csv               one row per worker per step
        run.json                config, cluster, capture, fidelity and the summary
        workers/rankR.jsonl     each worker's records (start, step..., done or error), one JSON object a line
        workers/rankR.spec.json what the orchestrator told worker R to do (`netbench run`)
        workers/rankR.log       worker R's output
        workers/rendezvous      the file store the workers of `netbench run` meet at (they share this host)
        capture/                the pcaps while the run parses them (kept only with --pcap)
        payload_shapes.json     the shapes a `netbench exec` program declared

A worker writes its records as it goes (:mod:`netbench.rundir.records`), so a killed worker may
leave half a line at the end; readers here skip it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbench import safe_files, untrusted

Record = dict[str, Any]
MAX_SAME_NAME = 99  # run directories of one name (same second, label and run id) before giving up
_RECORD_FILE = re.compile(r"rank(\d+)\.jsonl")


def record_name(rank: int) -> str:
    """The file name of worker ``rank``'s records, in a run directory's workers/ or a worker's own folder."""
    return f"rank{rank}.jsonl"


def record_files(folder: Path) -> dict[int, Path]:
    """The record files directly in ``folder``, by rank."""
    found = {int(m.group(1)): path for path in folder.glob("rank*.jsonl") if (m := _RECORD_FILE.fullmatch(path.name))}
    return dict(sorted(found.items()))


def read_records(path: Path, within: Path | None = None) -> list[Record]:
    """Every complete JSON object line of a worker's record file (a killed worker may leave half a line).

    Read as untrusted input: a regular file only (never a link, never a FIFO that would block; no link
    on the way from ``within``, the run directory), and a line that is not UTF-8 JSON of an object is
    skipped like a half-written one.
    """
    if not os.path.lexists(path):
        return []
    records = []
    for line in untrusted.read_bytes(path, untrusted.RUN_FILE, within=within).splitlines():
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def start_record(records: list[Record]) -> Record:
    """The worker's start record (parameter and tensor counts), or {} when it never got that far."""
    return next((r for r in records if r.get("event") == "start"), None) or {}


def finished(records: list[Record]) -> bool:
    """True when the worker wrote its done record: every step it owed is on disk."""
    return any(r.get("event") == "done" for r in records)


def last_error(records: list[Record]) -> str | None:
    """The message of the worker's last error record, if it wrote one."""
    return next((str(r.get("error", "")) for r in reversed(records) if r.get("event") == "error"), None)


class StepCounter:
    """Steps a worker has recorded so far, reading only what its record file gained since the last call.

    The watcher polls every 0.1 s; re-reading whole files made a long run's polling quadratic.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.steps = 0
        self.started = False  # the worker's start event is there: it has joined the process group
        self.done = False  # its done event is there: every step and its totals are recorded

    def __call__(self) -> int:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return self.steps
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        lines = complete.splitlines()
        self.steps += sum(1 for line in lines if line.startswith(b'{"event": "step"'))  # "event" comes first
        self.started = self.started or any(line.startswith(b'{"event": "start"') for line in lines)
        self.done = self.done or any(line.startswith(b'{"event": "done"') for line in lines)
        return self.steps


@dataclass(frozen=True)
class RunDir:
    """One run's folder: where each file goes, and its workers' records."""

    path: Path

    @classmethod
    def create(cls, out_dir: Path, label: str, run_id: str, started: float | None = None) -> RunDir:
        """A new ``OUT/STAMP-LABEL-RUNID`` with its workers/ folder (STAMP from ``started``, else now).

        Always a folder of this run's own: a rerun within the same second gets a suffix (-2, -3, ...),
        never a shared folder, and nobody else can have planted files in it.
        """
        when = dt.datetime.fromtimestamp(started) if started is not None else dt.datetime.now()
        base = safe_files.make_folder(out_dir) / f"{when.strftime('%Y%m%d-%H%M%S')}-{label}-{run_id}"
        for attempt in range(1, MAX_SAME_NAME + 1):
            path = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            (path / "workers").mkdir()
            return cls(path)
        raise FileExistsError(f"{base}: {MAX_SAME_NAME} run directories of this name already exist")

    # ------------------------------------------------------------------ files
    @property
    def workers(self) -> Path:
        return self.path / "workers"

    def records_path(self, rank: int) -> Path:
        return self.workers / record_name(rank)

    def spec_path(self, rank: int) -> Path:
        return self.workers / f"rank{rank}.spec.json"

    @property
    def start_gate(self) -> Path:
        """Created by the orchestrator when every worker has joined: the workers' signal to begin their steps."""
        return self.workers / "start"

    @property
    def rendezvous(self) -> Path:
        """The file store the workers' process group meets at (never made before they start: a fresh store)."""
        return self.workers / "rendezvous"

    def log_path(self, rank: int) -> Path:
        return self.workers / f"rank{rank}.log"

    @property
    def capture(self) -> Path:
        """The pcaps' folder: inside the run's own, so an interrupted run leaves nothing elsewhere."""
        return self.path / "capture"

    @property
    def steps_csv(self) -> Path:
        return self.path / "steps.csv"

    @property
    def trunks_csv(self) -> Path:
        """Bytes and packets each trunk direction of a topology carried per step (absent for the star)."""
        return self.path / "trunks.csv"

    @property
    def schedule_csv(self) -> Path:
        """Each change of a link schedule with the wall time it took effect (absent without a schedule)."""
        return self.path / "schedule.csv"

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def payload_shapes(self) -> Path:
        return self.path / "payload_shapes.json"

    @property
    def written(self) -> bool:
        """True once the run's writer has put run.json in place (a finished run, or a failed one that said why)."""
        return self.run_json.exists()

    # ---------------------------------------------------------------- records
    def records(self, rank: int) -> list[Record]:
        return read_records(self.records_path(rank), within=self.path)

    def all_records(self, world_size: int) -> dict[int, list[Record]]:
        """Every worker's records by rank (an empty list for a worker that wrote none)."""
        return {rank: self.records(rank) for rank in range(world_size)}

    def finished(self, rank: int) -> bool:
        return finished(self.records(rank))

    def start(self, rank: int = 0) -> Record:
        return start_record(self.records(rank))


def partial_records(out_dir: Path, run_id: str, rank: int) -> Path:
    """Where a `netbench worker` rank keeps its records until rank 0 has saved them in the run directory.

    ``OUT/RUNID.partial/rankR.jsonl``: ranks that share a host (or a shared --out) share the folder,
    so rank 0 can still pick up their records when the run failed before gathering them.
    """
    return out_dir / f"{run_id}.partial" / record_name(rank)
