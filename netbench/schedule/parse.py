"""Reading a schedule file: the schedule CSV, its TOML form, a Mahimahi trace, or a simple rate trace CSV.

Every file is untrusted input: whatever is wrong with it (too big, not text, a row that does not parse, a value out
of range, times out of order) is one :class:`ScheduleError` line naming the file and the row, raised before anything
is built. Which form a file is in is read from it: ``.toml`` by its name; a CSV whose header has a ``link`` column
is a schedule, one without is a rate trace (``time_s,rate[,delay]``); a file of bare integers is a Mahimahi trace
(:mod:`netbench.schedule.traces`).
"""

from __future__ import annotations

import csv
import io
import tomllib
from pathlib import Path
from typing import Any

import pydantic

from netbench.safe_files import BadInput, read_utf8
from netbench.schedule.errors import first_error
from netbench.schedule.model import ALL, Change, Schedule
from netbench.schedule.traces import TraceError, from_mahimahi, from_rate_rows
from netbench.units import UnitError, parse_fraction, parse_rate, parse_time

__all__ = ["ScheduleError", "MAX_FILE_BYTES", "COLUMNS", "load", "parse_text"]

MAX_FILE_BYTES = 16 << 20
COLUMNS = (
    "time_s",
    "link",
    "rate",
    "delay",
    "jitter",
    "loss",
    "state",
    "compute_scale",
)  # a schedule CSV's, in any order


class ScheduleError(ValueError):
    """A schedule file that cannot be used; the message is one line."""


def load(path: Path) -> Schedule:
    """Read and validate the schedule in ``path`` (any of the forms above): a regular UTF-8 file of at most 16 MiB."""
    try:
        text = read_utf8(path, MAX_FILE_BYTES)
    except BadInput as exc:
        raise ScheduleError(str(exc)) from None
    return parse_text(text, path.name, toml=path.suffix.lower() == ".toml")


def parse_text(text: str, source: str, toml: bool = False) -> Schedule:
    """The schedule in ``text``; ``source`` names it in errors and in run.json."""
    text = text.removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    try:
        if toml:
            return _from_toml(text, source)
        first = next((line for line in text.splitlines() if line.strip()), "")
        if not first:
            raise ScheduleError("is empty")
        if first.strip().isdigit():
            return _schedule(from_mahimahi(text), source)
        header, rows = _table(text)
        if "link" in header:
            return _from_rows(rows, header, source)
        return _schedule(from_rate_rows(rows, header), source)
    except ScheduleError as exc:
        raise ScheduleError(f"{source}: {exc}") from None
    except TraceError as exc:
        raise ScheduleError(f"{source}: {exc}") from None


def _table(text: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The header (names stripped) and the rows as dicts; a row longer than the header keeps its extra cells under
    None.
    """
    try:
        lines = [line for line in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in line)]
    except csv.Error as exc:
        raise ScheduleError(f"not CSV: {exc}") from None
    header = [h.strip() for h in lines[0]]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ScheduleError(f"column {twice[0]!r} appears twice")
    rows = [
        {**dict(zip(header, line)), **({None: line[len(header) :]} if len(line) > len(header) else {})}
        for line in lines[1:]
    ]
    return header, rows


def _schedule(parts: tuple[list[Change], str], source: str) -> Schedule:
    changes, note = parts
    return _validated(changes, source, note)


def _validated(changes: list[Change], source: str, note: str = "") -> Schedule:
    try:
        return Schedule(changes=tuple(changes), source=source, note=note)
    except pydantic.ValidationError as exc:
        raise ScheduleError(first_error(exc)) from None


def _from_rows(rows: list[dict[str, Any]], header: list[str], source: str) -> Schedule:
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise ScheduleError(f"unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)})")
    if "time_s" not in header:
        raise ScheduleError("needs a time_s column")
    changes = [
        _change(row, line) for line, row in enumerate(rows, start=2) if any((v or "").strip() for v in row.values())
    ]
    if not changes:
        raise ScheduleError("has no changes")
    return _validated(changes, source)


def _from_toml(text: str, source: str) -> Schedule:
    """``[[change]]`` tables with the CSV's keys (values as in the CSV, numbers allowed)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScheduleError(f"not TOML: {exc}") from None
    extra = set(data) - {"change"}
    if extra:
        raise ScheduleError(f"unknown key {sorted(extra)[0]!r} (a schedule has [[change]] tables)")
    tables = data.get("change")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ScheduleError("needs one or more [[change]] tables")
    changes = []
    for i, table in enumerate(tables, start=1):
        unknown = set(table) - set(COLUMNS)
        if unknown:
            raise ScheduleError(f"change {i}: unknown key {sorted(unknown)[0]!r} (keys: {', '.join(COLUMNS)})")
        changes.append(_change({k: str(v) for k, v in table.items()}, i, what="change"))
    return _validated(changes, source)


def _change(row: dict[str, Any], line: int, what: str = "line") -> Change:
    """One row as a Change; any problem is a ScheduleError naming the row."""
    if None in row:
        raise ScheduleError(f"{what} {line}: more cells than columns")
    cell = {k: (v or "").strip() for k, v in row.items()}
    try:
        values: dict[str, Any] = {"time_s": float(cell["time_s"]), "target": cell.get("link") or ALL}
        readers = {
            "rate": ("rate_bps", parse_rate),
            "delay": ("delay_s", parse_time),
            "jitter": ("jitter_s", parse_time),
            "loss": ("loss", parse_fraction),
            "compute_scale": ("compute_scale", float),
            "state": ("state", str.lower),
        }
        for column, (key, read) in readers.items():
            if cell.get(column):
                values[key] = read(cell[column])
        return Change(**values)
    except (UnitError, ValueError) as exc:
        message = first_error(exc) if isinstance(exc, pydantic.ValidationError) else str(exc)
        raise ScheduleError(f"{what} {line}: {message}") from None
