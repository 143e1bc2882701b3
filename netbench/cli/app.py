"""Typer application: registers each command module and turns usage errors into one line, exit 2."""

from __future__ import annotations

import sys

import typer
from typer import Abort, Exit

try:  # typer >= 0.16 vendors its own copy of click and no longer depends on click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer is built on click, which it then installs
    from click import UsageError

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
    except Abort:
        print("netbench: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except UsageError as exc:
        hint = f"{exc.ctx.command_path}: " if exc.ctx else ""
        print(f"netbench: error: {hint}{exc.format_message()}", file=sys.stderr)
        raise SystemExit(2) from None
    except UserError as exc:
        print(f"netbench: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exit as exc:
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":
    main()
