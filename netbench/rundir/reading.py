"""Reading the files of a run directory or sweep folder as untrusted input: regular files only, strict, typed.

A folder handed to ``netbench report`` may have been copied, unpacked or written by someone else:
its JSON may hold the wrong types, its CSV may lack columns or hold text where numbers belong,
and any of its files may be a link, a FIFO or not UTF-8. Every reader here opens through
:func:`netbench.safe_files.read_utf8` and turns whatever is wrong into one
:class:`~netbench.safe_files.BadInput` line naming the file and the field, never echoing the
offending value (it may hold terminal escapes).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ValidationError

from netbench.safe_files import BadInput, read_utf8
from netbench.validation import error_text

__all__ = ["BadInput", "read_json_object", "read_csv", "validated", "numeric_column"]

JSON_LIMIT = 64 << 20  # run.json and sweep.json: a few kB to a few MB in practice


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "(top level)"


def validated(model: type[BaseModel], data: Any, path: Path | str) -> BaseModel:
    """``model`` validated from ``data``, or BadInput naming the first wrong field (not its value)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise BadInput(f"{path}: {_where(first['loc'])}: {first['msg']}{more}") from None


def read_json_object(path: Path, limit: int = JSON_LIMIT) -> dict[str, Any]:
    """A JSON object from a regular file, strictly UTF-8 (BadInput for anything else, a nesting too deep included)."""
    text = read_utf8(path, limit)
    try:
        data = json.loads(text)
    except RecursionError:
        raise BadInput(f"{path}: JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and integers of more digits than Python converts
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise BadInput(f"{path}: not valid JSON{where}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_csv(path: Path, text_columns: tuple[str, ...] = (), limit: int | None = None) -> pd.DataFrame:
    """A CSV file as a frame (``text_columns`` read as text), or BadInput when it is not one."""
    text = read_utf8(path, limit) if limit else read_utf8(path)
    try:
        return pd.read_csv(io.StringIO(text), dtype={c: str for c in text_columns})
    except pd.errors.EmptyDataError:
        raise BadInput(f"{path}: empty (no header line)") from None
    except (ValueError, TypeError, OverflowError, pd.errors.ParserError) as exc:
        first = error_text(exc).splitlines()[0][:120]
        raise BadInput(
            f"{path}: not a CSV table netbench wrote ({first.encode('ascii', 'replace').decode()})"
        ) from None


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
        raise BadInput(f"{path}: column {column!r}, line {row}: expected a finite number{bounds}")
    return values.astype(float)
