"""The replicators `plan` and `calibrate` price or measure: ``--replicator``'s comma list and the settings beside it,
built into the model's schemes with one-line errors that name the option."""

from __future__ import annotations

from typing import Any

import pydantic

from netbench.cli.errors import UserError
from netbench.cli.fields import REPLICATOR, option_names
from netbench.model.schemes import Scheme, SchemeSettings, build_scheme, parse_scheme_list
from netbench.validation import one_line

REPLICATOR_OPTION_NAMES = option_names(REPLICATOR)  # for one-line errors that name the option


def parse_schemes(names_text: str, settings: SchemeSettings) -> list[Scheme]:
    """Each replicator ``--replicator`` names (a comma list, or all) as a scheme with ``settings``."""
    try:
        names = parse_scheme_list(names_text)
    except ValueError as exc:
        raise UserError(f"--replicator: {exc}") from None
    schemes = []
    for name in names:
        try:
            schemes.append(build_scheme(name, settings))
        except pydantic.ValidationError as exc:
            raise UserError(f"{one_line(exc, REPLICATOR_OPTION_NAMES, options=True)} [replicator {name}]") from None
    return schemes


def scheme_settings(**kwargs: Any) -> SchemeSettings:
    """The replicator settings given on the command line, checked together."""
    try:
        return SchemeSettings(**kwargs)
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, REPLICATOR_OPTION_NAMES, options=True)) from None
