"""Append-only JSONL output, one ``write`` per line, nothing buffered in the process.

Each record goes to the kernel as soon as it exists, so a worker that is killed keeps every step
measured so far. Each attempt gets a file of its own: it is created exclusively (O_EXCL, never
through a symlink) in a folder that passes :func:`netbench.safe_files.make_folder` (made by
netbench or owned by the user, not a link, not writable by strangers), so a rerun can neither
append to an earlier attempt's records nor be sent somewhere else. A file already there is an
error (``FileExistsError``); callers that rerun into a known path move the earlier one aside first
(:func:`set_aside`).
Non-finite floats (a diverged loss) are written as null so every line is strict JSON.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from netbench import safe_files


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def set_aside(path: Path) -> Path | None:
    """Rename an earlier attempt's record file to ``NAME.earlier-N`` (kept, never appended to); returns the new path."""
    if not os.path.lexists(path):
        return None
    n = 1
    while os.path.lexists(aside := path.with_name(f"{path.name}.earlier-{n}")):
        n += 1
    os.rename(path, aside)
    return aside


class RecordWriter:
    """Appends one JSON object per line to a file: a new one, or with ``go_on`` the one a program that started again
    wrote before."""

    def __init__(self, path: Path, go_on: bool = False) -> None:
        safe_files.make_folder(path.parent)  # a folder netbench made or the user owns, never a planted link
        self.path = path
        self._fd = safe_files.append_own(path) if go_on else safe_files.create_new(path, os.O_WRONLY | os.O_APPEND)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({k: _finite(v) for k, v in record.items()}, allow_nan=False, default=str) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
