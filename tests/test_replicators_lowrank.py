"""lowrank (Dion): payload by hand, the embedding rule, and distributed steps against a centralised Dion on the mean.

Agreement of ranks, declared == handed bytes and falling loss are in test_replicators (with the settings of its
declaration's test preset, as for every replicator); here: what the update is.
"""

from __future__ import annotations

import functools
import math

import pydantic
import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.lowrank_plan import effective_rank, is_embedding
from netbench.declarations.registry import declared_payload
from netbench.replicators.build import build_replicator
from netbench.shapes import ParamShape

WORLD = 2
STEPS = 4
# A factored matrix (m > n), a wide one, a matrix too small to factor, a 3-D tensor, a bias, an embedding.
NAMED = [
    ("attn.w", (24, 10)),
    ("mlp.w", (6, 20)),
    ("tiny", (4, 4)),
    ("conv", (8, 3, 3)),
    ("mlp.b", (20,)),
    ("tok_emb.weight", (30, 6)),
]


def _shapes(named=NAMED) -> list[ParamShape]:
    return [ParamShape(n, s) for n, s in named]


# -- shapes and bytes ------------------------------------------------------------------------------


def test_payload_by_hand():
    shapes = [
        ParamShape("w", (100, 50)),
        ParamShape("b", (10,)),
        ParamShape("tiny", (4, 4)),
        ParamShape("conv", (8, 3, 3, 3)),
        ParamShape("wte.weight", (64, 16)),
    ]
    parts = declared_payload(shapes, ReplicatorConfig(name="lowrank", rank=4), 4).parts()
    # w: (100 + 50) 4 = 600 < 5000 -> P 100x4, R 50x4; conv as 8 x 27: 35 x 4 = 140 < 216 -> P 8x4, R 27x4;
    # tiny: 8 x 4 = 32 >= 16 -> dense; the bias and the embedding (by name) -> dense, element-wise.
    assert [(p.label, p.collective, p.period, p.collectives_per_step) for p in parts] == [
        ("P", "all_reduce", 1, 1),
        ("R", "all_reduce", 1, 1),
    ]
    assert parts[0].bytes_per_step == (400 + 32 + 16 + 10 + 64 * 16) * 4
    assert parts[1].bytes_per_step == (200 + 108) * 4


def test_fractional_rank_bf16_and_full_rank():
    assert (effective_rank(100, 50, 0.1), effective_rank(100, 50, 0.001), effective_rank(100, 50, 80)) == (5, 1, 50)
    cfg = ReplicatorConfig(name="lowrank", rank=0.1, grad_dtype="bf16")
    decl = declared_payload([ParamShape("w", (100, 50))], cfg, 2)
    assert decl.bytes_on(1) == (100 + 50) * 5 * 2 and decl.collectives_on(1) == 2
    full = declared_payload([ParamShape("w", (64, 64))], ReplicatorConfig(name="lowrank", rank=64), 2)
    assert [p.label for p in full.parts()] == ["P"] and full.bytes_per_step == 64 * 64 * 4  # sent densely


def test_rank_must_be_whole_or_a_fraction():
    for bad in (2.5, 0, -1):
        with pytest.raises(pydantic.ValidationError):
            ReplicatorConfig(name="lowrank", rank=bad)


@pytest.mark.parametrize(
    ("name", "embedding"),
    [
        ("wte.weight", True),
        ("wpe.weight", True),
        ("embed.weight", True),
        ("lm_head.weight", True),
        ("tok_emb.weight", True),
        ("model.embed_tokens.weight", True),
        ("head.weight", True),
        ("wte_weight", True),
        ("h.0.attn.c_attn.weight", False),
        ("layers.0.feed_forward.w1.weight", False),
        ("p3", False),
        ("member.weight", False),
    ],
)
def test_embedding_rule(name, embedding):
    assert is_embedding(name) is embedding


def test_names_reach_the_replicator_as_they_reach_the_payload():
    """The worker passes the workload's names: the embedding is then element-wise in both the bytes and the buffers."""
    params = [torch.nn.Parameter(torch.randn(s)) for _, s in NAMED]
    cfg = ReplicatorConfig(name="lowrank", rank=2)
    named = build_replicator(params, cfg, names=[n for n, _ in NAMED])
    unnamed = build_replicator(params, cfg)
    assert declared_payload(_shapes(), cfg, 1).bytes_on(1) == (named.first.numel() + named.second.numel()) * 4
    assert named.plan.elementwise != unnamed.plan.elementwise
    with pytest.raises(ValueError, match="names"):
        build_replicator(params, cfg, names=["one"])


# -- distributed steps -----------------------------------------------------------------------------


def _grads(rank: int, step: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * rank + step + 1)
    return [torch.randn(s, generator=gen) for _, s in NAMED]


def _rank_body(rank: int, world: int, cfg: dict) -> dict:
    """STEPS steps on NAMED; record updates, momenta, right factors and parameters after each step."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for _, s in NAMED]
    rep = build_replicator(params, ReplicatorConfig(**cfg), names=[n for n, _ in NAMED])
    out: dict = {
        "updates": [],
        "momenta": [],
        "right": [rep_q.clone() for rep_q in rep.right],
        "params": [],
        "stats": [],
    }
    for step in range(STEPS):
        for p, g in zip(params, _grads(rank, step)):
            p.grad = g.clone()
        out["stats"].append(rep.step())
        out["updates"].append([p.grad.clone() for p in params])
        out["momenta"].append([m.clone() for m in rep.momenta])
        out["params"].append([p.detach().clone() for p in params])
    out["matrices"] = [(s.index, s.m, s.n, s.r, s.factored) for s in rep.plan.matrices]
    return out


@functools.cache
def _run(rank: float) -> list[dict]:
    return run_ranks(_rank_body, WORLD, dict(name="lowrank", rank=rank, mu=0.9, lr=0.01), timeout=60)


def _centralised(matrices, right, mu: float) -> list[list[torch.Tensor]]:
    """Dion on one process, per matrix: B_mean from both ranks' momenta + gradients, then algorithm 1."""
    momenta = {r: [torch.zeros(m, n) for _, m, n, _, _ in matrices] for r in range(WORLD)}
    q = [x.clone() for x in right]
    updates = []
    for step in range(STEPS):
        grads = {r: _grads(r, step) for r in range(WORLD)}
        step_updates = []
        for k, (i, m, n, _, _) in enumerate(matrices):
            b = {r: momenta[r][k] + grads[r][i].reshape(m, n) for r in range(WORLD)}
            mean = sum(b.values()) / WORLD
            p = torch.linalg.qr(mean @ q[k]).Q
            r_ = mean.t() @ p
            for rk in range(WORLD):
                momenta[rk][k] = b[rk] - (1 - mu) * p @ r_.t()
            q[k] = r_ / r_.norm(dim=0, keepdim=True)
            step_updates.append(math.sqrt(m / n) * p @ q[k].t())
        updates.append(step_updates)
    return updates


@pytest.mark.parametrize("rank", [2, 1000])  # 1000: every matrix at full rank, so every matrix is sent densely
def test_ranks_agree_and_match_centralised_dion_on_the_mean(rank):
    ranks = _run(rank)
    matrices = ranks[0]["matrices"]
    assert any(f for *_, f in matrices) == (rank == 2) and not all(f for *_, f in matrices)
    assert all(torch.equal(a, b) for a, b in zip(ranks[0]["right"], ranks[1]["right"]))  # shared seed
    expected = _centralised(matrices, ranks[0]["right"], mu=0.9)
    for step in range(STEPS):
        for a, b in zip(ranks[0]["params"][step], ranks[1]["params"][step]):
            assert torch.equal(a, b), f"ranks disagree after step {step + 1}"
        for k, (i, m, n, _, _) in enumerate(matrices):
            got = ranks[0]["updates"][step][i].reshape(m, n)
            torch.testing.assert_close(got, expected[step][k], rtol=1e-4, atol=1e-5)


def test_full_rank_reproduces_the_dense_update_and_loses_nothing():
    """At full rank P R^T is the mean B itself: error feedback keeps B_i - (1 - mu) B_mean, and the
    update (equal to centralised Dion's, above) is P Q^T with orthonormal P and unit columns of Q,
    so its squared Frobenius norm is (m / n) r."""
    ranks = _run(1000)
    for k, (i, m, n, r, _) in enumerate(ranks[0]["matrices"]):
        assert r == min(m, n)
        b = [_grads(rk, 0)[i].reshape(m, n) for rk in range(WORLD)]  # step 1: B = G
        mean = (b[0] + b[1]) / 2
        for rk in range(WORLD):
            torch.testing.assert_close(ranks[rk]["momenta"][0][k], b[rk] - 0.1 * mean, rtol=1e-4, atol=1e-5)
        for step in range(STEPS):
            update = ranks[0]["updates"][step][i]
            assert float(update.square().sum()) == pytest.approx(m / n * r, rel=1e-4)


def test_momenta_stay_local_and_elementwise_tensors_get_the_mean_gradient():
    ranks = _run(2)
    assert any(not torch.equal(a, b) for a, b in zip(ranks[0]["momenta"][0], ranks[1]["momenta"][0]))
    elementwise = [i for i in range(len(NAMED)) if i not in {s[0] for s in ranks[0]["matrices"]}]
    assert [NAMED[i][0] for i in elementwise] == ["mlp.b", "tok_emb.weight"]
    for step in range(STEPS):
        for i in elementwise:
            mean = (_grads(0, step)[i] + _grads(1, step)[i]) / 2
            torch.testing.assert_close(ranks[0]["updates"][step][i], mean, rtol=1e-6, atol=1e-6)
    for stats in ranks[0]["stats"]:
        assert stats.collectives == 2 and stats.compress_s > 0 and stats.decode_s > 0


def test_a_zero_gradient_keeps_its_right_factor():
    """A matrix with no gradient yet is not moved, and keeps its Q (a zero Q would never recover)."""
    params = [torch.nn.Parameter(torch.zeros(12, 8))]
    rep = build_replicator(params, ReplicatorConfig(name="lowrank", rank=2))
    before = rep.right[0].clone()
    params[0].grad = torch.zeros(12, 8)
    rep.step()
    assert torch.equal(rep.right[0], before) and not params[0].detach().any()
    params[0].grad = torch.randn(12, 8)
    rep.step()
    assert params[0].detach().abs().sum() > 0
