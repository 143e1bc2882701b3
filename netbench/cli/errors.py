"""One-line user errors with exit code 2, raised before anything is created."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn


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
