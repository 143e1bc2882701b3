"""Dense gradient averaging: what DistributedDataParallel does, as the baseline for every other replicator; with
``quant_bits``, the gradients' mean through the quantized ring (:mod:`netbench.replicators.ring_quantized`)."""

from __future__ import annotations

import torch

from netbench.declarations.buckets import bucket_bytes, slot_ranges
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.pipeline_policy import behind_for
from netbench.replicators.base import WIRE_DTYPES, Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.outer_mean import OuterMean
from netbench.replicators.pipeline import run_pipeline

__all__ = ["FullReplicator"]


class FullReplicator(Replicator):
    """All gradients flattened into one buffer (fp32 or bf16), one ring all-reduce, averaged."""

    name = "full"
    default_optimizer = "adamw"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        self.layout = FlatLayout(self.params)
        if config.quant_bits:
            dev = self.params[0].device
            self.flat = torch.zeros(self.layout.numel, device=dev)
            self.averaged = OuterMean(
                self.comm, self.layout.numel, config.grad_dtype, config.quant_bits, config.quant_block, dev
            )
            return
        # One persistent buffer: a single collective per step and no per-step allocation.
        self.buffer = torch.empty(self.layout.numel, dtype=WIRE_DTYPES[config.grad_dtype], device=self.params[0].device)
        self.ranges = slot_ranges(self.layout.numel, self.buffer.element_size(), bucket_bytes(config.bucket_mb))
        self.comm.open_lanes(len(self.ranges))

    def _sync(self, timer: StepTimer) -> None:
        if self.config.quant_bits:
            grads = self.grads()
            self.layout.gather(grads, self.flat)
            self.layout.scatter(self.averaged.exchange(self.flat, timer), grads)
            timer.decode()
            return
        if len(self.ranges) > 1:
            grads = self.grads()
            run_pipeline(
                len(self.ranges),
                lambda b: self.layout.gather(grads, self.buffer, *self.ranges[b]),
                lambda b: self.comm.all_reduce_mean_async(self.buffer[slice(*self.ranges[b])]),
                lambda b: self.layout.scatter(self.buffer, grads, *self.ranges[b]),
                timer,
                behind_for(self.comm.concurrent(len(self.ranges))),
            )
            return
        self.layout.gather(self.grads(), self.buffer)
        timer.compress()
        self.comm.all_reduce_mean(self.buffer)
        timer.skip()
        self.layout.scatter(self.buffer, self.grads())
        timer.decode()
