"""The ``shapes`` workload: a preset's parameter shapes with synthetic gradients and a stand-in compute time.

Lets netbench study the wire cost of realistic model sizes (GPT-2, Llama) on a 2-core machine
that could not train them. Two design points:

* **Compute is a sleep.** ``compute_ms`` stands in for forward+backward. Sleeping (rather than
  spinning) leaves the CPU free for what the experiment measures: the replicator's compression,
  encoding and the kernel's networking, which on a 2-core machine shared by N emulated nodes
  would otherwise compete with fake compute for cores. The time spent producing the gradients is
  counted toward ``compute_ms``: the step sleeps only for the remainder, so ``compute_s`` comes
  out at ``compute_ms`` unless producing the gradients alone takes longer.

* **The loss is real.** Each rank minimises the quadratic ``f_r(p) = 0.5 * sum((p - t_r)**2)``
  toward its own target ``t_r = target_scale * (c + heterogeneity * d_r)`` (``c`` shared by all
  ranks, ``d_r`` per rank, both unit Gaussian; ``target_scale`` defaults to GPT-2's init std so
  sign-based and adaptive optimizers with ordinary learning rates reach the targets within tens
  to hundreds of steps). The gradient is ``p - t_r`` plus ``grad_noise * target_scale`` times a
  per-step perturbation standing in for minibatch noise. Parameters start at zero. The reported
  loss is ``f_r / (numel * target_scale**2)``, the objective in units of the target scale, so it
  starts near ``0.5 * (1 + heterogeneity**2)`` whatever the preset, and falls as the replicator's
  updates move the replicas toward the shared optimum (the mean of the targets), levelling off
  near ``0.5 * heterogeneity**2 * (1 - 1/world_size)``. It is computed before the noise is
  added: the objective, not a noisy sample of it.

Gradients are cheap: the targets and noise live in one per-rank buffer generated once; the
per-step noise is a shifted window of that same buffer (a different shift for every rank and
step), so no per-step random generation of millions of values is needed. Memory is about three
times the parameters' fp32 size per rank (parameters, gradients, the buffer).
"""

from __future__ import annotations

import time

import torch
from torch import nn

from netbench.shapes import ParamShape
from netbench.workloads.base import STREAM_DATA, STREAM_TARGET, Workload, make_generator
from netbench.workloads.config import WorkloadConfig

# Slack past the parameters at the end of the buffer; per-step noise windows start at offsets
# 1..NOISE_WINDOW-1 into it (never 0, which would be the target itself).
NOISE_WINDOW = 65_537


class ShapesModule(nn.Module):
    """Zero-initialised parameters named and shaped exactly as a shape list says."""

    def __init__(self, shapes: list[ParamShape]) -> None:
        super().__init__()
        for s in shapes:
            self._place(s.name.split("."), nn.Parameter(torch.zeros(s.shape)))

    def _place(self, path: list[str], param: nn.Parameter) -> None:
        """Register ``param`` under nested submodules so ``named_parameters`` gives the dotted name back."""
        module: nn.Module = self
        for part in path[:-1]:
            child = module._modules.get(part)
            if child is None:
                child = nn.Module()
                module.add_module(part, child)
            module = child
        module.register_parameter(path[-1], param)


def _safe_shapes(shapes: list[ParamShape]) -> list[ParamShape]:
    """Shapes whose dotted names nest cleanly; names that do not (empty parts, a name that is
    both a parameter and a prefix of another) are flattened with underscores instead."""
    leaves = {s.name for s in shapes}
    prefixes = {".".join(s.name.split(".")[:i]) for s in shapes for i in range(1, s.name.count(".") + 1)}
    if all(s.name.split(".").count("") == 0 for s in shapes) and not leaves & prefixes:
        return shapes
    return [ParamShape(s.name.replace(".", "_") or f"p{i}", s.shape) for i, s in enumerate(shapes)]


class ShapesWorkload(Workload):
    """Synthetic gradients of a quadratic objective, on parameters of a preset's shapes."""

    def __init__(self, cfg: WorkloadConfig, rank: int) -> None:
        self.cfg = cfg
        self.rank = rank
        self.compute_s = cfg.compute_ms / 1000.0
        self.model = ShapesModule(_safe_shapes(cfg.shape_list()))
        self.params = self.parameters()
        self.numel = sum(p.numel() for p in self.params)
        self.starts = [0]
        for p in self.params:
            self.starts.append(self.starts[-1] + p.numel())
        self.buffer = self._make_buffer()
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.step = 0

    def _make_buffer(self) -> torch.Tensor:
        """``c + heterogeneity * d_r`` (unit scale) over every parameter plus the noise window's slack."""
        n = self.numel + NOISE_WINDOW
        buf = torch.randn(n, generator=make_generator(self.cfg.seed, STREAM_TARGET))
        if self.cfg.heterogeneity:
            own = torch.randn(n, generator=make_generator(self.cfg.seed, STREAM_DATA, self.rank))
            buf.add_(own, alpha=self.cfg.heterogeneity)
        return buf

    def _noise_offset(self) -> int:
        """Where this rank's noise window starts this step: differs by rank and by step, never 0."""
        return 1 + (self.step * 7919 + self.rank * 104_729 + self.cfg.seed * 31) % (NOISE_WINDOW - 1)

    @torch.no_grad()
    def compute_step(self) -> float:
        began = time.perf_counter()
        offset = self._noise_offset()
        scale = self.cfg.target_scale
        sq = torch.zeros((), dtype=torch.float64)
        for p, start in zip(self.params, self.starts):
            n = p.numel()
            if p.grad is None or p.grad.shape != p.shape:
                p.grad = torch.empty_like(p)
            g = p.grad
            torch.sub(p, self.buffer[start : start + n].view(p.shape), alpha=scale, out=g)
            flat = g.view(-1)
            sq += torch.dot(flat, flat).double()
            if self.cfg.grad_noise:
                g.add_(
                    self.buffer[offset + start : offset + start + n].view(p.shape), alpha=self.cfg.grad_noise * scale
                )
        self.step += 1
        remaining = self.compute_s - (time.perf_counter() - began)
        if remaining > 0:
            time.sleep(remaining)
        return 0.5 * float(sq) / (self.numel * scale * scale)
