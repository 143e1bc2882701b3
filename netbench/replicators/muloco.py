"""MuLoCo (Thérien et al. 2025, arXiv 2505.23725): DiLoCo whose inner optimizer is Muon and whose outer gradient is
error-fed before it goes on the wire.

Inner steps: Muon (``torch.optim.Muon``, Newton-Schulz orthogonalised momentum) on the 2-D weight matrices, AdamW on
the rest (vectors, scalars, higher-rank tensors, and the embeddings and head, picked by name as ``lowrank`` picks
them), both at the one ``lr``: Muon's update is scaled to AdamW's RMS (``adjust_lr_fn="match_rms_adamw"``) so one
rate serves both. Any ``optimizer`` but ``auto`` replaces the pair (DiLoCo with error feedback, the paper's
ablation).

Every ``sync_every`` steps: ``e = error_decay e + delta``; the rank sends what its own encoding of ``e`` decodes to
(:meth:`~netbench.replicators.outer_mean.OuterMean.rounded`: the quantized ring's chunks, or the wire dtype) and
keeps the rest, ``e -= sent``; the mean of what the ranks sent is DiLoCo's outer gradient (facebookresearch/MuLoCo,
``QuantizedOuterSGD``, with ``error_feedback_alpha`` 1).
"""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.lowrank_plan import is_embedding
from netbench.replicators.diloco import DiLoCoReplicator
from netbench.replicators.optim import OptimizerChain, Stepper, resolve_lr

__all__ = ["MuLoCoReplicator"]

# The inner Muon's constants in MuLoCo's published configuration (torchtitan/config/diloco/..._muloco_...py)
MUON_MOMENTUM = 0.9
MUON_NESTEROV = False
MUON_WEIGHT_DECAY = 1e-4


class MuLoCoReplicator(DiLoCoReplicator):
    """Muon (matrices) and AdamW (the rest) every step; every ``sync_every`` steps an error-fed DiLoCo sync."""

    name = "muloco"

    def _build_optimizer(self) -> Stepper:
        """Muon on the 2-D weight matrices, AdamW on every other parameter."""
        if self.config.optimizer != "auto":
            return super()._build_optimizer()
        lr = resolve_lr(self.config, self.default_lr)
        muon = [len(s.shape) == 2 and not is_embedding(s.name) for s in self.shapes]
        matrices = [p for p, m in zip(self.params, muon) if m]
        rest = [p for p, m in zip(self.params, muon) if not m]
        optimizers: list[Stepper] = []
        if matrices:
            optimizers.append(
                torch.optim.Muon(
                    matrices,
                    lr=lr,
                    weight_decay=MUON_WEIGHT_DECAY,
                    momentum=MUON_MOMENTUM,
                    nesterov=MUON_NESTEROV,
                    adjust_lr_fn="match_rms_adamw",
                )
            )
        if rest:
            optimizers.append(torch.optim.AdamW(rest, lr=lr, foreach=True))
        return OptimizerChain(optimizers)

    def _setup(self, config: ReplicatorConfig) -> None:
        super()._setup(config)
        self.error = torch.zeros_like(self.start)
        self.sent = torch.zeros_like(self.start)

    def _outgoing(self, delta: torch.Tensor) -> torch.Tensor:
        """Fold ``delta`` into the error buffer and send what the wire carries of it; the rest stays in the buffer."""
        self.error.mul_(self.config.error_decay).add_(delta)
        sent = self.averaged.rounded(self.error, self.sent)
        self.error.sub_(sent)
        return sent
