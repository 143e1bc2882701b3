"""The `netbench` application: creates it, registers every command in one table, turns usage errors into one line, exit
2.
"""

from __future__ import annotations

import sys

import typer
from typer import Abort, Exit

try:  # typer >= 0.16 vendors its own copy of click and no longer depends on click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer is built on click, which it then installs
    from click import UsageError

from netbench.cli.errors import UserError
from netbench.cli.lazy_commands import LazyCommand, lazy_group
from netbench.reports.escape import printable
from netbench.safe_files import UnsafeOutput
from netbench.untrusted import begin_command

# Every command, in the order `netbench --help` lists them: declared here and nowhere else, so no command module
# imports the app (or another command module to reach it). A command's module is imported when the command is
# called (or listed by --help), so each command pays only for its own imports.
COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("doctor", "netbench.cli.commands.doctor:doctor"),
    LazyCommand("probe", "netbench.cli.commands.probe:probe"),
    LazyCommand("clean", "netbench.cli.commands.clean:clean"),
    LazyCommand("run", "netbench.cli.commands.run:run"),
    LazyCommand("plan", "netbench.cli.commands.plan:plan"),
    LazyCommand("calibrate", "netbench.cli.commands.calibrate:calibrate"),
    LazyCommand("sweep", "netbench.cli.commands.sweep:sweep"),
    LazyCommand("report", "netbench.cli.commands.report:report"),
    LazyCommand("worker", "netbench.cli.commands.worker:worker"),
    LazyCommand(
        "exec", "netbench.cli.commands.exec:exec_command", {"context_settings": {"allow_interspersed_args": False}}
    ),
    LazyCommand("compare", "netbench.cli.commands.compare:compare"),
)


def _commands() -> None:
    """The group's own callback (none of its options): typer builds a group, rather than one command, for an
    application with a callback."""


app = typer.Typer(
    name="netbench",
    help="Emulate a cluster on one machine, train across it, measure and model the wire.",
    cls=lazy_group(COMMANDS),
    callback=_commands,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
