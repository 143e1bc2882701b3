"""`netbench report` run in this process, its exit code and output captured.

:func:`report` goes through the console script's entry point; :func:`report_command` calls the
command's function itself and turns a UserError into the same line and exit code as the entry
point (the CLI's parser is built anew on every entry, 60 ms that thousands of fuzzed cases skip).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import typer

from netbench.cli.app import main
from netbench.cli.commands import report as report_module
from netbench.cli.errors import UserError


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


def netbench(*argv: str) -> Outcome:
    """``netbench ARGV`` in this process: 0 when it returned, else the SystemExit code; stdout and stderr as
    printed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Outcome(code, out.getvalue(), err.getvalue())


def report(*args: str) -> Outcome:
    """``netbench report ARGS`` (:func:`netbench`)."""
    return netbench("report", *args)


def report_command(folder: Path) -> Outcome:
    """``netbench report FOLDER`` through the command's function: 0 when it returned, 2 with the entry point's line for
    a UserError.
    """
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            report_module.report(folder, None, None)
        except UserError as exc:
            print(f"netbench: error: {exc}", file=err)
            code = 2
        except typer.Exit as exc:
            code = exc.exit_code
    return Outcome(code, out.getvalue(), err.getvalue())
