"""Become able to build namespaces (root, or root of a user namespace) before a command creates anything."""

from __future__ import annotations

from netbench.cli.errors import UserError


def require_privileges() -> None:
    """Root or the rootless user namespace, else one UserError line saying why neither works here."""
    from netbench.rootless import RootlessError, ensure_privileges

    try:
        ensure_privileges()
    except RootlessError as exc:
        raise UserError(str(exc)) from None
