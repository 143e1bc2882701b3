"""Append-only JSONL output, one ``write`` per line, nothing buffered in the process.

Each record goes to the kernel as soon as it exists, so a worker that is killed keeps every step
measured so far, and several ranks may share one file (O_APPEND writes do not interleave lines).
Non-finite floats (a diverged loss) are written as null so every line is strict JSON.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RecordWriter:
    """Appends one JSON object per line to a file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({k: _finite(v) for k, v in record.items()}, allow_nan=False, default=str) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
