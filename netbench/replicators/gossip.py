"""Gossip (NoLoCo, arXiv 2506.10911; jkolehm/noloco ``src/noloco/sparse_optimizer_c.py``): DiLoCo's local steps, but
each outer sync averages with one partner instead of every node.

Every ``sync_every`` (H) steps, every rank draws the same pairing from the seed and the step
(:func:`netbench.declarations.gossip_spec.pairs`) and swaps ``[anchor | delta]`` with its partner: the anchor is the
parameters the last outer step left, the delta how far the local steps moved from it. Both partners send and receive
at once (one irecv and one isend, posted together, the receive first), so the exchange costs one hop, where the
reference's star of blocking sends costs two per tensor; both then hold the pair's means and take the same outer
step, NoLoCo's modified Nesterov step::

    m      <- beta m + alpha mean(delta) + alpha (mean(anchor) - anchor)
    anchor <- anchor + m;  params <- anchor

The last term pulls each replica toward its partner's anchor. Replicas never agree exactly (each averages with a
different partner each sync); :meth:`GossipReplicator.sketch` measures how far apart they are without sending
anything.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.gossip_spec import VALUES_PER_PARAM, partner
from netbench.replicators.base import WIRE_DTYPES, Replicator, StepStats, StepTimer
from netbench.replicators.comm import needs_host_copy
from netbench.replicators.flat import FlatLayout

__all__ = ["GossipReplicator", "SKETCH_SIZE", "sketch_signs"]

SKETCH_SIZE = 64  # numbers each rank records per sync: the spread of 64 random projections is within ~10 % of the truth
SKETCH_SEED = 0x9055  # the projection's own seed: the same for every rank and run, apart from the pairing's


def sketch_signs(numel: int, device: torch.device) -> torch.Tensor:
    """The fixed random signs of the sketch (a CountSketch whose buckets are ``SKETCH_SIZE`` contiguous slices): each
    number of the sketch is a signed sum of one slice, so the squared distance between two sketches is, on average,
    the squared distance between the two parameter vectors."""
    generator = torch.Generator().manual_seed(SKETCH_SEED)
    return (torch.randint(0, 2, (numel,), generator=generator) * 2 - 1).to(torch.float32).to(device)


class GossipReplicator(Replicator):
    """Inner optimizer (AdamW by default) every step; every ``sync_every`` steps one pairwise exchange of anchor and
    delta and NoLoCo's outer step (lr ``outer_lr``, momentum ``outer_momentum``). Ranks must begin from identical
    parameters (seed them alike): the anchors are taken from the parameters at construction."""

    name = "gossip"
    default_optimizer = "adamw"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        self.layout = FlatLayout(self.params)
        n, dev = self.layout.numel, self.params[0].device
        self.anchor = torch.zeros(n, device=dev)
        self.layout.gather([p.detach() for p in self.params], self.anchor)
        self.current = torch.zeros(n, device=dev)
        self.momentum = torch.zeros(n, device=dev)
        wire_device = torch.device("cpu") if needs_host_copy(self.comm.backend, dev.type) else dev
        dtype = WIRE_DTYPES[config.grad_dtype]
        self.outgoing = torch.zeros(VALUES_PER_PARAM * n, dtype=dtype, device=wire_device)
        self.incoming = torch.zeros(VALUES_PER_PARAM * n, dtype=dtype, device=wire_device)
        self.signs = sketch_signs(n, dev)
        self.last_sketch: torch.Tensor | tuple[()] = ()

    def syncs_on(self, step: int) -> bool:
        """Whether 1-based ``step`` ends with an outer synchronisation."""
        return step % self.config.sync_every == 0

    def _sync(self, timer: StepTimer) -> None:
        """Nothing to synchronise before the inner step: the local gradients are applied as they are."""
        self.grads()

    def step(self) -> StepStats:
        """One step; on a sync its stats carry this replica's sketch after the outer step."""
        self.last_sketch = ()
        stats = super().step()
        stats.sketch = self.last_sketch
        return stats

    def _after_apply(self, timer: StepTimer) -> None:
        if not self.syncs_on(self.steps_done):
            return
        timer.skip()
        n = self.layout.numel
        self.layout.gather([p.detach() for p in self.params], self.current)
        self.current.sub_(self.anchor)  # delta: how far the local steps went
        self.outgoing[:n].copy_(self.anchor)
        self.outgoing[n:].copy_(self.current)
        timer.compress()
        self._swap()
        timer.skip()
        mean_anchor = self.incoming[:n].to(self.anchor.device, torch.float32).add_(self.outgoing[:n].float()).mul_(0.5)
        mean_delta = self.incoming[n:].to(self.anchor.device, torch.float32).add_(self.outgoing[n:].float()).mul_(0.5)
        beta, alpha = self.config.outer_momentum, self.config.outer_lr
        self.momentum.mul_(beta).add_(mean_delta, alpha=alpha).add_(mean_anchor.sub_(self.anchor), alpha=alpha)
        self.anchor.add_(self.momentum)
        self.layout.scatter(self.anchor, [p.data for p in self.params])
        self.last_sketch = self.sketch()
        timer.decode()

    def _swap(self) -> None:
        """Send ``outgoing`` to this sync's partner and receive its buffer into ``incoming``, both at once (booked as
        one exchange of the bytes sent)."""
        comm = self.comm
        other = partner(comm.rank, comm.world_size, self.steps_done, self.config.seed)
        if other == comm.rank:  # alone this sync (one node, or the odd one out): its own buffer is the other half
            self.incoming.copy_(self.outgoing)
            return
        peer = comm.peer(other)

        def body() -> None:
            # the receive first: gloo sends a receiver's ready notification on the connection the receiver's own data
            # leaves by, so a notification posted after the send would wait behind the whole buffer whenever the
            # partner's notification is there already (a partner that arrived first), and the two directions would
            # travel one after the other
            ops = [
                dist.P2POp(dist.irecv, self.incoming, peer, group=comm.group),
                dist.P2POp(dist.isend, self.outgoing, peer, group=comm.group),
            ]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        comm.point_to_point_async(body, self.outgoing, "pairwise", partner=other).wait()

    def sketch(self) -> torch.Tensor:
        """``SKETCH_SIZE`` numbers: signed sums of contiguous slices of the flat parameters (:func:`sketch_signs`);
        nothing crosses the wire. Left on the parameters' device: the worker reads it back with its step record."""
        signed = self.anchor * self.signs
        return torch.stack([part.sum() for part in torch.tensor_split(signed, SKETCH_SIZE)])
