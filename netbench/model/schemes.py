"""Which exchanges each scheme makes per step, and whether its communication overlaps compute.

Implemented replicators declare their own payload (``netbench.replicators.declared_payload``,
owned by the replicators): the model imports it and never re-derives those formulas, so a change
to a replicator's wire format changes the plan too. Planning-only schemes (lowrank, mtdao) take
their formulas from :mod:`netbench.model.payloads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence, Union

from pydantic import BaseModel, ConfigDict, Field

from netbench.model.payloads import PLANNED_SCHEMES, LowRankConfig, MTDAOConfig, lowrank_payload, mtdao_payload
from netbench.model.traffic import Exchange, from_decl
from netbench.replicators.config import REPLICATOR_NAMES, ReplicatorConfig
from netbench.shapes import ParamShape

__all__ = [
    "SCHEME_NAMES", "OVERLAPS", "SchemeSettings", "Scheme", "SchemeUnavailable", "build_scheme", "scheme_from_config",
    "parse_scheme_list",
]

SCHEME_NAMES: tuple[str, ...] = (*REPLICATOR_NAMES, *PLANNED_SCHEMES)

# Does the scheme's communication overlap the backward pass? None of ours does yet; a scheme that
# does gets step = compression + max(compute, comm) instead of the sum.
OVERLAPS: dict[str, bool] = {name: False for name in SCHEME_NAMES}


class SchemeUnavailable(RuntimeError):
    """A scheme's payload declaration cannot be imported (e.g. its replicator is not installed)."""


class SchemeSettings(BaseModel):
    """Every knob any scheme reads; each scheme validates the ones it uses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grad_dtype: str = "fp32"
    topk: int = 32
    chunk: int = 64
    rate: float = 0.1
    sync_every: int = 10
    value_dtype: str = "fp32"
    index_dtype: str = "auto"
    rank: float = 4
    mtdao_every: tuple[int, int, int] | None = Field(None, description="K_x, K_1, K_v; None: all equal to sync_every")


SchemeConfig = Union[ReplicatorConfig, LowRankConfig, MTDAOConfig]


@dataclass(frozen=True)
class Scheme:
    """A named scheme with validated settings; knows its exchanges for any world size."""

    name: str
    config: SchemeConfig
    overlap: bool = False

    def exchanges(self, shapes: Sequence[ParamShape], world_size: int) -> tuple[Exchange, ...]:
        """The scheme's traffic among ``world_size`` replicating peers."""
        if isinstance(self.config, LowRankConfig):
            return lowrank_payload(shapes, self.config)
        if isinstance(self.config, MTDAOConfig):
            return mtdao_payload(shapes, self.config)
        return _declared(tuple(shapes), self.config, world_size)


@lru_cache(maxsize=4096)
def _declared(shapes: tuple[ParamShape, ...], config: ReplicatorConfig, world_size: int) -> tuple[Exchange, ...]:
    try:
        from netbench.replicators import declared_payload
    except ImportError as exc:
        raise SchemeUnavailable(
            f"replicator {config.name!r}: its payload declaration (netbench.replicators.declared_payload) is not available: {exc}"
        ) from None
    return (from_decl(declared_payload(list(shapes), config, world_size), label=config.name),)


def build_scheme(name: str, settings: SchemeSettings) -> Scheme:
    """Validate ``settings`` for scheme ``name`` (raises pydantic.ValidationError or ValueError)."""
    if name == "lowrank":
        config: SchemeConfig = LowRankConfig(rank=settings.rank, dtype=settings.grad_dtype)
    elif name == "mtdao":
        kx, k1, kv = settings.mtdao_every or (settings.sync_every,) * 3
        config = MTDAOConfig(params_every=kx, m1_every=k1, m2_every=kv, dtype=settings.grad_dtype)
    elif name in REPLICATOR_NAMES:
        config = ReplicatorConfig(
            name=name, grad_dtype=settings.grad_dtype, topk=settings.topk, chunk=settings.chunk, rate=settings.rate,
            sync_every=settings.sync_every, value_dtype=settings.value_dtype, index_dtype=settings.index_dtype,
        )
    else:
        raise ValueError(f"unknown replicator {name!r} (choose from {', '.join(SCHEME_NAMES)}, or all)")
    return Scheme(name=name, config=config, overlap=OVERLAPS[name])


def scheme_from_config(config: ReplicatorConfig) -> Scheme:
    """The scheme of a replicator config as ``run``/``sweep`` hold it, to predict what that run should measure."""
    return Scheme(name=config.name, config=config, overlap=OVERLAPS[config.name])


def parse_scheme_list(text: str) -> list[str]:
    """``dct``, ``dct,full`` or ``all`` to a list of scheme names, in the order given, without repeats."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(SCHEME_NAMES)
    unknown = [n for n in names if n not in SCHEME_NAMES]
    if unknown or not names:
        raise ValueError(f"unknown replicator {', '.join(unknown) or repr(text)} (choose from {', '.join(SCHEME_NAMES)}, or all)")
    return list(dict.fromkeys(names))
