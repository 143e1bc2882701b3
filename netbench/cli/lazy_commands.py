"""Commands imported when they are called: the application's group holds each command as the module and function
that define it, and builds its click command (options, help) the first time the command is looked up.

Why: each command module imports what its command needs (pandas, pyroute2, networkx, the orchestrator), and importing
every one of them costs over a second before any command starts. `netbench plan` pays only for plan's modules;
`netbench --help` and the docs' reference, which list every command, still import them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from typer.core import TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

try:  # typer >= 0.16 vendors its own copy of click and no longer depends on click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer is built on click, which it then installs
    import click


class LazyCommand(NamedTuple):
    """One command: its name, where its function is (``"package.module:function"``) and typer's settings for it."""

    name: str
    target: str
    settings: Mapping[str, Any] = MappingProxyType({})

    def load(self, rich_markup_mode: Any) -> click.Command:
        """Import the command's module and build its click command from the function's signature and docstring, as
        typer builds a command registered on the application."""
        module_name, function_name = self.target.split(":")
        function = getattr(importlib.import_module(module_name), function_name)
        info = CommandInfo(name=self.name, callback=function, **self.settings)
        return get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=rich_markup_mode)


class LazyCommandMap(Mapping[str, "click.Command"]):
    """Name -> click command, in the table's order, each command built on first access and kept."""

    def __init__(self, commands: tuple[LazyCommand, ...], rich_markup_mode: Any) -> None:
        self._table = {command.name: command for command in commands}
        self._markup = rich_markup_mode
        self._built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            self._built[name] = self._table[name].load(self._markup)  # KeyError for an unknown name, as a dict
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class LazyGroup(TyperGroup):
    """The application's group: its commands are :data:`COMMANDS`, set by :func:`lazy_group` (typer builds the group
    from the application with no command registered on it)."""

    lazy_commands: tuple[LazyCommand, ...] = ()

    def __init__(self, **attrs: Any) -> None:
        attrs.pop("commands", None)
        super().__init__(commands=None, **attrs)
        self.commands = LazyCommandMap(self.lazy_commands, self.rich_markup_mode)  # type: ignore[assignment]

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        raise TypeError("netbench's commands are its table (netbench.cli.app.COMMANDS); nothing adds one")


def lazy_group(commands: tuple[LazyCommand, ...]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class whose commands are ``commands`` (typer takes the group's class, not an instance)."""
    return type("NetbenchCommands", (LazyGroup,), {"lazy_commands": commands})
