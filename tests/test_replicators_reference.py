"""netbench's `dct` against the published DeToNATION DeMoReplicator on 2 gloo ranks (skipped without it).

Same shapes (sides divisible by the chunk, where both tilings agree), same gradients, no sign:
the updates must agree step after step, which checks the DCT-domain momentum, the exact
subtraction of what was sent, and decode-by-averaging against the reference semantics.
"""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.replicators.build import build_replicator

pytest.importorskip(
    "detonation", reason="reference not installed (pip install --no-deps detonation==0.5.2 mltiming einops)"
)
pytest.importorskip("mltiming")
pytest.importorskip("einops")

SHAPES = [(16, 24), (8, 8), (32,), (24, 16)]
CHUNK, TOPK, BETA, STEPS = 8, 5, 0.9, 4


def _body(rank: int, world: int) -> tuple[list, list]:
    import torch.distributed as dist
    from detonation.repl.demo_replicator import DeMoReplicator

    gen = torch.Generator().manual_seed(0)
    ours_params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    ref_params = [torch.nn.Parameter(p.detach().clone()) for p in ours_params]
    ours = build_replicator(
        ours_params, ReplicatorConfig(name="dct", chunk=CHUNK, topk=TOPK, momentum_decay=BETA, sign=False)
    )

    class _Optim:  # what DeMoReplicator.init reads from DeToNATION's optimizer
        param_groups = [{"params": ref_params, "lr": 1.0}]
        state = defaultdict(dict)

    ref = DeMoReplicator(compression_decay=BETA, compression_topk=TOPK, compression_chunk=CHUNK)
    with contextlib.redirect_stdout(io.StringIO()):
        ref.init(_Optim, replication_parallel_group=dist.group.WORLD)
    ours_updates, ref_updates = [], []
    for step in range(STEPS):
        gen.manual_seed(100 * rank + step)
        grads = [torch.randn(s, generator=gen) for s in SHAPES]
        for p, g in zip(ours_params, grads):
            p.grad = g.clone()
        ours._sync(_NullTimer())  # the synchronised update, before the base optimizer applies it
        ours_updates.append([p.grad.clone() for p in ours_params])
        ref.pre_step()
        ref_updates.append(
            [ref.replicate(g, p, _Optim.state[p], _Optim.param_groups[0]).clone() for p, g in zip(ref_params, grads)]
        )
        ref.post_step()
        ours.comm.take()
    return ours_updates, ref_updates


class _NullTimer:
    def compress(self) -> None: ...
    def skip(self) -> None: ...
    def decode(self) -> None: ...


def test_dct_matches_the_published_demo_replicator_step_by_step():
    ranks = run_ranks(_body, 2, timeout=60)
    for ours_updates, ref_updates in ranks:
        for step, (ours, ref) in enumerate(zip(ours_updates, ref_updates)):
            for t, (a, b) in enumerate(zip(ours, ref)):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=f"step {step}, tensor {SHAPES[t]}")
