"""Validated settings of every replicator (shared by the CLI, the workers and the analytic model), composed from the
declarations' settings classes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from netbench.declarations.registry import REGISTRY, names_sentence, spec
from netbench.declarations.shared_settings import FILE_ONLY, ReplicatorSettings


def _settings_classes() -> tuple[type[ReplicatorSettings], ...]:
    """Every declaration's settings class, once each, in listing order."""
    return tuple(dict.fromkeys(declared.settings for declared in REGISTRY.values() if declared.settings is not None))


def _bases() -> tuple[type[ReplicatorSettings], ...]:
    """The settings classes as the config's bases: a class before any it extends (one declaration's settings may
    extend another's), so their composition has one method resolution order."""
    return tuple(sorted(reversed(_settings_classes()), key=lambda settings: -len(settings.__mro__)))


class CommonSettings(ReplicatorSettings):
    """What every replicator takes: which one it is, and the base optimizer that applies its synchronised update."""

    # A description is also the help of the field's command-line option (netbench/cli/fields.py); a replicator's own
    # settings get the replicators whose declarations take them in front (see _name_the_takers below).
    name: str = Field("dct", description=f"{names_sentence()}.")
    # auto: the codec's own (its ``default_optimizer``); decoupled_adamw: AdamW with local moments whose direction is
    # what the replicator synchronises; a codec that brings its own optimizer says what it makes of this one
    optimizer: Literal["auto", "sgd", "adamw", "decoupled_adamw"] = Field(
        "auto",
        description="Base optimizer: auto (the replicator's own), sgd, adamw, or decoupled_adamw (AdamW with local "
        "moments; the replicator synchronises its direction).",
    )
    lr: float = Field(0.0, ge=0.0, description="Base learning rate; 0 picks the replicator's default.")

    @field_validator("name")
    @classmethod
    def _name_declared(cls, v: str) -> str:
        spec(v)  # ValueError naming the declared replicators
        return v


class ReplicatorConfig(*_bases(), CommonSettings):
    """Everything a replicator needs besides the parameters and the process group.

    One object travels from the CLI to every worker (as JSON) and into the model, so the bytes the
    model predicts and the bytes the workers send are computed from the same settings. It is composed of every
    declaration's settings class (each field declared once, beside the replicator that takes it, or in
    :mod:`netbench.declarations.shared_settings` where several do), so a setting of one replicator may be given
    beside another, which ignores it (a sweep sets them for every replicator it runs).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, data: Any) -> Any:
        """A setting under a former name (its settings class's ``FORMER_NAMES``: ``beta``) reads as the field it
        names for this replicator; a replicator that takes no field of that name drops it (it means nothing to it,
        and stored runs carry every setting)."""
        if not isinstance(data, dict):
            return data
        name = data.get("name", cls.model_fields["name"].default)
        if not isinstance(name, str) or name not in REGISTRY:
            return data  # the name's own validator says what is wrong
        own = former_names(REGISTRY[name].settings)
        every = {old for settings in _settings_classes() for old in former_names(settings)}
        data = dict(data)
        for old in every & set(data):
            value = data.pop(old)
            field = own.get(old)
            if field is None:
                continue
            if field in data:
                raise ValueError(f"{old} is the former name of {field}: give only {field}")
            data[field] = value
        return data


def former_names(settings: type[ReplicatorSettings] | None) -> dict[str, str]:
    """Former setting name -> the field it names, for a replicator whose settings class is ``settings``."""
    if settings is None:
        return {}
    return {
        old: new for klass in reversed(settings.__mro__) for old, new in vars(klass).get("FORMER_NAMES", {}).items()
    }


def _name_the_takers() -> None:
    """Put the replicators whose declarations take each setting in front of its help (``a/b: ...``), as
    ``netbench run --help`` lists them."""
    for field, info in ReplicatorConfig.model_fields.items():
        takers = [name for name, declared in REGISTRY.items() if field in declared.options]
        if takers and info.description:
            info.description = f"{'/'.join(takers)}: {info.description}"
    ReplicatorConfig.model_rebuild(force=True)


_name_the_takers()
REGISTRY.composed(tuple(ReplicatorConfig.model_fields))


def fields_with_role(role: str) -> tuple[str, ...]:
    """The fields whose declaration gives them ``role`` (``payload``, ``file``), in declaration order."""
    return tuple(
        name
        for name, info in ReplicatorConfig.model_fields.items()
        if (info.json_schema_extra or {}).get("role") == role
    )


def command_line_fields() -> tuple[str, ...]:
    """The settings a training command (run, worker, sweep) offers as options: every field but the replicator's name
    and those only a scenario file sets, replicator by replicator in listing order, then those every one takes."""
    every = dict.fromkeys(
        [*(f for declared in REGISTRY.values() for f in declared.options), *ReplicatorConfig.model_fields]
    )
    return tuple(
        name
        for name in every
        if name != "name"
        and (ReplicatorConfig.model_fields[name].json_schema_extra or {}).get("role") != FILE_ONLY["role"]
    )
