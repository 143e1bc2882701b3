"""The model's view of a cluster, built in one place from what a run's cluster or a plan's request says of it.

A cluster is ``nodes`` machines of ``gpus_per_node`` workers each; the model's
:class:`~netbench.model.steptime.Scenario` counts workers. ``intra_bits_per_s`` is one worker's share of the node's
intra-node link (bits per second).
"""

from __future__ import annotations

from netbench.model.collectives import Algorithm
from netbench.model.framing import Framing
from netbench.model.steptime import Scenario
from netbench.tcp import TcpSettings

__all__ = ["cluster_scenario"]


def cluster_scenario(
    nodes: int,
    up_bps: float,
    down_bps: float,
    delay_s: float,
    compute_s: float,
    tcp: TcpSettings,
    framing: Framing | None = None,
    gpus_per_node: int = 1,
    intra_bits_per_s: float | None = None,
    algorithm: Algorithm = "ring",
) -> Scenario:
    """The scenario of ``nodes`` machines of ``gpus_per_node`` workers on links of ``up_bps``/``down_bps`` and a
    one-way ``delay_s`` between two nodes, each step computing ``compute_s``."""
    return Scenario(
        workers=nodes * gpus_per_node,
        up_bps=up_bps,
        down_bps=down_bps,
        delay_s=delay_s,
        compute_s=compute_s,
        gpus_per_node=gpus_per_node,
        intra_bits_per_s=intra_bits_per_s,
        algorithm=algorithm,
        framing=framing or Framing(),
        tcp=tcp,
    )
