"""One-line user errors with exit code 2, raised before anything is created."""

from __future__ import annotations

from pathlib import Path

from netbench.safe_files import UnsafeOutput, make_folder


class UserError(Exception):
    """Bad input: shown to the user as one line, exit code 2."""


def make_output_folder(folder: Path, option: str) -> Path:
    """Create an output folder, or a UserError naming ``option`` if a stranger could redirect writes there."""

    try:
        return make_folder(folder)
    except UnsafeOutput as exc:
        raise UserError(f"{option}: {exc}") from None
    except OSError as exc:
        raise UserError(f"{option}: cannot create {str(folder)!r}: {exc.strerror}") from None
