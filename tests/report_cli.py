"""`netbench report` run in this process (the console script's entry point), its exit code and output captured."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from netbench.cli.app import main


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def error_line(self) -> str:
        """The one line a bad input gives (asserted to be exactly one)."""
        lines = self.err.strip().splitlines()
        assert self.code == 2 and len(lines) == 1 and lines[0].startswith("netbench: error: "), (self.code, self.err)
        return lines[0]


def report(*args: str) -> Outcome:
    """``netbench report ARGS``: 0 when it returned, else the SystemExit code; stdout and stderr as printed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["report", *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Outcome(code, out.getvalue(), err.getvalue())
