"""Workloads build, learn, give each rank its own data, and the shapes kind matches its preset."""

from __future__ import annotations

import json
import time

import pydantic
import pytest
import torch

from netbench.shapes import resolve_shapes
from netbench.workloads import WorkloadConfig, build_workload

# Small variants keep the suite fast; defaults are exercised by the build test.
SMALL = {
    "transformer": dict(kind="transformer", d_model=64, n_layers=2, batch_size=8, seq_len=32),
    "mlp": dict(kind="mlp", hidden=128, mlp_layers=2, batch_size=128),
}


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _grads(workload) -> list[torch.Tensor]:
    return [p.grad.clone() for p in workload.parameters()]


@pytest.mark.parametrize("kind", ["transformer", "mlp", "shapes"])
def test_default_builds_and_steps(kind: str) -> None:
    cfg = WorkloadConfig(kind=kind, compute_ms=0, shapes="gpt2-small:blocks=1")
    workload = build_workload(cfg, rank=0, world_size=2)
    loss = workload.compute_step()
    assert loss == loss and loss > 0  # finite, not NaN
    params = workload.parameters()
    assert params and all(p.grad is not None and p.grad.shape == p.shape for p in params)
    assert any(p.grad.abs().sum() > 0 for p in params)
    assert [s.shape for s in workload.param_shapes()] == [tuple(p.shape) for p in params]


@pytest.mark.parametrize("kind", ["transformer", "mlp"])
def test_loss_falls_with_plain_optimizer(kind: str) -> None:
    workload = build_workload(WorkloadConfig(**SMALL[kind]), rank=0, world_size=1)
    opt = torch.optim.Adam(workload.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        losses.append(workload.compute_step())
        opt.step()
    first, last = sum(losses[:3]) / 3, sum(losses[-5:]) / 5
    assert last < 0.75 * first, losses


def test_shapes_loss_falls_with_plain_optimizer() -> None:
    cfg = WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=1", compute_ms=0)
    workload = build_workload(cfg, rank=0, world_size=2)
    opt = torch.optim.SGD(workload.parameters(), lr=0.2)
    losses = []
    for _ in range(10):
        losses.append(workload.compute_step())
        opt.step()
    assert losses[0] == pytest.approx(0.5 * (1 + cfg.heterogeneity**2), rel=0.05)
    assert losses[-1] < 0.2 * losses[0], losses


@pytest.mark.parametrize("kind", ["transformer", "mlp", "shapes"])
def test_replicas_start_identical_but_ranks_get_different_gradients(kind: str) -> None:
    cfg = WorkloadConfig(**SMALL.get(kind, dict(kind=kind, shapes="gpt2-small:blocks=1", compute_ms=0)))
    a, b = build_workload(cfg, 0, 2), build_workload(cfg, 1, 2)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    a.compute_step()
    b.compute_step()
    ga, gb = _grads(a), _grads(b)
    assert any(not torch.allclose(x, y) for x, y in zip(ga, gb))
    # same rank, same seed: reproducible
    again = build_workload(cfg, 0, 2)
    again.compute_step()
    assert all(torch.equal(x, y) for x, y in zip(ga, _grads(again)))


def test_shapes_workload_has_exactly_the_preset_shapes() -> None:
    cfg = WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2", compute_ms=0)
    workload = build_workload(cfg, rank=0, world_size=1)
    expected = resolve_shapes("gpt2-small:blocks=2")
    assert workload.param_shapes() == expected
    assert workload.num_params() == sum(s.numel for s in expected)
    workload.compute_step()
    assert [tuple(p.grad.shape) for p in workload.parameters()] == [s.shape for s in expected]


def test_shapes_workload_llama_spec_and_json_file(tmp_path) -> None:
    spec = "llama:d_model=64,layers=2,ffn=128,vocab=100,heads=4"
    workload = build_workload(WorkloadConfig(kind="shapes", shapes=spec, compute_ms=0), 0, 1)
    assert workload.param_shapes() == resolve_shapes(spec)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"shapes": {"enc.w": [8, 4], "enc": [3], "head": [5]}}))
    workload = build_workload(WorkloadConfig(kind="shapes", shapes=str(path), compute_ms=0), 0, 1)
    # "enc" is both a parameter and a prefix of "enc.w": names fall back to flat ones, shapes kept
    assert [tuple(p.shape) for p in workload.parameters()] == [(8, 4), (3,), (5,)]


def test_shapes_grads_change_between_steps() -> None:
    workload = build_workload(WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=1", compute_ms=0), 0, 1)
    workload.compute_step()
    first = _grads(workload)
    workload.compute_step()  # parameters unchanged: only the per-step noise differs
    assert any(not torch.equal(x, y) for x, y in zip(first, _grads(workload)))


def test_shapes_compute_ms_is_honoured() -> None:
    workload = build_workload(WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=1", compute_ms=60), 0, 1)
    for _ in range(3):
        began = time.perf_counter()
        workload.compute_step()
        assert time.perf_counter() - began >= 0.060


def test_unknown_preset_is_a_clear_validation_error() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown shapes preset 'gpt5-huge'"):
        WorkloadConfig(kind="shapes", shapes="gpt5-huge")
    # the preset is only checked for the shapes kind
    assert WorkloadConfig(kind="mlp", shapes="gpt5-huge").kind == "mlp"


@pytest.mark.parametrize(
    "bad",
    [dict(kind="resnet"), dict(kind="transformer", d_model=100, n_heads=3), dict(compute_ms=-1), dict(colour="blue")],
)
def test_invalid_configs_are_rejected(bad: dict) -> None:
    with pytest.raises(pydantic.ValidationError):
        WorkloadConfig(**bad)


def test_config_round_trips_through_json() -> None:
    cfg = WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2", compute_ms=25)
    assert WorkloadConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_rank_outside_world_is_rejected() -> None:
    with pytest.raises(ValueError, match="outside world size"):
        build_workload(WorkloadConfig(kind="mlp"), rank=2, world_size=2)
