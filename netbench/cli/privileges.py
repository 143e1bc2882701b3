"""What a command needs before it creates anything: privileges to build namespaces, torch to train."""

from __future__ import annotations

from netbench.cli.errors import UserError
from netbench.rootless import RootlessError, ensure_privileges
from netbench.torch_presence import torch_installed


def require_privileges() -> None:
    """Root or the rootless user namespace, else one UserError line saying why neither works here."""

    try:
        ensure_privileges()
    except RootlessError as exc:
        raise UserError(str(exc)) from None


def torch_missing_message(command: str) -> str:
    return f"{command} trains with torch, which is not installed (pip install torch; plan works without it)"


def require_torch(command: str) -> None:
    """torch importable, else one UserError line: checked before the run folder or a namespace exists."""
    if not torch_installed():
        raise UserError(torch_missing_message(command))
