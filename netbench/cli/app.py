"""The `netbench` application: creates it, registers every command in one table, turns usage errors into one line, exit
2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer
from typer import Abort, Exit

try:  # typer >= 0.16 vendors its own copy of click and no longer depends on click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer is built on click, which it then installs
    from click import UsageError

from netbench.cli.commands import calibrate, clean, compare, doctor, exec, plan, probe, report, run, sweep, worker
from netbench.cli.errors import UserError
from netbench.reports.escape import printable
from netbench.safe_files import UnsafeOutput
from netbench.untrusted import begin_command

app = typer.Typer(
    name="netbench",
    help="Emulate a cluster on one machine, train across it, measure and model the wire.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Every command, in the order `netbench --help` lists them: registered here and nowhere else, so no
# command module imports the app (or another command module to reach it).
COMMANDS: tuple[tuple[str, Callable[..., None], dict[str, Any]], ...] = (
    ("doctor", doctor.doctor, {}),
    ("probe", probe.probe, {}),
    ("clean", clean.clean, {}),
    ("run", run.run, {}),
    ("plan", plan.plan, {}),
    ("calibrate", calibrate.calibrate, {}),
    ("sweep", sweep.sweep, {}),
    ("report", report.report, {}),
    ("worker", worker.worker, {}),
    ("exec", exec.exec_command, {"context_settings": {"allow_interspersed_args": False}}),
    ("compare", compare.compare, {}),
)
for name, command, settings in COMMANDS:
    app.command(name, **settings)(command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: click usage errors and UserError become one line (printable: no escape sequence from a
    file reaches the terminal) and exit code 2. The paths the command line names are the only links netbench follows
    (:func:`netbench.untrusted.begin_command`: each command reads within its own byte budget)."""
    begin_command(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, standalone_mode=False)  # without standalone mode click returns typer.Exit's code
        if isinstance(code, int) and code:
            raise SystemExit(code)
    except Abort:
        print("netbench: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except UsageError as exc:
        hint = f"{exc.ctx.command_path}: " if exc.ctx else ""
        print(f"netbench: error: {printable(hint + exc.format_message())}", file=sys.stderr)
        raise SystemExit(2) from None
    except (UserError, UnsafeOutput) as exc:  # UnsafeOutput: an output file or folder a command may not write
        print(f"netbench: error: {printable(exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exit as exc:
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":
    main()
