"""Every command-line setting as plain data: one :class:`Setting` per option, declared beside the code it configures.

A setting says its option's name, the field it sets, its unit (how the typed text is read), its range, its default and
its help; a command that needs another default or a note of its own says so in ``overrides``, with why. Commands
derive their options from these declarations (:mod:`netbench.cli.options` renders them), errors name an option as
``SETTING.name``, and ``tests/test_cli_options.py`` fails when a long option is declared anywhere else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from netbench.units import UnitError, parse_fraction, parse_rate, parse_size, parse_time

__all__ = [
    "UNITS",
    "KEEP",
    "DRY_RUN",
    "MAX_LIST_ITEMS",
    "MAX_TEXT_CHARS",
    "Override",
    "Setting",
    "SettingError",
    "table",
]

MAX_LIST_ITEMS = 32  # values of one comma list (--nodes 2,4,8, -r a,b): each is a plan row or a sweep axis value
MAX_TEXT_CHARS = 4096  # one option's text: a path, a comma list, a name


class SettingError(ValueError):
    """A typed value that does not parse or lies out of range; ``str()`` is one line naming the option."""


def _number(text: str | float | int) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise UnitError(f"expected a number, got {text!r}", "expected a number") from None


def _count(text: str | float | int) -> int:
    value = _number(text)
    if not value.is_integer():
        raise UnitError(f"expected a whole number, got {text!r}", "expected a whole number")
    return int(value)


# unit -> how the typed text is read (SI numbers: bits per second, seconds, bytes, fractions); None: taken as typed
UNITS: Mapping[str, Callable[[Any], Any] | None] = MappingProxyType(
    {
        "rate": parse_rate,
        "time": parse_time,
        "fraction": parse_fraction,
        "count": _count,
        "bytes": parse_size,
        "factor": _number,
        "choice": None,
        "path": None,
        "flag": None,
        "text": None,
    }
)


class _Keep:
    """An override's default when the command keeps the setting's own."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


@dataclass(frozen=True)
class Override:
    """What one command changes of a setting, and why (the why is for the reader of the declaration)."""

    why: str
    default: Any = KEEP
    help: str = ""  # the command's own help, in place of the setting's
    note: str = ""  # what the command adds to the setting's help: its range, a comma list


@dataclass(frozen=True)
class Setting:
    """One option: ``name`` (``--bw``) sets ``field``; its text is read as ``unit`` and must lie in ``range``."""

    name: str
    field: str
    unit: str
    help: str
    default: Any = None
    range: tuple[float | None, float | None] | None = None
    short: str = ""
    off: str = ""  # a flag's switch that turns it off ("--no-sign"), if it has one
    choices: tuple[str, ...] = ()
    axis: bool = False  # a sweep grid axis: a comma list of values
    scope: str = ""  # where it applies ("--topology sites"): left out there, it takes its default; elsewhere unset
    overrides: Mapping[str, Override] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.name.startswith("--") and "/" not in self.name, self.name
        assert self.unit in UNITS, f"{self.name}: unknown unit {self.unit}"
        assert self.help.endswith((".", "]", ")")), f"{self.name}: end its help with a period"

    def default_for(self, command: str = "") -> Any:
        """The default ``command`` gives this setting: its override's, else the setting's own."""
        override = self.overrides.get(command)
        return self.default if override is None or override.default is KEEP else override.default

    def help_for(self, command: str = "", note: str = "") -> str:
        """The help ``command`` shows: its override's help or the setting's, with the command's note."""
        override = self.overrides.get(command)
        text = override.help if override is not None and override.help else self.help
        note = note or (override.note if override is not None else "")
        text = f"{text.removesuffix('.')}{note}." if note else text
        if not self.scope:
            return text
        shown = (
            f" [default {self.default:g}]" if isinstance(self.default, (int, float)) else f" [default {self.default}]"
        )
        return f"{self.scope}: {text.removesuffix('.')}{'' if self.default is None else shown}."

    def parse(self, value: Any) -> Any:
        """``value`` read in this setting's unit and range-checked; :class:`SettingError` names the option."""
        if value is None:
            return None
        reader = UNITS[self.unit]
        try:
            parsed = reader(value) if reader is not None and isinstance(value, str) else value
        except UnitError as exc:
            raise SettingError(f"{self.name}: {exc}") from None
        if self.choices and parsed not in self.choices:
            raise SettingError(f"{self.name}: choose {', '.join(self.choices)}, got {parsed!r}")
        self.check_range(parsed)
        return parsed

    def check_typed(self, value: Any) -> None:
        """What the command line gave, checked before the command reads it: a number finite and within ``range``, a
        text of at most MAX_TEXT_CHARS characters and MAX_LIST_ITEMS comma-separated values. :class:`SettingError`
        otherwise (a list of a thousand node counts costs a thousand plans; 1e-320 or 1e308 overflows a model)."""
        if isinstance(value, str):
            if len(value) > MAX_TEXT_CHARS:
                raise SettingError(f"{self.name}: at most {MAX_TEXT_CHARS} characters")
            if value.count(",") >= MAX_LIST_ITEMS:
                raise SettingError(f"{self.name}: at most {MAX_LIST_ITEMS} comma-separated values")
        elif isinstance(value, float) and not math.isfinite(value):
            raise SettingError(f"{self.name}: must be a finite number, got {value:g}")
        self.check_range(value)

    def check_range(self, value: Any) -> None:
        """:class:`SettingError` when ``value`` lies outside ``range`` (nan included)."""
        if self.range is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        low, high = self.range
        if math.isnan(value) or (low is not None and value < low) or (high is not None and value > high):
            bounds = f"between {_shown(low)} and {_shown(high)}" if low is not None and high is not None else ""
            bounds = bounds or (f"at least {_shown(low)}" if low is not None else f"at most {_shown(high)}")
            raise SettingError(f"{self.name}: must be {bounds}, got {_shown(value)}")


def _shown(value: float) -> str:
    """A bound or a value as a user types it: a whole number in full (a seed's 4294967295, not 4.29497e+09)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def table(settings: Iterable[Setting]) -> Mapping[str, Setting]:
    """Field -> setting, in declaration order; two settings of one field or one name are a mistake."""
    settings = tuple(settings)
    by_field = {s.field: s for s in settings}
    assert len(by_field) == len(settings) == len({s.name for s in settings}), "a field or option declared twice"
    return MappingProxyType(by_field)


# A command that can show what it would do without doing it (clean, sweep) says what it lists in its override.
DRY_RUN = Setting(
    "--dry-run",
    "dry_run",
    "flag",
    "Show what the command would do and exit.",
    default=False,
    overrides={
        "clean": Override(why="clean lists the leftovers it would remove", help="List what would be removed."),
        "sweep": Override(why="a sweep lists its grid's points", help="List the points and exit."),
    },
)
