"""desloc: MT-DAO's codec at DES-LOC's settings (periods K_x, 3 K_x and 6 K_x; Adam's local step).

Declared == handed bytes on every step and falling loss are also in test_replicators (with the settings of its
declaration's test preset, as for every replicator).
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.desloc_spec import as_mtdao
from netbench.declarations.registry import declared_payload
from netbench.replicators.build import build_replicator
from netbench.replicators.flat import FlatLayout
from netbench.replicators.mtdao import LocalQHAdam
from netbench.shapes import ParamShape

SHAPES = [(12, 5), (7,), (3, 2, 2)]
NUMEL = 60 + 7 + 12
STEPS = 12


def test_moments_travel_on_three_and_six_times_the_parameters_period():
    cfg = ReplicatorConfig(name="desloc", params_every=2, m1_every=5, grad_dtype="bf16")  # m1_every is mtdao's
    decl = declared_payload([ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)], cfg, 4)
    assert [(p.label, p.period, p.bytes_per_step) for p in decl.parts()] == [
        ("params", 2, NUMEL * 2),
        ("m1", 6, NUMEL * 2),
        ("m2", 12, NUMEL * 2),
    ]


def test_the_local_step_is_adam():
    gen = torch.Generator().manual_seed(3)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    local = LocalQHAdam(params, FlatLayout(params), as_mtdao(ReplicatorConfig(name="desloc")), lr=0.01)
    adam = torch.optim.Adam(twins, lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(5):
        grads = [torch.randn(s, generator=gen) for s in SHAPES]
        for p, q, g in zip(params, twins, grads):
            p.grad, q.grad = g.clone(), g.clone()
        local.step()
        adam.step()
    for p, q in zip(params, twins):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


def _rank_body(rank: int, world: int, cfg: dict) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    rep = build_replicator(params, ReplicatorConfig(**cfg))
    out = []
    for step in range(STEPS):
        grads = torch.Generator().manual_seed(1000 * rank + step + 1)
        for p in params:
            p.grad = torch.randn(p.shape, generator=grads)
        rep.step()
        out.append(torch.cat([p.detach().reshape(-1) for p in params]))
    return out


@pytest.mark.parametrize("quant_bits", [0, 8])
def test_desloc_is_mtdao_at_its_settings_step_for_step(quant_bits):
    common = dict(lr=0.01, quant_bits=quant_bits, quant_block=16)
    desloc = run_ranks(_rank_body, 2, dict(name="desloc", params_every=2, **common), timeout=60)
    mtdao = dict(name="mtdao", params_every=2, m1_every=6, m2_every=12, beta1=0.9, nu=1.0, **common)
    reference = run_ranks(_rank_body, 2, mtdao, timeout=60)
    for ours, theirs in zip(desloc, reference):
        for a, b in zip(ours, theirs):
            assert torch.equal(a, b)
