"""Reading the environment: the one way netbench turns a variable someone else set into a value.

netbench runs as root under torchrun, schedulers and CI runners, whose environment others set: a variable may hold
a token, an escape sequence for the terminal, or ten thousand digits. So every variable netbench takes a value from
is read here, by one rule:

- each reader says what the variable must be (a whole number in a range, one of some words, a name of a given
  form) and checks it before the value is used; a number's length is capped before it is converted;
- a bad value is one :class:`BadEnvironment` line that names the variable and what it must be, and **never shows
  the value**;
- an unset (or empty) variable gives the caller's default.

Only values netbench has checked (a whole number in range, a word from its own list) are shown afterwards.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from netbench.untrusted import MAX_INT_DIGITS

__all__ = ["BadEnvironment", "whole_number", "one_of", "matching"]

_DIGITS = re.compile(rf"[+-]?[0-9]{{1,{MAX_INT_DIGITS}}}")  # longer text is refused before it is converted


class BadEnvironment(ValueError):
    """A variable of the environment that cannot be used: one line naming it, never showing its value."""


def _raw(var: str, env: Mapping[str, str] | None) -> str | None:
    value = (os.environ if env is None else env).get(var)
    return value if value else None


def whole_number(
    var: str, *, low: int, high: int, default: int | None = None, env: Mapping[str, str] | None = None
) -> int | None:
    """``$var`` as a whole number from ``low`` to ``high``; ``default`` where it is unset or empty."""
    value = _raw(var, env)
    if value is None:
        return default
    text = value.strip()
    if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
        raise BadEnvironment(f"${var} must be a whole number from {low} to {high}")
    return int(text)


def one_of(var: str, choices: Sequence[str], default: str, env: Mapping[str, str] | None = None) -> str:
    """``$var`` as one of ``choices`` (case and surrounding blanks ignored); ``default`` where it is unset or empty."""
    value = _raw(var, env)
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word not in choices:
        raise BadEnvironment(f"${var} must be one of {', '.join(choices)}")
    return word


def matching(
    var: str, form: re.Pattern[str], what: str, default: str | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """``$var`` where it is ``form`` in full (``what`` says so in words); ``default`` where it is unset or empty."""
    value = _raw(var, env)
    if value is None:
        return default
    if not form.fullmatch(value):
        raise BadEnvironment(f"${var} must be {what}")
    return value
