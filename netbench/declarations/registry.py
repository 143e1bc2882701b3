"""Every replicator's declaration by name, found without importing torch, and the entry points everyone else calls.

The built-in declarations are the ``*_spec`` modules of this package, found by listing it; another module adds
one with :func:`register` when imported. The torch implementation a declaration names is imported only by
:mod:`netbench.replicators.build`, so the model, the command line's help and the reports know every replicator
on a host without torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

__all__ = [
    "REGISTRY",
    "register",
    "spec",
    "names",
    "declared_payload",
    "names_sentence",
    "baseline",
    "default_sweep",
]

_SPEC_SUFFIX = "_spec"


class Registry(Mapping[str, ReplicatorSpec]):
    """Name -> declaration, in listing order (each declaration's ``order``, then its name)."""

    def __init__(self) -> None:
        self._specs: dict[str, ReplicatorSpec] = {}
        self._found = False
        self._composed: frozenset[str] | None = None  # the config's fields, once it is composed

    def _built_in(self) -> dict[str, ReplicatorSpec]:
        if not self._found:
            self._found = True
            package = importlib.import_module(__package__)
            for module in pkgutil.iter_modules(package.__path__):
                if module.name.endswith(_SPEC_SUFFIX):
                    self.register(importlib.import_module(f"{__package__}.{module.name}").SPEC)
        return self._specs

    def register(self, declared: ReplicatorSpec) -> ReplicatorSpec:
        """Add ``declared`` (again is fine; another declaration under a taken name is an error)."""
        taken = self._specs.get(declared.name)
        if taken is not None and taken != declared:
            raise ValueError(f"replicator {declared.name!r} is declared twice")
        unknown = set(declared.options) - self._composed if self._composed is not None else set()
        if unknown:
            raise ValueError(
                f"replicator {declared.name!r} reads settings the config was composed without "
                f"({', '.join(sorted(unknown))}): register it before netbench.declarations.config is imported"
            )
        self._specs[declared.name] = declared
        return declared

    def composed(self, fields: Sequence[str]) -> None:
        """Note the fields :class:`~netbench.declarations.config.ReplicatorConfig` was composed with: a declaration
        registered afterwards may read only those (its own settings class cannot join the composition any more)."""
        self._composed = frozenset(fields)

    def __getitem__(self, name: str) -> ReplicatorSpec:
        return self._built_in()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._built_in(), key=lambda n: (self._specs[n].order, n)))

    def __len__(self) -> int:
        return len(self._built_in())


REGISTRY = Registry()


def register(declared: ReplicatorSpec) -> ReplicatorSpec:
    """Make a replicator known to every part of netbench (call it where the declaration is made)."""
    REGISTRY._built_in()  # the built-ins first, so a clash with one is caught here
    return REGISTRY.register(declared)


def names() -> tuple[str, ...]:
    """Every replicator's name, in listing order."""
    return tuple(REGISTRY)


def baseline() -> str:
    """The dense baseline's name: the replicator listed first (every gradient, all-reduced each step)."""
    return names()[0]


def default_sweep() -> list[str]:
    """The replicators a sweep scenario runs when it names none."""
    return [name for name, declared in REGISTRY.items() if declared.in_default_sweep]


def names_sentence(last: str = "or") -> str:
    """``a, b, ... or z``: the names as help texts list them, in listing order."""
    *rest, final = names()
    return f"{', '.join(rest)} {last} {final}" if rest else final


def spec(name: str) -> ReplicatorSpec:
    """The declaration of ``name``; ValueError naming the choices for a name nobody declared."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown replicator {name!r} (choose from {', '.join(REGISTRY)})") from None


def declared_payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    """Bytes one node hands to collectives per communicating step (every exchange in ``parts()``); pure."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    return spec(config.name).payload(list(shapes), config, world_size)
