"""Reading a schedule file: the schedule CSV, its TOML form, a Mahimahi trace, or a simple rate trace CSV.

Every file is untrusted input (:mod:`netbench.untrusted`): whatever is wrong with it (too big, not text, a row that
does not parse, a value out of range, times out of order) is one :class:`ScheduleError` line naming the file and the
row, never a value from it, raised before anything is built. The counts that bound the work (rows, columns, TOML
tables) are checked before the rows are parsed. Which form a file is in is read from it: ``.toml`` by its name; a CSV
whose header has a ``link`` column is a schedule, one without is a rate trace (``time_s,rate[,delay]``); a file of
bare integers is a Mahimahi trace (:mod:`netbench.schedule.traces`).
"""

from __future__ import annotations

import collections
import csv
import io
import re
from pathlib import Path
from typing import Any

import pydantic

from netbench import untrusted
from netbench.schedule.errors import first_error
from netbench.schedule.model import ALL, MAX_CHANGES, Change, Schedule
from netbench.schedule.traces import TraceError, from_mahimahi, from_rate_rows, is_mahimahi, parse_number
from netbench.units import UnitError, parse_fraction, parse_rate, parse_time

__all__ = ["ScheduleError", "MAX_FILE_BYTES", "MAX_COLUMNS", "COLUMNS", "load", "parse_text"]

MAX_FILE_BYTES = untrusted.SCHEDULE.max_bytes
MAX_COLUMNS = 32  # a schedule has 9 columns, a rate trace 3
COLUMNS = (
    "time_s",
    "link",
    "rate",
    "delay",
    "jitter",
    "loss",
    "state",
    "compute_scale",
    "member",
)  # a schedule CSV's, in any order


class ScheduleError(ValueError):
    """A schedule file that cannot be used; the message is one line."""


def load(path: Path) -> Schedule:
    """Read and validate the schedule in ``path`` (any of the forms above): a regular UTF-8 file of at most 16 MiB."""
    try:
        text = untrusted.read_text(path, untrusted.SCHEDULE)
    except untrusted.BadInput as exc:
        raise ScheduleError(str(exc)) from None
    return parse_text(text, path.name, toml=path.suffix.lower() == ".toml")


def parse_text(text: str, source: str, toml: bool = False) -> Schedule:
    """The schedule in ``text``; ``source`` names it in errors and in run.json."""
    text = text.removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    try:
        if toml:
            return _from_toml(text, source)
        if not text.strip():
            raise ScheduleError("is empty")
        if is_mahimahi(text):
            return _schedule(from_mahimahi(text), source)
        header, rows = _table(text)
        if "link" in header:
            return _from_rows(rows, header, source)
        return _schedule(from_rate_rows(rows, header), source)
    except ScheduleError as exc:
        raise ScheduleError(f"{source}: {exc}") from None
    except TraceError as exc:
        raise ScheduleError(f"{source}: {exc}") from None


_FILLED_LINE = re.compile(r"^[ \t,]*[^ \t,\r\n]", re.MULTILINE)  # a line with a cell that is not empty


def _table(text: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The header (names stripped) and the rows as dicts; a row longer than the header keeps its extra cells under
    None. The row and column counts are checked before any row is parsed.
    """
    newlines = text.count("\n")
    filled = newlines if newlines > 4 * MAX_CHANGES else len(_FILLED_LINE.findall(text))  # not 40000 blank lines
    if filled - 1 > MAX_CHANGES:
        raise ScheduleError(f"{filled - 1} rows; a schedule holds at most {MAX_CHANGES} changes")
    try:
        lines = csv.reader(io.StringIO(text))
        header_cells = next((line for line in lines if any(cell.strip() for cell in line)), None)
        if header_cells is None:
            raise ScheduleError("has no header line")
        if len(header_cells) > MAX_COLUMNS:
            raise ScheduleError(f"{len(header_cells)} columns; a schedule has at most {MAX_COLUMNS}")
        body = [line for line in lines if any(cell.strip() for cell in line)]
    except csv.Error as exc:
        raise ScheduleError(f"not CSV (line {lines.line_num}: {_csv_problem(exc)})") from None
    header = [h.strip() for h in header_cells]
    twice = sorted(name for name, n in collections.Counter(header).items() if n > 1)
    if twice:
        raise ScheduleError(f"column {untrusted.shown_name(twice[0])} appears twice")
    rows = [
        {**dict(zip(header, line)), **({None: line[len(header) :]} if len(line) > len(header) else {})} for line in body
    ]
    return header, rows


def _csv_problem(exc: csv.Error) -> str:
    """The csv module's words, which never quote the file ("new-line character seen in unquoted field")."""
    message = str(exc)
    return message if "'" not in message and '"' not in message and message.isprintable() else "malformed"


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
        raise ScheduleError(f"unknown column {untrusted.shown_name(unknown[0])} (columns: {', '.join(COLUMNS)})")
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
        data = untrusted.parse_toml(text, source)
    except untrusted.BadInput as exc:
        raise ScheduleError(str(exc).removeprefix(f"{untrusted.shown_path(source)}: ")) from None
    extra = set(data) - {"change"}
    if extra:
        raise ScheduleError(f"unknown key {untrusted.shown_name(sorted(extra)[0])} (a schedule has [[change]] tables)")
    tables = data.get("change")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ScheduleError("needs one or more [[change]] tables")
    if len(tables) > MAX_CHANGES:
        raise ScheduleError(f"{len(tables)} changes; a schedule holds at most {MAX_CHANGES}")
    changes = []
    for i, table in enumerate(tables, start=1):
        unknown = set(table) - set(COLUMNS)
        if unknown:
            name = untrusted.shown_name(sorted(unknown)[0])
            raise ScheduleError(f"change {i}: unknown key {name} (keys: {', '.join(COLUMNS)})")
        if not all(isinstance(v, (str, int, float)) for v in table.values()):
            raise ScheduleError(f"change {i}: every value is a string or a number")
        changes.append(_change({k: str(v) for k, v in table.items()}, i, what="change"))
    return _validated(changes, source)


def _change(row: dict[str, Any], line: int, what: str = "line") -> Change:
    """One row as a Change; any problem is a ScheduleError naming the row."""
    if None in row:
        raise ScheduleError(f"{what} {line}: more cells than columns")
    cell = {k: (v or "").strip() for k, v in row.items()}
    column = "time_s"
    try:
        values: dict[str, Any] = {"time_s": parse_number(cell.get("time_s", "")), "target": cell.get("link") or ALL}
        readers = {
            "rate": ("rate_bps", parse_rate),
            "delay": ("delay_s", parse_time),
            "jitter": ("jitter_s", parse_time),
            "loss": ("loss", parse_fraction),
            "compute_scale": ("compute_scale", parse_number),
            "state": ("state", str.lower),
            "member": ("member", str.lower),
        }
        for column, (key, read) in readers.items():
            if cell.get(column):
                values[key] = read(cell[column])
        return Change(**values)
    except UnitError as exc:  # the value is the file's: its column is named, the value is not echoed
        raise ScheduleError(f"{what} {line}: {column}: {exc.unquoted}") from None
    except pydantic.ValidationError as exc:
        raise ScheduleError(f"{what} {line}: {first_error(exc)}") from None
