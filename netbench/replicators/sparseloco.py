"""SparseLoCo (Sarfi et al. 2025, arXiv 2508.15706): DiLoCo whose outer momentum becomes local error feedback.

Every rank runs its inner optimizer on every step. Every ``sync_every`` steps each rank takes its pseudo-gradient
``delta = global - local``, adds it to its error buffer (``e = error_decay * e + delta``), keeps the ``topk``
largest magnitudes of every s x s chunk of ``e`` (DeMo's tiles, without a transform), rounds them to what the wire
carries (``quant_bits``: :mod:`netbench.replicators.quantize`) and removes exactly that from ``e``. One all-gather
carries every rank's positions and values; every rank adds the rows in rank order, divides by the ranks, takes
the outer step ``global -= outer_lr * mean`` and resets its parameters to the new global weights, so ranks agree
after each sync. The error buffer lives in tile layout (tiles, s*s), like DeMo's momentum.
"""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.sparseloco_spec import value_bytes
from netbench.declarations.tiling import Region, TilePlan
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.quantize import Quantizer
from netbench.replicators.topk import topk_indices
from netbench.replicators.wire import index_dtype_for

__all__ = ["SparseLoCoReplicator"]

_VALUE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _tiles(region: Region, matrix: torch.Tensor) -> torch.Tensor:
    """The region's tiles of ``matrix`` as (tiles, h*w) rows, each tile row-major (a copy)."""
    r = region
    block = matrix[r.row0 : r.row0 + r.rows, r.col0 : r.col0 + r.cols]
    return block.reshape(r.row_tiles, r.h, r.col_tiles, r.w).permute(0, 2, 1, 3).reshape(r.tiles, r.h * r.w)


def _untile(region: Region, rows: torch.Tensor, matrix: torch.Tensor) -> None:
    """Write (tiles, h*w) rows back into the region of ``matrix``."""
    r = region
    block = rows.view(r.row_tiles, r.col_tiles, r.h, r.w).permute(0, 2, 1, 3).reshape(r.rows, r.cols)
    matrix[r.row0 : r.row0 + r.rows, r.col0 : r.col0 + r.cols].copy_(block)


class SparseLoCoReplicator(Replicator):
    """Inner optimizer every step; every H steps an error-fed, chunk-wise top-k, low-bit outer gradient, gathered."""

    name = "sparseloco"
    default_optimizer = "adamw"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        dev = self.params[0].device
        self.layout = FlatLayout(self.params)
        self.start = torch.zeros(self.layout.numel, device=dev)
        self.layout.gather([p.detach() for p in self.params], self.start)
        self.delta = torch.zeros(self.layout.numel, device=dev)
        self.plan = TilePlan([p.shape for p in self.params], config.chunk, config.topk)
        self.error = [torch.zeros(b.tiles, b.tile_numel, device=dev) for b in self.plan.buckets]
        self.count = self.plan.coefficients
        self.index_dtype = index_dtype_for(config, self.plan.max_tile_numel)
        self.index_bytes = self.count * self.index_dtype.itemsize
        self.value_nbytes = value_bytes(self.count, config)
        self.quantizer = (
            Quantizer(self.count, config.quant_bits, config.quant_block, dev) if config.quant_bits else None
        )
        self.wire = torch.zeros(self.index_bytes + self.value_nbytes, dtype=torch.uint8, device=dev)
        self.gathered = torch.zeros((self.comm.world_size, self.wire.numel()), dtype=torch.uint8, device=dev)
        self.values = torch.zeros(self.count, device=dev)

    def _matrices(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's matrix view of ``flat`` (the tiling's rows x columns)."""
        return [
            v.reshape(rows, cols)
            for v, (rows, cols) in zip(self.layout.views(flat, self.params), self.plan.matrix_shapes)
        ]

    def _sync(self, timer: StepTimer) -> None:
        """Nothing to synchronise before the inner step: the local gradients are applied as they are."""
        self.grads()

    def _after_apply(self, timer: StepTimer) -> None:
        if self.steps_done % self.config.sync_every:
            return
        timer.skip()
        indices = self._encode()
        timer.compress()
        self.comm.all_gather(self.wire, self.gathered)
        timer.skip()
        self._decode(indices)
        timer.decode()

    def _encode(self) -> list[torch.Tensor]:
        """Fold the pseudo-gradient into the error buffer, pick and round its top-k, fill the wire buffer; returns
        each bucket's positions."""
        self.layout.gather([p.detach() for p in self.params], self.delta)
        torch.sub(self.start, self.delta, out=self.delta)
        decay = self.config.error_decay
        matrices = self._matrices(self.delta)
        for r in self.plan.regions:
            self.error[r.bucket][r.tile0 : r.tile0 + r.tiles].mul_(decay).add_(_tiles(r, matrices[r.tensor]))
        chosen, at = [], 0
        for b, bucket in enumerate(self.plan.buckets):
            idx = topk_indices(self.error[b].abs(), bucket.k)
            n = idx.numel()
            self.values[at : at + n].copy_(torch.gather(self.error[b], 1, idx).view(-1))
            chosen.append(idx)
            at += n
        positions = torch.cat([i.reshape(-1) for i in chosen]).to(self.index_dtype)
        self.wire[: self.index_bytes].copy_(positions.view(torch.uint8))
        values = self.wire[self.index_bytes :]
        if self.quantizer is not None:
            self.quantizer.encode(self.values, values)
            sent = self.quantizer.decode(values, torch.empty_like(self.values))
        else:
            typed = self.values.to(_VALUE_DTYPES[self.config.value_dtype])
            values.copy_(typed.view(torch.uint8))
            sent = typed.to(torch.float32)
        at = 0
        for b, idx in enumerate(chosen):  # error feedback keeps exactly what did not travel
            n = idx.numel()
            self.error[b].scatter_add_(1, idx, sent[at : at + n].view(idx.shape).neg())
            at += n
        return chosen

    def _decode(self, shapes_of: list[torch.Tensor]) -> None:
        """Sum every rank's sparse values in rank order, average, take the outer step and reset the parameters."""
        sums = [torch.zeros_like(e) for e in self.error]
        for row in self.gathered:
            positions = row[: self.index_bytes].clone().view(self.index_dtype).long()
            raw = row[self.index_bytes :]
            if self.quantizer is not None:
                values = self.quantizer.decode(raw, self.values)
            else:
                values = raw.clone().view(_VALUE_DTYPES[self.config.value_dtype]).float()
            at = 0
            for b, like in enumerate(shapes_of):
                n = like.numel()
                sums[b].scatter_add_(1, positions[at : at + n].view(like.shape), values[at : at + n].view(like.shape))
                at += n
        matrices = self._matrices(self.delta)
        for r in self.plan.regions:
            _untile(r, sums[r.bucket][r.tile0 : r.tile0 + r.tiles], matrices[r.tensor])
        self.start.sub_(self.delta, alpha=self.config.outer_lr / self.comm.world_size)
        self.layout.scatter(self.start, [p.data for p in self.params])
