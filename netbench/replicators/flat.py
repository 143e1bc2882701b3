"""Map a list of tensors onto one flat buffer and back.

Every replicator that all-reduces (full, random, striding, diloco) packs all tensors into one
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

    def gather(self, tensors: Sequence[torch.Tensor], flat: torch.Tensor) -> torch.Tensor:
        """Copy (and cast) every tensor into its slot of ``flat``."""
        for a, b, t in zip(self.offsets, self.offsets[1:], tensors):
            flat[a:b].copy_(t.reshape(-1))
        return flat

    def scatter(self, flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
        """Copy (and cast) each slot of ``flat`` back into its tensor."""
        for a, b, t in zip(self.offsets, self.offsets[1:], tensors):
            t.copy_(flat[a:b].view(t.shape))
