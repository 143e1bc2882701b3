"""Typer application: registers each command module and turns usage errors into one line, exit 2."""

from __future__ import annotations

import sys

import click
import typer

try:  # typer >= 0.16 vendors its own copy of click, whose exception classes differ from click's
    from typer._click import exceptions as _typer_click
except ImportError:  # pragma: no cover - older typer uses click itself
    _typer_click = click.exceptions

_USAGE_ERRORS = (click.UsageError, _typer_click.UsageError)
_ABORTS = (click.exceptions.Abort, getattr(_typer_click, "Abort", click.exceptions.Abort))
_EXITS = (click.exceptions.Exit, getattr(_typer_click, "Exit", click.exceptions.Exit))

from netbench.cli.errors import UserError

app = typer.Typer(
    name="netbench",
    help="Emulate a cluster on one machine, train across it, measure and model the wire.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each command lives in its own module and registers itself on `app` when imported.
from netbench.cli import commands_net  # noqa: E402,F401
from netbench.cli import commands_run  # noqa: E402,F401
from netbench.cli import commands_model  # noqa: E402,F401
from netbench.cli import commands_sweep  # noqa: E402,F401
from netbench.cli import commands_worker  # noqa: E402,F401
from netbench.cli import commands_exec  # noqa: E402,F401
from netbench.cli import commands_compare  # noqa: E402,F401


def main(argv: list[str] | None = None) -> None:
    """Console entry point: click usage errors and UserError become one line and exit code 2."""
    try:
        code = app(args=argv, standalone_mode=False)  # without standalone mode click returns typer.Exit's code
        if isinstance(code, int) and code:
            raise SystemExit(code)
    except _ABORTS:
        print("netbench: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except _USAGE_ERRORS as exc:
        hint = f"{exc.ctx.command_path}: " if exc.ctx else ""
        print(f"netbench: error: {hint}{exc.format_message()}", file=sys.stderr)
        raise SystemExit(2) from None
    except UserError as exc:
        print(f"netbench: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except _EXITS as exc:
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":
    main()
