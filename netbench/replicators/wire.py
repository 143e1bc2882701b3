"""The DCT replicator's wire format: all values and all indices of a step in ONE byte buffer.

Layout (no header: every rank derives it from the same shapes and settings):
two sections, ``values`` (fp32 or bf16, bucket after bucket, tile after tile, k per tile) and
``indices`` (int16/32/64 positions inside their tile, same order). The section with the wider
element type comes first so both sections are naturally aligned inside a freshly allocated
buffer, and the buffer carries no padding: its size is exactly coefficients x (value + index
bytes), which is what the payload formula declares.
"""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.dct_spec import index_dtype_name
from netbench.dtypes import torch_dtypes
from netbench.replicators.base import WIRE_DTYPES as _VALUE_DTYPES

__all__ = ["WireLayout", "index_dtype_for", "INDEX_DTYPES"]

INDEX_DTYPES: dict[str, torch.dtype] = torch_dtypes("int16", "int32", "int64")


def index_dtype_for(config: ReplicatorConfig, max_tile_numel: int) -> torch.dtype:
    """The torch type of :func:`~netbench.declarations.dct_spec.index_dtype_name` (the payload formula's)."""
    return INDEX_DTYPES[index_dtype_name(config, max_tile_numel)]


class WireLayout:
    """Byte offsets of each bucket's values and indices inside the packed step buffer."""

    def __init__(self, counts: list[int], value_dtype: torch.dtype, index_dtype: torch.dtype) -> None:
        self.counts = list(counts)  # coefficients per bucket
        self.value_dtype, self.index_dtype = value_dtype, index_dtype
        self.total = sum(self.counts)
        self.starts = [sum(self.counts[:b]) for b in range(len(self.counts))]
        vbytes, ibytes = self.total * value_dtype.itemsize, self.total * index_dtype.itemsize
        values_first = value_dtype.itemsize >= index_dtype.itemsize
        self.value_offset = 0 if values_first else ibytes
        self.index_offset = vbytes if values_first else 0
        self.nbytes = vbytes + ibytes

    @classmethod
    def for_config(cls, counts: list[int], config: ReplicatorConfig, max_tile_numel: int) -> WireLayout:
        return cls(counts, _VALUE_DTYPES[config.value_dtype], index_dtype_for(config, max_tile_numel))

    def _section(self, buf: torch.Tensor, offset: int, dtype: torch.dtype) -> torch.Tensor:
        return buf[..., offset : offset + self.total * dtype.itemsize].view(dtype)

    def values(self, buf: torch.Tensor) -> torch.Tensor:
        """Typed view of the values section of a freshly allocated (aligned) 1-D byte buffer."""
        return self._section(buf, self.value_offset, self.value_dtype)

    def indices(self, buf: torch.Tensor) -> torch.Tensor:
        """Typed view of the indices section of a freshly allocated (aligned) 1-D byte buffer."""
        return self._section(buf, self.index_offset, self.index_dtype)

    def bucket(self, section: torch.Tensor, b: int) -> torch.Tensor:
        """The slice of a typed section (any leading dims) that belongs to bucket ``b``."""
        return section[..., self.starts[b] : self.starts[b] + self.counts[b]]

    def unpack(self, gathered: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Split a (world, nbytes) gather into typed (world, total) values and indices.

        Rows of the gather start at multiples of ``nbytes``, which need not be aligned for the
        wider type, so each section is first copied (a plain byte copy, bit-exact) into its own
        aligned buffer.
        """
        world = gathered.shape[0]

        def section(offset: int, dtype: torch.dtype) -> torch.Tensor:
            raw = torch.empty((world, self.total * dtype.itemsize), dtype=torch.uint8, device=gathered.device)
            raw.copy_(gathered[:, offset : offset + raw.shape[1]])
            return raw.view(dtype)

        return section(self.value_offset, self.value_dtype), section(self.index_offset, self.index_dtype)
