"""The one way a pydantic validation error, or any other exception, becomes one line for the user.

Every place that validates user input (command-line options, scenario files, worker specs,
calibration files) reports the first error the same way: where it is (the option the user typed,
or the file and field), what is wrong, and the offending value when the message does not already
show it. A value read from a file someone else wrote is never shown (``echo=False``): the file may
be one only root can read, named by a scenario from a pull request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

import pydantic

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")

# Text a file holds that netbench shows (a calibration's host, a note): one line of printable characters, so that
# none reaches a terminal as an escape sequence or rewrites what is around it.
ShownText = Annotated[str, pydantic.Field(max_length=2000, pattern=r"^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*$")]


def _location(err: Mapping[str, Any], echo: bool) -> tuple[str, str]:
    """(dotted field, list index suffix): ``("grid.bw", "[1]")``; without ``echo``, a key that is not a plain name is
    not shown."""
    field, index = "", ""
    for part in err.get("loc", ()):
        if isinstance(part, int):
            index += f"[{part}]"
        else:
            text = str(part) if echo or _PLAIN_KEY.fullmatch(str(part)) else "(a key not shown)"
            field += f".{text}" if field else text
    return field, index


def message_of(err: Mapping[str, Any], echo: bool = True) -> str:
    """The error's own words; without ``echo``, a unit or shape error's words without the value (their ``unquoted``)."""
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if echo:
        return message
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(getattr(cause, "unquoted", None), str):  # a UnitError or ShapeError: its words without the value
        return cause.unquoted
    value = err.get("input")
    if isinstance(value, str) and value and value in message:
        return message.replace(repr(value), "the value").replace(value, "the value")
    return message


def as_option(field: str) -> str:
    """The option a field would have by convention: ``sync_every`` -> ``--sync-every``."""
    return "--" + field.replace("_", "-")


def one_line(
    exc: pydantic.ValidationError,
    names: Mapping[str, str] | None = None,
    *,
    prefix: str = "",
    options: bool = False,
    echo: bool | None = True,
) -> str:
    """The first validation error as ``WHERE: MESSAGE (got VALUE)``.

    WHERE is ``names[field]`` when the field came from an option the user typed (``--topk``);
    otherwise, with ``options``, the field spelled as an option, else ``prefix`` + the field
    (``scenario.toml: grid.bw[1]``). A check across fields has no field: it is named by the
    message's first word when ``names`` knows it ("topk 100 is larger than a chunk" -> ``--topk``).
    ``echo=False`` (a file someone else wrote): neither the value nor a key that is not a plain name is shown;
    ``echo=None``: the value only where ``names`` says the field came from an option the user typed.
    """
    names = names or {}
    err = exc.errors()[0]
    if echo is None:
        echo = _location(err, True)[0] in names
    message = message_of(err, echo)
    field, index = _location(err, echo)
    if message.startswith("[") and "] " in message:  # an item of a list: the validator put its index first
        index, _, message = message.partition("] ")
        index += "]"
    if field in names:
        where = names[field]
    elif not field:
        where = names.get(message.split(" ", 1)[0], "") if options else prefix.removesuffix(": ")
    else:
        where = as_option(field) if options else prefix + field + index
    value = err.get("input")
    shown = (
        f" (got {value!r})"
        if echo
        and field
        and not isinstance(value, (dict, list))
        and err.get("type") != "missing"
        and "got " not in message
        and str(value) not in message
        else ""
    )
    return f"{where}: {message}{shown}" if where else message


def error_text(exc: BaseException) -> str:
    """What an exception says to a user: its own message, never its class (the traceback, where one is kept, has
    that); a key that was missing, or what kind of stop it was where the exception carries no message."""
    if isinstance(exc, KeyError) and exc.args:
        return f"missing {exc.args[0]!r}"
    text = str(exc).strip()
    if text:
        return text
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return "failed without saying why"
