"""Replicators across real gloo ranks on 127.0.0.1: agreement, averaging, selection, payload, training."""

from __future__ import annotations

import functools

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import REGISTRY, declared_payload, names, spec
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator

# Non-divisible by the chunk (8), 1-D, smaller than a chunk, 3-D, a 1 x n matrix, a scalar.
SHAPES = [(13, 7), (70, 9), (5,), (3, 2), (16, 16), (4, 3, 5), (1, 40), ()]
WORLD = 2
STEPS = 6


def configs() -> dict[str, dict]:
    """Every declared replicator's test settings, by label: its preset's ``check`` under its name, and each variant on
    top of it as ``name-variant`` (``full-bf16``)."""
    out = {}
    for name, declared in REGISTRY.items():
        preset = declared.test_preset
        out[name] = dict(preset.check, name=name)
        out.update(
            {f"{name}-{label}": {**preset.check, **more, "name": name} for label, more in preset.variants.items()}
        )
    return out


CONFIGS = configs()


def _params(shapes, seed: int = 0) -> list[torch.nn.Parameter]:
    """Identical parameters on every rank (same seed)."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]


def _set_grads(params, rank: int, step: int) -> list[torch.Tensor]:
    """Different gradients on every rank and step."""
    gen = torch.Generator().manual_seed(1000 * rank + step + 1)
    grads = [torch.randn(p.shape, generator=gen) for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    return grads


def _run_steps(rank: int, world: int, cfg: dict, steps: int) -> dict:
    """Rank body: ``steps`` steps on SHAPES; record parameters, stats and selections."""
    config = ReplicatorConfig(**cfg)
    params = _params(SHAPES)
    rep = build_replicator(params, config)
    record = {"params": [], "stats": [], "positions": [], "grads": [], "updates": []}
    for step in range(steps):
        record["grads"].append(_set_grads(params, rank, step))
        if hasattr(rep, "positions"):
            record["positions"].append(rep.positions(step))
        stats = rep.step()
        record["updates"].append([p.grad.clone() for p in params])
        record["params"].append([p.detach().clone() for p in params])
        record["stats"].append(stats)
    return record


@functools.cache
def run(key: str, steps: int = STEPS) -> list[dict]:
    """One 2-rank run per configuration, shared by every test that inspects it."""
    return run_ranks(_run_steps, WORLD, CONFIGS[key], steps, timeout=60)


def _syncs(cfg: dict, step: int) -> bool:
    """Whether 0-based ``step`` ends with identical parameters on every rank: on the last step of the declaration's
    period, unless an exchange carries some layers only or lands steps after it leaves (Streaming DiLoCo's fragments
    each agree on their own step, the whole model never at once: tests/test_replicators_streaming.py checks them)."""
    config = ReplicatorConfig(**cfg)
    parts = declared_payload(param_shapes(_params(SHAPES)), config, WORLD).parts()
    if any(p.layers or p.overlap_steps or p.offset % p.period for p in parts):
        return False
    return (step + 1) % spec(config.name).period(config) == 0


def check_identical_parameters(key: str, ranks: list[dict]) -> None:
    """Every rank holds the same parameters after each synchronising step, and every tensor moved."""
    initial = _params(SHAPES)
    for step in range(len(ranks[0]["params"])):
        if not _syncs(CONFIGS[key], step):
            continue
        for a, b in zip(ranks[0]["params"][step], ranks[1]["params"][step]):
            assert torch.equal(a, b), f"{key}: ranks disagree after step {step + 1}"
    moved = [any(not torch.equal(step[t], initial[t]) for step in ranks[0]["params"]) for t in range(len(SHAPES))]
    assert all(moved), f"{key}: some tensors never changed ({moved})"


def check_declared_payload(key: str, ranks: list[dict]) -> None:
    """The bytes and collectives every rank handed to gloo on each step are those its declaration gives."""
    decl = declared_payload(param_shapes(_params(SHAPES)), ReplicatorConfig(**CONFIGS[key]), WORLD)
    assert all(part.bytes_per_step > 0 for part in decl.parts())
    for rank in ranks:
        for step, stats in enumerate(rank["stats"]):
            assert stats.payload_bytes == decl.bytes_on(step + 1), (key, step)
            assert stats.collectives == decl.collectives_on(step + 1), (key, step)
            assert stats.comm_s >= 0 and stats.compress_s >= 0 and stats.decode_s >= 0 and stats.apply_s > 0


@pytest.mark.parametrize("key", list(CONFIGS))
def test_every_rank_holds_identical_parameters(key):
    check_identical_parameters(key, run(key))


@pytest.mark.parametrize("key", list(CONFIGS))
def test_declared_payload_equals_bytes_handed_to_collectives(key):
    check_declared_payload(key, run(key))


def test_full_applies_the_mean_of_the_ranks_gradients():
    ranks = run("full")
    for step in range(STEPS):
        for t in range(len(SHAPES)):
            mean = (ranks[0]["grads"][step][t] + ranks[1]["grads"][step][t]) / 2
            for rank in ranks:
                torch.testing.assert_close(rank["updates"][step][t], mean, rtol=1e-6, atol=1e-6)


def test_full_bf16_is_the_mean_up_to_bf16_rounding():
    ranks = run("full-bf16")
    for t in range(len(SHAPES)):
        mean = (ranks[0]["grads"][0][t] + ranks[1]["grads"][0][t]) / 2
        got = ranks[0]["updates"][0][t]
        torch.testing.assert_close(got, mean, rtol=2e-2, atol=2e-2)
        assert not torch.equal(got, mean) or mean.numel() == 1  # really travelled as bf16


def _selects_positions(key: str) -> bool:
    """Whether the codec of ``key`` reports the positions it sends on a step (the subset replicators do)."""
    return hasattr(spec(CONFIGS[key]["name"]).load(), "positions")


@pytest.mark.parametrize("key", [key for key in CONFIGS if _selects_positions(key)])
def test_subset_replicators_select_the_same_positions_on_every_rank(key):
    ranks = run(key)
    for step in range(STEPS):
        positions = ranks[0]["positions"][step]
        assert torch.equal(positions, ranks[1]["positions"][step])
        # Updates are zero outside the selected positions.
        flat = torch.cat([u.reshape(-1) for u in ranks[0]["updates"][step]])
        outside = torch.ones_like(flat, dtype=torch.bool)
        outside[positions] = False
        assert not flat[outside].any()
        assert flat[positions].count_nonzero() > 0.9 * positions.numel()
    assert not torch.equal(ranks[0]["positions"][0], ranks[0]["positions"][1])


def test_diloco_communicates_only_every_h_steps_and_trains_locally_in_between():
    cfg = CONFIGS["diloco"]
    ranks = run("diloco")
    for step, stats in enumerate(ranks[0]["stats"]):
        assert stats.collectives == (1 if (step + 1) % cfg["sync_every"] == 0 else 0)
    # Between syncs each rank follows its own gradients, so the ranks differ.
    first_local = next(s for s in range(STEPS) if not _syncs(cfg, s))
    differ = [not torch.equal(a, b) for a, b in zip(ranks[0]["params"][first_local], ranks[1]["params"][first_local])]
    assert any(differ)


def test_diloco_outer_step_uses_the_averaged_pseudo_gradient():
    """With outer lr 1 and no momentum, DiLoCo's sync lands on the average of the ranks' weights."""
    cfg = dict(name="diloco", sync_every=2, outer_lr=1.0, outer_momentum=0.0, optimizer="sgd", lr=0.1)
    ranks = run_ranks(_diloco_average_body, WORLD, cfg)
    local_0, local_1, synced = ranks[0][0], ranks[1][0], ranks[0][1]
    for a, b, s in zip(local_0, local_1, synced):
        torch.testing.assert_close(s, (a + b) / 2, rtol=1e-6, atol=1e-6)
    for s0, s1 in zip(ranks[0][1], ranks[1][1]):
        assert torch.equal(s0, s1)


def _diloco_average_body(rank: int, world: int, cfg: dict):
    """Two local SGD steps; report the pre-sync local weights (re-derived) and the synced ones."""
    params = _params(SHAPES)
    rep = build_replicator(params, ReplicatorConfig(**cfg))
    local = [p.detach().clone() for p in params]
    for step in range(2):
        grads = _set_grads(params, rank, step)
        for w, g in zip(local, grads):
            w.sub_(0.1 * g)
        rep.step()
    return local, [p.detach().clone() for p in params]


# -- training --------------------------------------------------------------------------------------


def _train_body(rank: int, world: int, cfg: dict, steps: int) -> tuple[float, float]:
    """A small MLP regression; each rank trains on its own shard, loss on a shared eval set."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3))
    teacher = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3))
    eval_x = torch.randn(256, 12)
    with torch.no_grad():
        eval_y = teacher(eval_x)
    rep = build_replicator(list(model.parameters()), ReplicatorConfig(**cfg))
    gen = torch.Generator().manual_seed(100 + rank)

    def eval_loss() -> float:
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(model(eval_x), eval_y))

    before = eval_loss()
    for _ in range(steps):
        x = torch.randn(64, 12, generator=gen)
        with torch.no_grad():
            y = teacher(x)
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        rep.step()
    return before, eval_loss()


@pytest.mark.parametrize("name", names())
def test_loss_falls_over_a_short_run(name):
    steps = 60
    ranks = run_ranks(_train_body, WORLD, {**spec(name).test_preset.train, "name": name}, steps, timeout=60)
    for before, after in ranks:
        assert after < 0.5 * before, f"{name}: eval loss {before:.4f} -> {after:.4f}"


def _held_body(rank: int, world: int, name: str) -> list[tuple[int, int, bool]]:
    """Rank body: per step, (collectives started, handles the comm still holds, all of those done)."""
    params = _params(SHAPES)
    rep = build_replicator(params, ReplicatorConfig(name=name))
    seen = []
    for step in range(3):
        _set_grads(params, rank, step)
        stats = rep.step()
        held = rep.comm._held_before
        seen.append((stats.collectives, len(held), all(work.is_completed() for work in held)))
    return seen


@pytest.mark.parametrize("name", ["full", "dct"])
def test_finished_collectives_are_freed_by_the_training_thread(name):
    """gloo's thread never drops the last reference to a finished collective: a program that ends
    right after its last step would otherwise abort in interpreter shutdown."""
    for rank_seen in run_ranks(_held_body, WORLD, name, timeout=60):
        assert all(calls == held and done for calls, held, done in rank_seen), rank_seen
