"""Reading a small text file someone else wrote: a regular file of bounded size, never a FIFO, device or stream.

netbench runs as root and reads files users hand it (topology, shapes, scenario files). An ``open()`` of a FIFO
blocks forever and ``/dev/zero`` never ends, so the file is opened without blocking, checked to be a regular file
and read up to a limit; bytes that are not UTF-8 are an error, not a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["UnreadableFile", "read_small_text"]


class UnreadableFile(ValueError):
    """The file cannot be read as small UTF-8 text; the message is one line naming it."""


def read_small_text(path: str | Path, what: str, max_bytes: int = 2**20) -> str:
    """The text of ``path`` (called ``what`` in messages, e.g. "topology file"), at most ``max_bytes`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open
    except OSError as exc:
        raise UnreadableFile(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UnreadableFile(f"{what} {str(path)!r} is not a regular file")
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise UnreadableFile(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise UnreadableFile(f"{what} {str(path)!r} is larger than {max_bytes // 1024} KiB")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UnreadableFile(f"{what} {str(path)!r} is not UTF-8 text") from None
