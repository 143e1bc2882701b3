"""Accelerator profiles: data with a source for every table, and the compute time they give."""

import math

import pytest

from netbench.model.accelerators import NCCL_GENERATIONS, accelerator, accelerators
from netbench.model.compute import ComputeSpec, compute_time_s, flops_per_token, model_shape
from netbench.shapes import resolve_shapes

BOUGHT = ("h100-sxm", "h200", "a100-80gb", "l40s", "mi300x", "b200")


def test_the_accelerators_people_rent_are_declared_with_their_sources():
    declared = accelerators()
    assert set(BOUGHT) <= set(declared)
    for acc in declared.values():
        assert acc.source.startswith("https://"), acc.name
        assert acc.note, acc.name  # what the datasheet prints, beside the dense figure netbench takes
        assert acc.generation in NCCL_GENERATIONS
        assert 1e14 < acc.bf16_flops < 1e16 and 5e11 < acc.hbm_Bps < 2e13 and 1e10 < acc.memory_bytes < 1e12


def test_dense_figures_are_half_the_datasheets_sparse_ones():
    assert accelerator("h100-sxm").bf16_flops == pytest.approx(1979e12 / 2, rel=1e-3)
    assert accelerator("a100-80gb").bf16_flops == pytest.approx(624e12 / 2, rel=1e-3)
    assert accelerator("mi300x").bf16_flops == pytest.approx(2614.9e12 / 2, rel=1e-3)


def test_names_are_case_insensitive_and_unknown_ones_name_the_choices():
    assert accelerator(" H200 ").name == "h200"
    with pytest.raises(ValueError, match="h100-sxm"):
        accelerator("tpu-v5")


def test_flops_per_token_is_six_n_plus_the_attention_scores():
    model = model_shape(resolve_shapes("llama-7b"))
    assert (model.layers, model.d_model) == (32, 4096)
    assert flops_per_token(model, 2048) == 6 * model.params + 12 * 32 * 4096 * 2048


def test_layers_come_from_the_names_and_hold_every_parameter():
    shapes = resolve_shapes("gpt2-small")
    model = model_shape(shapes)
    assert model.layers == 12 and sum(model.layer_params) == model.params
    assert model.layer_params[0] > model.layer_params[1]  # the embedding joins the first layer
    equal = model_shape(shapes, layers=5)
    assert equal.layers == 5 and sum(equal.layer_params) == model.params


def test_compute_time_spreads_the_global_batch_over_the_workers():
    model = model_shape(resolve_shapes("llama-7b"))
    spec = ComputeSpec(accelerator("h100-sxm"), mfu=0.5, tokens_per_step=2**20, seq_len=2048)
    one = compute_time_s(model, spec, 8)
    assert compute_time_s(model, spec, 64) == pytest.approx(one / 8)
    assert one == pytest.approx(2**20 * flops_per_token(model, 2048) / (8 * 989.4e12 * 0.5))
    assert math.isfinite(one) and 1 < one < 100
    with pytest.raises(ValueError):
        ComputeSpec(accelerator("h100-sxm"), mfu=1.5, tokens_per_step=1, seq_len=1)
