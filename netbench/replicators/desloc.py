"""DES-LOC (Iacob et al. 2025, arXiv 2505.22549): MT-DAO's local step and three averaged states, as Adam.

Every step each rank applies a local Adam step to its own gradient; after the step the parameters are averaged every
K_x = ``params_every`` steps, the first moment every 3 K_x and the second every 6 K_x (the paper's recommended
ratios). DES-LOC averages a moment before the step that uses it and MT-DAO after the step before: the same
averaged state. The settings MT-DAO's codec reads are derived once, by
:func:`netbench.declarations.desloc_spec.as_mtdao`.
"""

from __future__ import annotations

from netbench.declarations.desloc_spec import as_mtdao
from netbench.replicators.mtdao import MTDAOReplicator
from netbench.replicators.optim import Stepper

__all__ = ["DESLOCReplicator"]


class DESLOCReplicator(MTDAOReplicator):
    """Local Adam every step; parameters, first and second moment all-reduced every K_x, 3 K_x and 6 K_x steps."""

    name = "desloc"

    def _build_optimizer(self) -> Stepper:
        """MT-DAO's local QH-Adam, over the settings DES-LOC derives from K_x (its periods, Adam's constants)."""
        self.config = as_mtdao(self.config)
        return super()._build_optimizer()
