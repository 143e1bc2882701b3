"""TOML as the fuzz suites write it: a generated table rendered as a file's text."""

from __future__ import annotations

import json
import math
from typing import Any


def toml_value(v: Any) -> str:
    """One value in TOML syntax (nan and inf as TOML writes them, tables inline)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml(table: dict) -> str:
    """A table as a TOML file: one ``"key" = value`` line per key."""
    return "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()) + "\n"
