"""Streaming DiLoCo across real gloo ranks: DiLoCo's equal with one fragment, fragments on their own steps, overlap."""

from __future__ import annotations

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.fragments import FragmentError, fragment_members, layer_of_each, send_offset, sync_offset
from netbench.declarations.registry import declared_payload
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator
from netbench.shapes import ParamShape, resolve_shapes

WORLD = 2
# Named like a small transformer: an embedding, four numbered blocks of two tensors, a final norm and a head.
NAMES = [
    "tok_emb.weight",
    *[f"blocks.{b}.{t}" for b in range(4) for t in ("fc.weight", "ln.bias")],
    "ln_f.weight",
    "head.weight",
]
SHAPES = [(11, 6), *[s for _ in range(4) for s in ((6, 6), (6,))], (6,), (5, 6)]


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]


def _set_grads(params, rank: int, step: int) -> None:
    gen = torch.Generator().manual_seed(1000 * rank + step + 1)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)


def _trace(rank: int, world: int, cfg: dict, steps: int) -> dict:
    """Parameters and stats after every step."""
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(**cfg), names=NAMES)
    out: dict = {"params": [], "stats": []}
    for step in range(steps):
        _set_grads(params, rank, step)
        out["stats"].append(rep.step())
        out["params"].append([p.detach().clone() for p in params])
    return out


# -- layers and fragments (no torch in the rule) ------------------------------------------------------


def test_layers_come_from_the_numbered_modules_and_the_rest_joins_a_neighbour():
    layers, count = layer_of_each(NAMES)
    assert count == 4
    assert layers == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3]  # embedding to the first block; norm and head to the last


def test_a_model_without_numbered_layers_counts_each_parameter():
    assert layer_of_each(["w", "b", "scale"]) == ([0, 1, 2], 3)


def test_the_presets_layers():
    assert layer_of_each([s.name for s in resolve_shapes("gpt2-small:blocks=2")])[1] == 2
    assert layer_of_each([s.name for s in resolve_shapes("llama:d_model=64,layers=6,ffn=128,vocab=50")])[1] == 6
    assert layer_of_each(["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"])[1] == 3  # an nn.Sequential


def test_strided_and_sequential_fragments():
    assert fragment_members(NAMES, 2, "strided") == [[0, 1, 2, 5, 6], [3, 4, 7, 8, 9, 10]]
    assert fragment_members(NAMES, 2, "sequential") == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10]]
    assert fragment_members(NAMES, 1, "strided") == [list(range(len(NAMES)))]


def test_fragments_must_divide_the_layers():
    with pytest.raises(FragmentError, match="fragments 3 must divide the model's 4 layers") as caught:
        fragment_members(NAMES, 3, "strided")
    assert caught.value.field == "fragments"


def test_the_schedule_staggers_fragments_over_the_cycle():
    h, f = 12, 3
    assert [sync_offset(i, h, f) for i in range(f)] == [4, 8, 0]
    assert [send_offset(i, h, f, 2) for i in range(f)] == [2, 6, 10]


def test_fragments_that_do_not_divide_the_cycle_land_on_torchfts_steps():
    """floor((i + 1) H / F): the paper's Table 4 runs H = 100 over 8 fragments."""
    assert [sync_offset(i, 100, 8) for i in range(8)] == [12, 25, 37, 50, 62, 75, 87, 0]
    assert len({sync_offset(i, 100, 36) for i in range(36)}) == 36  # every fragment on a step of its own
    with pytest.raises(ValueError, match="must not exceed sync_every"):
        ReplicatorConfig(name="streaming", sync_every=4, fragments=5)
    with pytest.raises(ValueError, match="below sync_every / fragments"):
        ReplicatorConfig(name="streaming", sync_every=100, fragments=36, fragment_sync_delay=2)


def test_the_declaration_carries_each_fragments_bytes_schedule_and_overlap():
    shapes = [ParamShape(n, s) for n, s in zip(NAMES, SHAPES)]
    config = ReplicatorConfig(name="streaming", sync_every=8, fragments=2, fragment_sync_delay=1, quant_bits=4)
    parts = declared_payload(shapes, config, WORLD).parts()
    assert [p.label for p in parts] == ["fragment0", "fragment1"]
    assert [(p.period, p.offset, p.overlap_steps) for p in parts] == [(8, 3, 1), (8, 7, 1)]
    numels = [66 + 42 + 42, 42 + 42 + 6 + 30]
    halves = [(n // 2, n - n // 2) for n in numels]  # the ring's chunks, one per rank
    assert [p.bytes_per_step for p in parts] == [sum(4 + -(-c // 2) for c in h) for h in halves]  # a scale, 2 codes/B
    assert all(p.collective == "all_reduce" for p in parts)
    # strided: blocks 0 and 2 (with the embedding before them) in fragment 0, 1 and 3 (with the final norm and head)
    assert [(p.layers, p.layer_count) for p in parts] == [((0, 2), 4), ((1, 3), 4)]


# -- on real ranks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("grad_dtype", ["fp32", "bf16"])
def test_one_fragment_without_delay_or_quantization_is_diloco_step_for_step(grad_dtype):
    base = dict(sync_every=3, grad_dtype=grad_dtype, optimizer="adamw", lr=0.01, outer_lr=0.7, outer_momentum=0.9)
    steps = 9
    diloco = run_ranks(_trace, WORLD, dict(name="diloco", **base), steps, timeout=60)
    streaming = run_ranks(_trace, WORLD, dict(name="streaming", fragments=1, **base), steps, timeout=60)
    for rank in range(WORLD):
        for step in range(steps):
            for a, b in zip(diloco[rank]["params"][step], streaming[rank]["params"][step]):
                assert torch.equal(a, b), (rank, step)
            d, s = diloco[rank]["stats"][step], streaming[rank]["stats"][step]
            assert (d.payload_bytes, d.collectives) == (s.payload_bytes, s.collectives)


def test_each_fragment_agrees_across_ranks_on_its_own_sync_step_only():
    cfg = dict(name="streaming", sync_every=4, fragments=2, lr=0.01)
    ranks = run_ranks(_trace, WORLD, cfg, 8, timeout=60)
    members = fragment_members(NAMES, 2, "strided")
    for step in range(8):
        at = (step + 1) % 4
        for i, group in enumerate(members):
            same = all(torch.equal(ranks[0]["params"][step][j], ranks[1]["params"][step][j]) for j in group)
            assert same == (at == sync_offset(i, 4, 2)), (step, i)


def test_an_overlapped_fragment_lands_the_average_of_what_left_tau_steps_before():
    """Outer lr 1 without momentum and alpha 0: the fragment's weights become the ranks' mean at the send step."""
    tau = 2
    cfg = dict(
        name="streaming",
        sync_every=6,
        fragments=2,
        fragment_sync_delay=tau,
        outer_lr=1.0,
        outer_momentum=0.0,
        optimizer="sgd",
        lr=0.1,
    )
    ranks = run_ranks(_trace, WORLD, cfg, 6, timeout=60)
    members = fragment_members(NAMES, 2, "strided")
    for i, group in enumerate(members):
        sent, landed = send_offset(i, 6, 2, tau) or 6, sync_offset(i, 6, 2) or 6  # 1-based steps of the first cycle
        assert landed - sent == tau
        for j in group:
            mean = (ranks[0]["params"][sent - 1][j] + ranks[1]["params"][sent - 1][j]) / 2
            for rank in ranks:
                torch.testing.assert_close(rank["params"][landed - 1][j], mean, rtol=1e-6, atol=1e-6)
        stats = ranks[0]["stats"]
        assert stats[sent - 1].collectives == 1 and stats[landed - 1].collectives == 0  # started, then waited for


def test_update_alpha_keeps_that_share_of_the_local_weights():
    base = dict(name="streaming", sync_every=4, fragments=2, fragment_sync_delay=1, optimizer="sgd", lr=0.1)
    dropped = run_ranks(_trace, WORLD, dict(base, fragment_update_alpha=0.0), 4, timeout=60)
    kept = run_ranks(_trace, WORLD, dict(base, fragment_update_alpha=1.0), 4, timeout=60)
    members = fragment_members(NAMES, 2, "strided")
    landed = sync_offset(0, 4, 2)
    j = members[0][0]
    assert torch.equal(dropped[0]["params"][landed - 1][j], dropped[1]["params"][landed - 1][j])  # global weights
    assert not torch.equal(kept[0]["params"][landed - 1][j], kept[1]["params"][landed - 1][j])  # local weights kept


def test_quantized_fragments_travel_the_declared_bytes_and_stay_close_to_the_exact_mean():
    cfg = dict(name="streaming", sync_every=4, fragments=4, quant_bits=8, quant_block=16, optimizer="sgd", lr=0.1)
    exact = dict(cfg, quant_bits=0)
    quantized = run_ranks(_trace, WORLD, cfg, 4, timeout=60)
    reference = run_ranks(_trace, WORLD, exact, 4, timeout=60)
    decl = declared_payload(param_shapes(_params(), NAMES), ReplicatorConfig(**cfg), WORLD)
    for step, stats in enumerate(quantized[0]["stats"]):
        assert stats.payload_bytes == decl.bytes_on(step + 1)
    for i, group in enumerate(fragment_members(NAMES, 4, "strided")):
        landed = sync_offset(i, 4, 4) or 4
        for j in group:
            q0, q1 = quantized[0]["params"][landed - 1][j], quantized[1]["params"][landed - 1][j]
            assert torch.equal(q0, q1)  # every rank sums the same dequantized rows in the same order
            torch.testing.assert_close(q0, reference[0]["params"][landed - 1][j], rtol=0.05, atol=0.05)
