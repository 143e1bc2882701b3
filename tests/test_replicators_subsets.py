"""Which positions the random and striding replicators send (one process; rank agreement is in test_replicators)."""

from __future__ import annotations

import math

import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator
from netbench.replicators.striding import stride_of


def _build(shapes, **cfg):
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    return params, build_replicator(params, ReplicatorConfig(**cfg))


@pytest.mark.parametrize(
    "shapes,rate",
    [
        ([(40, 3)], 0.1),  # 120 elements, n = 10: the reference's "stride x count == rows" case
        ([(64, 64)], 0.25),  # rows a multiple of n
        ([(13, 7), (5,), ()], 0.3),  # 97 elements, n = 3: not a multiple
        ([(11,), (2, 2)], 1.0),  # n = 1: everything every step
    ],
)
def test_striding_sends_every_element_exactly_once_per_cycle(shapes, rate):
    params, rep = _build(shapes, name="striding", rate=rate)
    n = stride_of(rep.config)
    total = sum(p.numel() for p in params)
    for start in (0, 5):  # any window of n consecutive steps is a full cycle
        counts = torch.zeros(total, dtype=torch.int64)
        for step in range(start, start + n):
            positions = rep.positions(step)
            assert positions.numel() <= math.ceil(total / n)
            counts.index_add_(0, positions, torch.ones_like(positions))
        assert torch.equal(counts, torch.ones_like(counts))


def test_striding_moves_every_parameter_within_one_cycle():
    """End to end: with sign updates, every parameter changes once over n steps."""
    shapes = [(40, 3), (7,)]
    params, rep = _build(shapes, name="striding", rate=0.2, optimizer="sgd", lr=1.0)
    touched = [torch.zeros(s, dtype=torch.bool) for s in shapes]
    for _ in range(stride_of(rep.config)):
        before = [p.detach().clone() for p in params]
        for p in params:
            p.grad = torch.ones_like(p)
        rep.step()
        for t, b, p in zip(touched, before, params):
            t |= p.detach() != b
    assert all(t.all() for t in touched)


def test_random_sends_rate_of_each_tensor_distinct_and_fresh_every_step():
    shapes = [(50, 20), (33,), (4, 4), ()]
    params, rep = _build(shapes, name="random", rate=0.1, seed=7)
    offsets = [0]
    for p in params:
        offsets.append(offsets[-1] + p.numel())
    previous = None
    hits = torch.zeros(offsets[-1])
    steps = 200
    for step in range(steps):
        positions = rep.positions(step)
        assert torch.equal(positions, rep.positions(step))  # a pure function of (seed, step)
        assert positions.unique().numel() == positions.numel()
        per_tensor = [((positions >= a) & (positions < b)).sum().item() for a, b in zip(offsets, offsets[1:])]
        assert per_tensor == [max(1, round(0.1 * p.numel())) for p in params]
        if previous is not None:
            assert not torch.equal(positions, previous)
        previous = positions
        hits[positions] += 1
    # Every position of the 1000-element tensor is sent with probability 0.1 per step.
    big = hits[:1000] / steps
    assert abs(big.mean().item() - 0.1) < 1e-6  # exactly 100 of 1000 per step
    assert big.min() > 0.0 and big.max() < 0.3


def test_random_selection_depends_on_seed_and_step():
    reps = [_build([(100,)], name="random", rate=0.2, seed=seed)[1] for seed in (0, 1, 2, 2**32)]
    draws = [tuple(rep.positions(step).tolist()) for rep in reps for step in (0, 1, 2**32)]
    assert len(set(draws)) == len(draws)


@pytest.mark.parametrize("name", ["random", "striding"])
def test_unsent_momentum_stays_local_until_its_turn(name):
    """Error feedback: what is not sent is kept (decayed by beta) and sent later."""
    shapes = [(10, 10)]
    params, rep = _build(shapes, name=name, rate=0.5, momentum_decay=0.5, sign=False, optimizer="sgd", lr=1.0)
    params[0].grad = torch.full(shapes[0], 2.0)
    rep.step()
    sent = rep.positions(0)
    kept = torch.ones(100, dtype=torch.bool)
    kept[sent] = False
    assert torch.equal(rep.momentum[sent], torch.zeros(sent.numel()))
    assert torch.equal(rep.momentum[kept], torch.full((int(kept.sum()),), 2.0))
    assert torch.equal(params[0].detach().view(-1)[sent], torch.full((sent.numel(),), -2.0))
    assert not params[0].detach().view(-1)[kept].any()


@pytest.mark.parametrize("name", ["random", "striding"])
def test_subset_payload_is_the_value_count_times_the_wire_dtype(name):
    shapes = [(40, 3), (7,)]
    params, rep = _build(shapes, name=name, rate=0.25, value_dtype="bf16")
    decl = declared_payload(param_shapes(params), rep.config, 4)
    assert decl.collective == "all_reduce"
    assert decl.bytes_per_step == rep.send.numel() * 2
    for p in params:
        p.grad = torch.randn_like(p)
    assert rep.step().payload_bytes == decl.bytes_per_step
