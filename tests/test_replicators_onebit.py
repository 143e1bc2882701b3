"""onebit: 1-bit Adam's warm-up and compressed steps against a one-process reference of DeepSpeed's rule, its sign
packing, and its declared phases.

Declared == handed bytes on every step, agreeing ranks and falling loss are also in test_replicators (with the settings
of its declaration's test preset, as for every replicator).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dist_harness import run_ranks
from test_replicators import SHAPES, _params, _set_grads

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.onebit_spec import padded
from netbench.declarations.registry import declared_payload
from netbench.model.schemes import scheme_from_config
from netbench.replicators.build import build_replicator
from netbench.replicators.signbits import pack_signs, unpack_signs
from netbench.shapes import ParamShape

NUMEL = sum(math.prod(s) for s in SHAPES)
FREEZE = 2
STEPS = 6
LR = 0.01


def test_signs_pack_as_numpy_packbits_and_unpack_to_plus_minus_one():
    values = torch.randn(64)
    values[[3, 9]] = 0.0  # sign 0 counts as +1, as DeepSpeed's sign().add_(1).bool()
    packed = pack_signs(values)
    assert packed.dtype == torch.uint8 and packed.numel() == 8
    assert np.array_equal(packed.numpy(), np.packbits((values >= 0).numpy()))
    assert torch.equal(unpack_signs(packed, torch.empty(64)), torch.where(values >= 0, 1.0, -1.0))


@pytest.mark.parametrize("world", [2, 3, 6, 8, 12])
def test_padding_makes_whole_bytes_per_server_chunk(world):
    for numel in (1, 79, 1000, 4097):
        full = padded(numel, world)
        assert full >= numel and full % world == 0 and (full // world) % 8 == 0
        assert full - numel < world * math.lcm(world, 8)


def test_payload_is_dense_through_the_warm_up_then_signs_and_scales():
    shapes = [ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)]
    cfg = ReplicatorConfig(name="onebit", freeze_step=3)
    decl = declared_payload(shapes, cfg, 4)
    signs = padded(NUMEL, 4) // 8
    assert [decl.bytes_on(s) for s in (1, 2, 3)] == [4 * NUMEL] * 3
    assert [decl.bytes_on(s) for s in (4, 5, 100)] == [signs + 4 + signs // 4 + 4] * 3
    assert [decl.collectives_on(s) for s in (3, 4)] == [1, 4]
    kinds = [e.collective for e in scheme_from_config(cfg).exchanges(shapes, 4)]
    assert kinds == ["all_to_all", "all_gather", "all_gather", "all_gather"]  # the model prices the lasting phase


def _rank(rank: int, world: int) -> list[list[torch.Tensor]]:
    params = _params(SHAPES)
    rep = build_replicator(params, ReplicatorConfig(name="onebit", freeze_step=FREEZE, lr=LR))
    out = []
    for step in range(STEPS):
        _set_grads(params, rank, step)
        rep.step()
        out.append([p.detach().clone() for p in params])
    return out


def _scaled_signs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSpeed's compression of ``x``: (scale x sign, the error it leaves)."""
    scale = torch.norm(x) / np.sqrt(x.numel())
    compressed = scale * x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0)
    return compressed, x - compressed


def _reference(world: int) -> list[torch.Tensor]:
    """DeepSpeed's OnebitAdam and compressed_allreduce, every rank simulated here, on one flat buffer."""
    flat = torch.cat([p.detach().reshape(-1) for p in _params(SHAPES)])
    full = padded(NUMEL, world)
    chunk = full // world
    m, v = torch.zeros(NUMEL), torch.zeros(NUMEL)
    worker_error = [torch.zeros(full) for _ in range(world)]
    server_error = [torch.zeros(chunk) for _ in range(world)]
    b1, b2 = 0.9, 0.999
    out = []
    for step in range(STEPS):
        grads = [torch.cat([g.reshape(-1) for g in _set_grads(_params(SHAPES), r, step)]) for r in range(world)]
        if step < FREEZE:
            g = sum(grads) / world
            m = m * b1 + (1 - b1) * g
            v = v * b2 + (1 - b2) * g * g
        else:
            sent = []
            for r in range(world):
                local = torch.cat([m * b1 + (1 - b1) * grads[r], torch.zeros(full - NUMEL)]) + worker_error[r]
                compressed, worker_error[r] = _scaled_signs(local)
                sent.append(compressed)
            servers = []
            for j in range(world):
                x = sum(s[j * chunk : (j + 1) * chunk] for s in sent) / world + server_error[j]
                compressed, server_error[j] = _scaled_signs(x)
                servers.append(compressed)
            m = torch.cat(servers)[:NUMEL] * (v > 0)
        flat = flat - LR * m / (v.sqrt() + 1e-8)
        out.append(flat.clone())
    return out


def test_every_rank_takes_deepspeeds_1bit_adam_steps():
    world = 3
    ranks = run_ranks(_rank, world, timeout=60)
    for step, expected in enumerate(_reference(world)):
        for r in ranks:
            got = torch.cat([p.reshape(-1) for p in r[step]])
            assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (step, (got - expected).abs().max())
    assert not torch.equal(ranks[0][FREEZE - 1][0], ranks[0][-1][0])


def test_a_run_whose_warm_up_leaves_dense_steps_measured_is_warned():
    from netbench.orchestrator.prediction import period_warnings

    config = ReplicatorConfig(name="onebit", freeze_step=8)
    (warning,) = period_warnings(config, 4, 6, warmup=2)
    assert "after step 8" in warning and "--warmup 8" in warning
    assert period_warnings(config, 4, 6, warmup=8) == []
    assert period_warnings(config, 4, 6) == []  # without a warm-up to hold it to, periods only


def test_the_warm_up_is_not_priced_per_step_but_its_bursts_set_the_pacing():
    from netbench.model.network import paced_flight_bytes

    shapes = [ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)]
    scheme = scheme_from_config(ReplicatorConfig(name="onebit", freeze_step=4))
    lasting, ended = scheme.exchanges(shapes, 2), scheme.ended(shapes, 2)
    assert [(e.collective, e.bytes_per_step) for e in ended] == [("all_reduce", 4 * NUMEL)]
    assert paced_flight_bytes((*lasting, *ended), 2) > paced_flight_bytes(lasting, 2)


def test_a_run_opens_with_freeze_step_steps_priced_as_the_dense_all_reduce():
    from netbench.emulation.spec import ClusterSpec
    from netbench.model.calibration import Calibration
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.prediction import dense_prediction, predict, workload_shapes
    from netbench.topology import DirectionSpec

    shapes = [ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)]
    scheme = scheme_from_config(ReplicatorConfig(name="onebit", freeze_step=4))
    assert scheme.dense_steps(shapes, 2) == 4  # read from the declaration's phases: freeze_step
    dense = scheme.dense_phase()
    assert [(e.collective, e.bytes_per_step) for e in dense.exchanges(shapes, 2)] == [("all_reduce", 4 * NUMEL)]
    assert dense.ended(shapes, 2) == () and dense.dense_steps(shapes, 2) == 4
    assert scheme_from_config(ReplicatorConfig(name="full")).dense_steps(shapes, 2) == 0

    link = DirectionSpec(rate_bps=10e6)
    config = RunConfig(
        cluster=ClusterSpec(nodes=2, up=link, down=link),
        replicator={"name": "onebit", "freeze_step": 6},
        workload={"kind": "mlp", "hidden": 512, "mlp_layers": 2},
    )
    model = workload_shapes(config.workload, 2)
    found = dense_prediction(config, model, 0.05, Calibration(), 2)
    lasting = predict(config, model, 0.05, Calibration(), 2)
    full = predict(
        config.model_copy(update={"replicator": ReplicatorConfig(name="full")}), model, 0.05, Calibration(), 2
    )
    assert found["dense_steps"] == 6
    assert found["dense_step_time_s"] == pytest.approx(full.step_time_s, rel=0.05)  # a step of `full`'s all-reduce
    assert found["dense_step_time_s"] > 5 * lasting.step_time_s  # 32 bits a parameter against about one
    unphased = config.model_copy(update={"replicator": ReplicatorConfig(name="full")})
    assert dense_prediction(unphased, model, 0.05, Calibration(), 2) == {}
