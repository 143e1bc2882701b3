"""The one way a pydantic validation error, or any other exception, becomes one line for the user.

Every place that validates user input (command-line options, scenario files, worker specs,
calibration files) reports the first error the same way: where it is (the option the user typed,
or the file and field), what is wrong, and the offending value when the message does not already
show it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic


def _location(err: Mapping[str, Any]) -> tuple[str, str]:
    """(dotted field, list index suffix): ``("grid.bw", "[1]")``."""
    field, index = "", ""
    for part in err.get("loc", ()):
        if isinstance(part, int):
            index += f"[{part}]"
        else:
            field += f".{part}" if field else str(part)
    return field, index


def as_option(field: str) -> str:
    """The option a field would have by convention: ``sync_every`` -> ``--sync-every``."""
    return "--" + field.replace("_", "-")


def one_line(
    exc: pydantic.ValidationError, names: Mapping[str, str] | None = None, *, prefix: str = "", options: bool = False
) -> str:
    """The first validation error as ``WHERE: MESSAGE (got VALUE)``.

    WHERE is ``names[field]`` when the field came from an option the user typed (``--topk``);
    otherwise, with ``options``, the field spelled as an option, else ``prefix`` + the field
    (``scenario.toml: grid.bw[1]``). A check across fields has no field: it is named by the
    message's first word when ``names`` knows it ("topk 100 is larger than a chunk" -> ``--topk``).
    """
    names = names or {}
    err = exc.errors()[0]
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    field, index = _location(err)
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
        if field
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
