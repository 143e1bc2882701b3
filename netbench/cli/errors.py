"""One-line user errors with exit code 2, raised before anything is created."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import pydantic


class UserError(Exception):
    """Bad input: shown to the user as one line, exit code 2."""


def make_output_folder(folder: Path, option: str) -> Path:
    """Create an output folder, or a UserError naming ``option`` if a stranger could redirect writes there."""
    from netbench.safe_files import UnsafeOutput, make_folder

    try:
        return make_folder(folder)
    except UnsafeOutput as exc:
        raise UserError(f"{option}: {exc}") from None
    except OSError as exc:
        raise UserError(f"{option}: cannot create {str(folder)!r}: {exc.strerror}") from None


def fail(message: str) -> NoReturn:
    """Print ``netbench: error: MESSAGE`` on stderr and exit 2."""
    print(f"netbench: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def one_line(exc: pydantic.ValidationError, option_names: dict[str, str] | None = None) -> str:
    """The first validation error as one line that names the CLI option (``--topk``), not the field."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ()))
    message = err.get("msg", "invalid value").removeprefix("Value error, ")
    if not field:  # a check across fields ("topk 100 is larger than a chunk"): named by its first word
        first = message.split(" ", 1)[0]
        option = (option_names or {}).get(first, "")
    else:
        option = (option_names or {}).get(field, "--" + field.replace("_", "-"))
    value = err.get("input")
    shown = f" (got {value!r})" if field and not isinstance(value, dict) and "got " not in message and str(value) not in message else ""
    return f"{option}: {message}{shown}" if option else message
