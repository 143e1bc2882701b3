"""Map a list of tensors onto one flat buffer and back.

Every replicator that all-reduces a dense or subset buffer packs all tensors into one
buffer so a step costs one collective instead of one per tensor: fewer latency terms on a slow
link, and a payload that is a single number the model can predict.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["FlatLayout"]


class FlatLayout:
    """Offsets of each tensor inside a flat vector of all their elements, in order."""

    def __init__(self, tensors: Sequence[torch.Tensor]) -> None:
        self.numels = [t.numel() for t in tensors]
        self.offsets = [0]
        for n in self.numels:
            self.offsets.append(self.offsets[-1] + n)
        self.numel = self.offsets[-1]

    def views(self, flat: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Views of ``flat`` shaped like ``like`` (writing into a view writes the flat buffer)."""
        return [flat[a:b].view(t.shape) for a, b, t in zip(self.offsets, self.offsets[1:], like)]

    def _overlaps(self, lo: int, hi: int):
        """(tensor index, start inside it, flat start, length) of every tensor part inside [lo, hi)."""
        for i, (a, b) in enumerate(zip(self.offsets, self.offsets[1:])):
            s, e = max(a, lo), min(b, hi)
            if s < e:
                yield i, s - a, s, e - s

    def gather(
        self, tensors: Sequence[torch.Tensor], flat: torch.Tensor, lo: int = 0, hi: int | None = None
    ) -> torch.Tensor:
        """Copy (and cast) every tensor into its slot of ``flat`` (only positions ``lo .. hi`` when given)."""
        for i, start, at, n in self._overlaps(lo, self.numel if hi is None else hi):
            flat[at : at + n].copy_(tensors[i].reshape(-1)[start : start + n])
        return flat

    def scatter(self, flat: torch.Tensor, tensors: Sequence[torch.Tensor], lo: int = 0, hi: int | None = None) -> None:
        """Copy (and cast) each slot of ``flat`` back into its tensor (only positions ``lo .. hi`` when given)."""
        for i, start, at, n in self._overlaps(lo, self.numel if hi is None else hi):
            tensors[i].view(-1)[start : start + n].copy_(flat[at : at + n])
