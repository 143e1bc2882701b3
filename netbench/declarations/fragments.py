"""Streaming DiLoCo's fragments and their schedule, from parameter names and settings alone (no torch).

Layers: a parameter belongs to the layer its name numbers (``blocks.3.attn.weight``, ``h.0.ln_1.bias``,
``layers.12.feed_forward.w1.weight``, an ``nn.Sequential``'s ``4.weight``): the first all-digit part of the dotted
name, with what precedes it. A parameter outside every numbered layer (embeddings, the final norm, the head) joins
the layer of the parameter before it, or the first layer when none comes before. A model whose names number no
layer at all counts each parameter as a layer of its own.

Fragments: ``F`` groups of ``L / F`` layers each, F dividing L. ``strided`` puts layer i in fragment ``i mod F``
(the paper's choice: every fragment spans the depth of the model), ``sequential`` in fragment ``i // (L / F)``.

Schedule (as torchft's ``DiLoCo`` runs it): fragment i's outer step lands after inner step ``floor((i + 1) H / F)``
of every H-step cycle, so one fragment synchronises every ``H / F`` steps (rounded down; F need not divide H: the
Streaming DiLoCo paper's Table 4 runs H = 100 over 8, 16 and 36 fragments); its outer gradient leaves ``tau`` steps
earlier (``fragment_sync_delay``, below ``floor(H / F)``, so one fragment is in flight at a time) and travels while
those steps train. One fragment and no delay is DiLoCo.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from netbench.declarations.spec import SettingError

__all__ = ["FragmentError", "layer_of_each", "fragment_members", "fragment_layers", "sync_offset", "send_offset"]


class FragmentError(SettingError):
    """The model's layers cannot be split into the fragments asked for."""

    def __init__(self, problem: str) -> None:
        super().__init__("fragments", problem)


def _layer_key(name: str) -> tuple[str, ...] | None:
    """The dotted prefix up to and including the first all-digit part (``("blocks", "3")``), or None."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return tuple(parts[: i + 1])
    return None


def layer_of_each(names: Sequence[str]) -> tuple[list[int], int]:
    """(layer index of every parameter, number of layers), by the rule of this module's docstring."""
    layers, count = _layers(tuple(names))
    return list(layers), count


@lru_cache(maxsize=64)
def _layers(names: tuple[str, ...]) -> tuple[tuple[int, ...], int]:
    """:func:`layer_of_each` of one model's names, worked out once: a plan declares a fragmented payload at every
    worker count its searches try, each time from the same names."""
    keys = [_layer_key(n) for n in names]
    if all(k is None for k in keys):
        return tuple(range(len(names))), len(names)
    index: dict[tuple[str, ...], int] = {}
    layers: list[int] = []
    current = 0
    for key in keys:
        if key is not None:
            current = index.setdefault(key, len(index))
        layers.append(current)
    return tuple(layers), len(index)


def fragment_members(names: Sequence[str], fragments: int, pattern: str) -> list[list[int]]:
    """The parameter indices of each fragment, in parameter order; FragmentError unless ``fragments`` divides the
    layers."""
    layers, count = layer_of_each(names)
    if fragments < 1 or count % fragments:
        raise FragmentError(f"fragments {fragments} must divide the model's {count} layers")
    per = count // fragments
    which = (lambda layer: layer % fragments) if pattern == "strided" else (lambda layer: layer // per)
    members: list[list[int]] = [[] for _ in range(fragments)]
    for i, layer in enumerate(layers):
        members[which(layer)].append(i)
    return members


def fragment_layers(names: Sequence[str], fragments: int, pattern: str) -> tuple[list[tuple[int, ...]], int]:
    """(the layers of each fragment, in forward order; the model's layer count): what a layer schedule needs to
    send a fragment layer by layer as backward produces it."""
    layers, count = layer_of_each(names)
    members = fragment_members(names, fragments, pattern)
    return [tuple(sorted({layers[i] for i in group})) for group in members], count


def sync_offset(i: int, sync_every: int, fragments: int) -> int:
    """The step of the cycle (``s % H``) after which fragment ``i``'s outer step lands."""
    return ((i + 1) * sync_every // fragments) % sync_every


def send_offset(i: int, sync_every: int, fragments: int, delay: int) -> int:
    """The step of the cycle (``s % H``) after which fragment ``i``'s outer gradient leaves (``delay`` steps early)."""
    return (sync_offset(i, sync_every, fragments) - delay) % sync_every
