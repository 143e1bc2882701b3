"""Typer options rendered from the settings' declarations (:mod:`netbench.settings`): no option is named here.

A command takes a group of settings as one parameter (``network: Settings = FROM_FIELDS`` with
``@expand(network=settings_group("run", NETWORK, TCP, TOPOLOGY))``): typer sees one option per setting, and the command
receives ``{field: value}``. A single setting renders as one option with :func:`option`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from netbench.settings import Setting, SettingError

# unit -> what the option parses on the command line (the setting reads the text in its unit afterwards)
_CLI_TYPES: dict[str, Any] = {
    "rate": str,
    "time": str,
    "fraction": str,
    "text": str,
    "choice": str,
    "count": int,
    "bytes": int,
    "factor": float,
    "path": Path,
    "flag": bool,
}


def _unset_where_scoped(setting: Setting, command: str) -> Any:
    """A scoped setting's option defaults to None: its default applies only where its scope does."""
    return None if setting.scope else setting.default_for(command)


def cli_type(setting: Setting, command: str = "", *, optional: bool = False) -> Any:
    """What ``command``'s option parses: the unit's type, or None as well where the option may be left out."""
    base = _CLI_TYPES[setting.unit]
    if setting.unit == "flag":
        return base
    if optional and setting.axis:
        return str | None  # a comma list, read by the scenario's grid
    return base | None if optional or _unset_where_scoped(setting, command) is None else base


def _checked(setting: Setting) -> Any:
    """The option's callback: what was typed checked against the declaration (:meth:`Setting.check_typed`) before
    the command runs, so every command that renders the setting holds the same bounds."""

    def check(value: Any) -> Any:
        if value is not None:
            try:
                setting.check_typed(value)
            except SettingError as exc:
                raise typer.BadParameter(str(exc).removeprefix(f"{setting.name}: ")) from None
        return value

    return check


def option(setting: Setting, command: str = "", *, note: str = "", optional: bool = False) -> Any:
    """The typer option of ``setting`` in ``command``; ``optional``: default None (unset: the scenario's value)."""
    name = f"{setting.name}/{setting.off}" if setting.off else setting.name
    decls = (name, setting.short) if setting.short else (name,)
    if optional and setting.unit != "flag":
        text = setting.help_for(command, note)
        default = setting.default_for(command)
        stated = setting.scope or (command in setting.overrides and setting.overrides[command].help)
        if not stated and default is not None:  # a scoped setting's help, or a command's own, states its default
            shown = f"{default:g}" if isinstance(default, (int, float)) and not isinstance(default, bool) else default
            text = f"{text.removesuffix('.')} (default {shown})."
        return typer.Option(None, *decls, help=escape(text), callback=_checked(setting))
    # escaped: "[default 2]" is text, not rich markup
    return typer.Option(
        _unset_where_scoped(setting, command),
        *decls,
        help=escape(setting.help_for(command, note)),
        callback=_checked(setting),
    )


@dataclass(frozen=True)
class SettingsGroup:
    """Some settings written into a command's signature in place of one parameter (see ``fields.expand``)."""

    command: str
    settings: tuple[Setting, ...]
    optional: bool = False
    axis_note: str = ""  # what an axis setting adds to its help here ("; a comma list")

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(s.field for s in self.settings)

    def parameters(self) -> list[inspect.Parameter]:
        return [
            inspect.Parameter(
                s.field,
                inspect.Parameter.KEYWORD_ONLY,
                default=option(s, self.command, optional=self.optional, note=self.axis_note if s.axis else ""),
                annotation=cli_type(s, self.command, optional=self.optional),
            )
            for s in self.settings
        ]


def settings_group(
    command: str,
    *tables: Mapping[str, Setting],
    optional: bool = False,
    axis_note: str = "",
    only: tuple[str, ...] = (),
) -> SettingsGroup:
    """Every setting of ``tables`` (those of ``only``'s fields, if given), in declaration order, as ``command`` takes
    them."""
    chosen = tuple(s for t in tables for s in t.values() if not only or s.field in only)
    return SettingsGroup(command, chosen, optional, axis_note)
