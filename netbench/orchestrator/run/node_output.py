"""Each node's output: kept whole in the run directory, and streamed live with a node prefix.

A thread per node copies the program's merged stdout and stderr line by line, so nodes' lines
interleave as they arrive but never mid-line. The pipe closes when the last process holding it
ends (the teardown ends them all), so ``join`` after the teardown returns promptly.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import BinaryIO, TextIO

_ECHO_LOCK = threading.Lock()


class OutputPump:
    """Copies one node's output into ``log_path`` and, prefixed ``[node R]``, onto ``echo``."""

    def __init__(self, rank: int, source: BinaryIO, log_path: Path, echo: TextIO | None) -> None:
        self.prefix = f"[node {rank}] "
        self.source = source
        self.log_path = log_path
        self.echo = echo
        self.thread = threading.Thread(target=self._pump, name=f"netbench-output-{rank}", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        with self.log_path.open("ab") as log:
            for line in iter(self.source.readline, b""):
                log.write(line)
                log.flush()
                if self.echo is not None:
                    text = line.decode(errors="replace").rstrip("\n")
                    with _ECHO_LOCK:
                        try:
                            self.echo.write(f"{self.prefix}{text}\n")
                            self.echo.flush()
                        except (OSError, ValueError):  # the terminal went away: keep the log going
                            self.echo = None
        self.source.close()

    def join(self, timeout_s: float = 5.0) -> None:
        self.thread.join(timeout_s)
