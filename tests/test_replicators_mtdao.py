"""mtdao: three periodic exchanges, silence in between, averages of each state, and the local QH-Adam step.

Declared == handed bytes on every step and falling loss are also in test_replicators (with the settings of its
declaration's test preset, as for every replicator).
"""

from __future__ import annotations

import functools

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.replicators.build import build_replicator
from netbench.shapes import ParamShape

WORLD = 2
SHAPES = [(12, 5), (7,), (3, 2, 2)]
NUMEL = 60 + 7 + 12
PERIODS = dict(params_every=2, m1_every=3, m2_every=6)
STEPS = 12


def test_payload_parts_and_their_steps():
    cfg = ReplicatorConfig(name="mtdao", grad_dtype="bf16", **PERIODS)
    decl = declared_payload([ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)], cfg, 4)
    dense = NUMEL * 2
    assert [(p.label, p.period, p.bytes_per_step) for p in decl.parts()] == [
        ("params", 2, dense),
        ("m1", 3, dense),
        ("m2", 6, dense),
    ]
    assert [decl.bytes_on(s) // dense for s in range(1, 13)] == [0, 1, 1, 1, 0, 3, 0, 1, 1, 1, 0, 3]
    assert [decl.collectives_on(s) for s in range(1, 13)] == [0, 1, 1, 1, 0, 3, 0, 1, 1, 1, 0, 3]
    assert sum(decl.bytes_on(s) for s in range(1, 13)) / 12 == pytest.approx(dense * (1 / 2 + 1 / 3 + 1 / 6))
    assert ReplicatorConfig(name="mtdao").params_every == 32 and ReplicatorConfig(name="mtdao").beta1 == 0.999


def _grads(rank: int, step: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * rank + step + 1)
    return [torch.randn(s, generator=gen) for s in SHAPES]


def _params() -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(0)
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]


def _rank_body(rank: int, world: int, cfg: dict, steps: int) -> dict:
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(**cfg))
    out: dict = {"params": [], "m1": [], "v": [], "stats": []}
    for step in range(steps):
        for p, g in zip(params, _grads(rank, step)):
            p.grad = g.clone()
        out["stats"].append(rep.step())
        out["params"].append(torch.cat([p.detach().reshape(-1) for p in params]))
        out["m1"].append(rep.local.m1.clone())
        out["v"].append(rep.local.v.clone())
    return out


@functools.cache
def _run(grad_dtype: str = "fp32") -> list[dict]:
    cfg = dict(name="mtdao", lr=0.01, grad_dtype=grad_dtype, **PERIODS)
    return run_ranks(_rank_body, WORLD, cfg, STEPS, timeout=60)


@pytest.mark.parametrize("grad_dtype", ["fp32", "bf16"])
def test_each_state_agrees_after_its_own_period_and_nothing_is_sent_between(grad_dtype):
    ranks = _run(grad_dtype)
    for step in range(1, STEPS + 1):
        stats = [r["stats"][step - 1] for r in ranks]
        due = [step % PERIODS[k] == 0 for k in ("params_every", "m1_every", "m2_every")]
        for s in stats:
            assert s.collectives == sum(due) and s.payload_bytes == sum(due) * NUMEL * (
                2 if grad_dtype == "bf16" else 4
            )
            if not any(due):
                assert s.comm_s == 0 and s.compress_s == 0 and s.decode_s == 0
        for key, agree in zip(("params", "m1", "v"), due):
            same = torch.equal(ranks[0][key][step - 1], ranks[1][key][step - 1])
            assert same == agree, f"{grad_dtype}: {key} after step {step}: agree={same}, expected {agree}"


def test_the_averages_are_the_means_of_the_local_states():
    """Two ranks stepping alone (no process group: nothing averages with periods past the run) and
    averaged by hand give what the 2-rank run holds after step 2 (params) and step 3 (m1)."""
    ranks = _run()
    alone = [_solo(rank) for rank in range(WORLD)]
    torch.testing.assert_close(
        ranks[0]["params"][1], (alone[0]["params"][1] + alone[1]["params"][1]) / 2, rtol=1e-6, atol=1e-6
    )
    # m1 after step 3 is the mean of the ranks' m1, which (the same gradients, from the same m1) is the solo runs' mean.
    torch.testing.assert_close(ranks[0]["m1"][2], (alone[0]["m1"][2] + alone[1]["m1"][2]) / 2, rtol=1e-6, atol=1e-6)


def _solo(rank: int) -> dict:
    params = _params()
    rep = build_replicator(
        params, ReplicatorConfig(name="mtdao", lr=0.01, params_every=999, m1_every=999, m2_every=999)
    )
    out: dict = {"params": [], "m1": []}
    for step in range(3):
        for p, g in zip(params, _grads(rank, step)):
            p.grad = g.clone()
        assert rep.step().collectives == 0
        out["params"].append(torch.cat([p.detach().reshape(-1) for p in params]))
        out["m1"].append(rep.local.m1.clone())
    return out


def test_local_step_is_bias_corrected_qh_adam():
    cfg = ReplicatorConfig(name="mtdao", lr=0.1, beta1=0.9, beta2=0.99, nu=0.7)
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    rep = build_replicator([p], cfg)
    g1, g2 = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([-0.25, 0.5, 1.0])
    x, m, v = p.detach().clone(), torch.zeros(3), torch.zeros(3)
    for t, g in enumerate((g1, g2), start=1):
        p.grad = g.clone()
        rep.step()
        m = 0.9 * m + 0.1 * g
        v = 0.99 * v + 0.01 * g * g
        x = x - 0.1 * (0.3 * g + 0.7 * m / (1 - 0.9**t)) / ((v / (1 - 0.99**t)).sqrt() + 1e-8)
        torch.testing.assert_close(p.detach(), x, rtol=1e-6, atol=1e-6)
