"""Which exchanges each scheme makes per step, and whether its communication overlaps compute.

Implemented replicators declare their own payload (``netbench.declarations.registry.declared_payload``,
owned by the replicators, torch-free): the model imports it and never re-derives those formulas,
so a change to a replicator's wire format changes the plan too. A declaration with several parts
(two dependent rounds, states synchronised on their own periods) becomes one exchange per part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, create_model

from netbench.declarations.config import ReplicatorConfig, fields_with_role
from netbench.declarations.registry import REGISTRY, declared_payload, names, spec
from netbench.declarations.spec import PayloadDecl
from netbench.model.exchange import Exchange, from_decl, lasting, with_free_runs
from netbench.shapes import ParamShape

__all__ = [
    "CALIBRATE_SETTING_FIELDS",
    "PLAN_SETTING_FIELDS",
    "SchemeSettings",
    "Scheme",
    "SchemeUnavailable",
    "build_scheme",
    "scheme_from_config",
    "parse_scheme_list",
    "declared",
    "ShapeKey",
    "shape_key",
]


class SchemeUnavailable(RuntimeError):
    """A scheme's payload declaration cannot be imported (e.g. its replicator is not installed)."""


def _in_declaration_order(fields: set[str]) -> tuple[str, ...]:
    return tuple(f for f in ReplicatorConfig.model_fields if f in fields)


# The replicator settings ``plan`` takes: the payload settings (changing the bytes a step sends or their pricing) that
# some replicator's declaration reads.
PLAN_SETTING_FIELDS: tuple[str, ...] = _in_declaration_order(
    set(fields_with_role("payload")) & {f for declared in REGISTRY.values() for f in declared.options}
)
# The replicator settings ``calibrate`` takes: those that change some replicator's codec cost (its declaration's
# ``cost_settings``, by which the calibration keys the cost), and the gradients' dtype every codec reads.
CALIBRATE_SETTING_FIELDS: tuple[str, ...] = _in_declaration_order(
    {f for declared in REGISTRY.values() for f in declared.cost_settings} | {"grad_dtype"}
)
SchemeSettings = create_model(
    "SchemeSettings",
    __config__=ConfigDict(extra="forbid", frozen=True),
    __doc__="The replicator settings ``plan`` and ``calibrate`` take (the fields of ReplicatorConfig in "
    "PLAN_SETTING_FIELDS and CALIBRATE_SETTING_FIELDS).",
    **{
        name: (ReplicatorConfig.model_fields[name].annotation, ReplicatorConfig.model_fields[name])
        for name in _in_declaration_order(set(PLAN_SETTING_FIELDS) | set(CALIBRATE_SETTING_FIELDS))
    },
)


@dataclass(frozen=True)
class Scheme:
    """A named scheme with validated settings; knows its exchanges for any world size.

    ``overlap``: its communication overlaps the backward pass (its declaration's ``overlaps_compute``),
    so a step costs compression + max(compute, comm) instead of the sum. ``phase``: which of its declared phases a
    step is priced in: ``lasting`` (the steps of a long run) or ``dense`` (the steps of the phases that end, which open
    the run: 1-bit Adam's dense warm-up, no codec on them).
    """

    name: str
    config: ReplicatorConfig
    overlap: bool = False
    phase: Literal["lasting", "dense"] = "lasting"

    def exchanges(self, shapes: Sequence[ParamShape], world_size: int) -> tuple[Exchange, ...]:
        """The scheme's traffic among ``world_size`` replicating peers on a step of its phase."""
        if self.phase == "dense":
            return _opening(shape_key(shapes), self.config, world_size)
        return _declared(shape_key(shapes), self.config, world_size)

    def ended(self, shapes: Sequence[ParamShape], world_size: int) -> tuple[Exchange, ...]:
        """The exchanges of its phases that end (1-bit Adam's dense warm-up): not priced per step, but the
        connections carried them before the steps that are (their bursts set bbr's pacing)."""
        if self.phase == "dense":
            return ()
        return _ended(shape_key(shapes), self.config, world_size)

    def dense_steps(self, shapes: Sequence[ParamShape], world_size: int) -> int:
        """How many steps open a run before the lasting phase (the declaration's
        :meth:`~netbench.declarations.spec.PayloadDecl.dense_steps`: 1-bit Adam's ``freeze_step``)."""
        return declared(shape_key(shapes), self.config, world_size).dense_steps()

    @property
    def runs_codec(self) -> bool:
        """Whether its steps run the replicator's codec: those of the lasting phase (the opening phases send their
        tensors as they are)."""
        return self.phase == "lasting"

    def dense_phase(self) -> Scheme:
        """This scheme priced on a step of its opening phases: their exchanges, and no codec (its replicator encodes
        nothing before the lasting phase)."""
        return replace(self, phase="dense")


class ShapeKey(tuple):
    """A shape list as a cache key that hashes once: a plan looks the same model's payload up thousands of times,
    and hashing hundreds of shapes each time costs more than the look-up saves."""

    _hash: int

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = tuple.__hash__(self)
            return self._hash


def shape_key(shapes: Sequence[ParamShape]) -> ShapeKey:
    """``shapes`` as a :class:`ShapeKey` (itself when it already is one)."""
    return shapes if isinstance(shapes, ShapeKey) else ShapeKey(shapes)


@lru_cache(maxsize=4096)
def declared(shapes: tuple[ParamShape, ...], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
    """The replicator's payload declaration for these shapes, settings and world size, computed once: the
    planner's searches ask for the same one at every bandwidth they try, and a transform codec's bucket
    cut walks every tile row of the model."""
    try:
        return declared_payload(list(shapes), config, world_size)
    except ImportError as exc:
        raise SchemeUnavailable(
            f"replicator {config.name!r}: its payload declaration is not available: {exc}"
        ) from None


@lru_cache(maxsize=4096)
def _declared(shapes: tuple[ParamShape, ...], config: ReplicatorConfig, world_size: int) -> tuple[Exchange, ...]:
    parts = lasting(declared(shapes, config, world_size).parts())
    return with_free_runs(
        tuple(from_decl(p, label=f"{config.name}:{p.label}" if p.label else config.name) for p in parts)
    )


@lru_cache(maxsize=4096)
def _opening(shapes: tuple[ParamShape, ...], config: ReplicatorConfig, world_size: int) -> tuple[Exchange, ...]:
    """The exchanges of the phases that end, each priced at its share of the steps they span: made on ``c`` of the
    ``n`` opening steps, it is priced as made every ``round(n / c)`` steps (1-bit Adam's warm-up: every step; 0/1
    Adam's variance updates: a few of its many compressed steps)."""
    decl = declared(shapes, config, world_size)
    parts = decl.parts()
    opening, steps = tuple(p for p in parts if p not in lasting(parts)), decl.dense_steps()
    shared = (replace(p, period=max(1, round(steps / p.times_made())), offset=0) for p in opening if p.times_made())
    return with_free_runs(
        tuple(from_decl(p, label=f"{config.name}:{p.label}" if p.label else config.name) for p in shared)
    )


@lru_cache(maxsize=4096)
def _ended(shapes: tuple[ParamShape, ...], config: ReplicatorConfig, world_size: int) -> tuple[Exchange, ...]:
    parts = declared(shapes, config, world_size).parts()
    return tuple(from_decl(p) for p in parts if p not in lasting(parts))


def build_scheme(name: str, settings: BaseModel) -> Scheme:
    """Validate ``settings`` for scheme ``name`` (raises pydantic.ValidationError or ValueError)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown replicator {name!r} (choose from {', '.join(names())}, or all)")
    config = ReplicatorConfig(name=name, **settings.model_dump())
    return Scheme(name=name, config=config, overlap=spec(name).overlaps_compute)


def scheme_from_config(config: ReplicatorConfig) -> Scheme:
    """The scheme of a replicator config as ``run``/``sweep`` hold it, to predict what that run should measure."""
    return Scheme(name=config.name, config=config, overlap=spec(config.name).overlaps_compute)


def parse_scheme_list(text: str) -> list[str]:
    """``NAME``, ``NAME,OTHER`` or ``all`` to a list of scheme names, in the order given, without repeats."""
    listed = [n.strip().lower() for n in text.split(",") if n.strip()]
    if listed == ["all"]:
        return list(REGISTRY)
    unknown = [n for n in listed if n not in REGISTRY]
    if unknown or not listed:
        raise ValueError(
            f"unknown replicator {', '.join(unknown) or repr(text)} (choose from {', '.join(REGISTRY)}, or all)"
        )
    return list(dict.fromkeys(listed))
