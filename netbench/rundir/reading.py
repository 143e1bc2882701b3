"""Reading the files of a run directory or sweep folder as untrusted input: regular files only, strict, typed.

A folder handed to ``netbench report`` may have been copied, unpacked or written by someone else:
its JSON may hold the wrong types, its CSV may lack columns or hold text where numbers belong,
and any of its files may be a link, a FIFO or not UTF-8. Every reader here opens through
:mod:`netbench.untrusted` and turns whatever is wrong into one
:class:`~netbench.untrusted.BadInput` line naming the file and the field, never echoing the
offending value (it may hold terminal escapes, or another file's content).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ValidationError

from netbench import untrusted
from netbench.untrusted import BadInput
from netbench.validation import message_of

__all__ = [
    "BadInput",
    "read_json_object",
    "read_csv",
    "parse_csv",
    "csv_rows",
    "validated",
    "numeric_column",
    "MAX_CSV_COLUMNS",
]

MAX_CSV_COLUMNS = 1000  # summary.csv has about 120, steps.csv about 40


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        name = untrusted.shown_name(part, quoted=False)
        out += f"[{part}]" if isinstance(part, int) else f".{name}" if out else name
    return out or "(top level)"


def validated(model: type[BaseModel], data: Any, path: Path | str, context: dict[str, Any] | None = None) -> BaseModel:
    """``model`` validated from ``data`` (with validation ``context``), or BadInput naming the first wrong field (not
    its value)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = message_of(first, echo=False)
        raise BadInput(f"{untrusted.shown_path(path)}: {_where(first['loc'])}: {message}{more}") from None


def read_json_object(path: Path, kind: untrusted.Kind = untrusted.RUN_JSON) -> dict[str, Any]:
    """A JSON object from a regular file, strictly UTF-8 (BadInput for anything else, a nesting too deep included)."""
    data = untrusted.read_json(path, kind)
    if not isinstance(data, dict):
        raise BadInput(f"{untrusted.shown_path(path)}: expected a JSON object, got {type(data).__name__}")
    return data


def read_csv(
    path: Path,
    text_columns: tuple[str, ...] = (),
    kind: untrusted.Kind = untrusted.RUN_FILE,
    max_rows: int | None = None,
) -> pd.DataFrame:
    """A CSV file as a frame (``text_columns`` read as text), or BadInput when it is not one.

    The counts are checked before pandas reads the table: at most MAX_CSV_COLUMNS columns and ``max_rows`` rows, rows
    counted as pandas splits them (a bare carriage return ends a row too). A file is parsed once per command (a sweep
    whose rows all name one steps.csv parses it once); the caller gets its own copy.
    """
    how = f"csv{text_columns}{max_rows}"
    frame = untrusted.parsed(path, kind, how, lambda text: parse_csv(text, path, text_columns, max_rows))
    return frame.copy()


def csv_rows(text: str) -> int:
    """Lines of ``text`` as a CSV parser splits them: at ``\n``, ``\r\n`` and a bare ``\r``."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def parse_csv(text: str, path: Path, text_columns: tuple[str, ...] = (), max_rows: int | None = None) -> pd.DataFrame:
    """CSV ``text`` (of ``path``, named in messages) as a frame within the caps on columns and rows."""
    header = text.split("\n", 1)[0]
    if header.count(",") >= MAX_CSV_COLUMNS:
        raise BadInput(f"{untrusted.shown_path(path)}: more than {MAX_CSV_COLUMNS} columns")
    if max_rows is not None and csv_rows(text) > max_rows + 1:
        raise BadInput(f"{untrusted.shown_path(path)}: more than {max_rows} rows")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype={c: str for c in text_columns})
    except pd.errors.EmptyDataError:
        raise BadInput(f"{untrusted.shown_path(path)}: empty (no header line)") from None
    except (ValueError, TypeError, OverflowError, pd.errors.ParserError):
        raise BadInput(f"{untrusted.shown_path(path)}: not a CSV table netbench wrote") from None
    return frame


def numeric_column(
    frame: pd.DataFrame, column: str, path: Path, low: float = -math.inf, high: float = math.inf
) -> pd.Series:
    """``column`` as finite numbers within [low, high] (empty cells stay NaN), or BadInput naming the first bad row."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce")
    given = raw.notna() & (raw.astype(str).str.strip() != "")
    bad = given & ~(values.between(low, high) & values.map(lambda v: math.isfinite(v) if pd.notna(v) else False))
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 2  # line number in the file: the header is line 1
        bounds = "" if (low, high) == (-math.inf, math.inf) else f" between {low:g} and {high:g}"
        raise BadInput(
            f"{untrusted.shown_path(path)}: column {untrusted.shown_name(column)}, line {row}: expected a finite "
            f"number{bounds}"
        )
    return values.astype(float)
