"""SparseLoCo: error feedback keeps exactly what did not travel, chunk-wise top-k, low-bit values."""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.declarations.tiling import TilePlan
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator
from netbench.replicators.sparseloco import _untile

SHAPES = [(16, 16), (13, 7), (40,), (4, 3, 5)]
H = 3


def _one_cycle(**settings):
    """One process (no group): H plain SGD steps, then the sync. Returns the replicator, the weights before the
    cycle, the local weights before the sync and the weights after it."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    start = [p.detach().clone() for p in params]
    config = ReplicatorConfig(
        name="sparseloco", sync_every=H, chunk=4, topk=3, optimizer="sgd", lr=0.1, outer_lr=1.0, **settings
    )
    rep = build_replicator(params, config)
    local = [p.detach().clone() for p in params]
    for _ in range(H):
        grads = [torch.randn(s, generator=gen) for s in SHAPES]
        for p, g, w in zip(params, grads, local):
            p.grad = g.clone()
            w.sub_(0.1 * g)
        stats = rep.step()
    return rep, start, local, [p.detach().clone() for p in params], stats, config


def _error_in_parameter_layout(rep) -> list[torch.Tensor]:
    out = [torch.zeros(s) for s in SHAPES]
    matrices = [t.reshape(rows, cols) for t, (rows, cols) in zip(out, rep.plan.matrix_shapes)]
    for r in rep.plan.regions:
        _untile(r, rep.error[r.bucket][r.tile0 : r.tile0 + r.tiles], matrices[r.tensor])
    return out


def test_error_feedback_keeps_exactly_what_did_not_travel():
    """Alone (mean = own message) with outer lr 1: sent = start - after, and error = delta - sent = after - local."""
    for settings in ({}, {"quant_bits": 2, "quant_block": 16}, {"value_dtype": "bf16"}):
        rep, start, local, after, _, _ = _one_cycle(**settings)
        for e, a, w in zip(_error_in_parameter_layout(rep), after, local):
            torch.testing.assert_close(e, a - w, rtol=1e-5, atol=1e-6)


def test_each_chunk_sends_its_top_k_and_the_payload_is_the_declared_one():
    rep, start, local, after, stats, config = _one_cycle()
    plan = TilePlan(SHAPES, 4, 3)
    sent = sum(int((s - a).count_nonzero()) for s, a in zip(start, after))
    assert sent == plan.coefficients  # fp32 values: every kept coefficient is nonzero
    delta = torch.cat([(s - w).reshape(-1) for s, w in zip(start, local)])
    moved = torch.cat([(s - a).reshape(-1) for s, a in zip(start, after)])
    kept = moved != 0
    torch.testing.assert_close(moved[kept], delta[kept], rtol=1e-5, atol=1e-6)  # fp32 values travel exactly
    assert stats.payload_bytes == declared_payload(param_shapes(after), config, 1).bytes_on(H)


def test_two_bit_values_take_four_levels_per_block():
    block = 16
    rep, start, _, after, _, _ = _one_cycle(quant_bits=2, quant_block=block)
    moved = torch.cat([(s - a).reshape(-1) for s, a in zip(start, after)])
    magnitudes = {round(v, 4) for v in moved[moved.abs() > 1e-6].abs().tolist()}
    assert len(magnitudes) <= 2 * -(-rep.count // block)  # A/4 and 3A/4 of each block's A
