"""Compute utilisation against published figures: Streaming DiLoCo's Table 4, DeMo's Table 1 bytes."""

import pytest

from netbench.model.backends import CodecCost, IdealBackend
from netbench.model.compute import model_shape
from netbench.model.schemes import SchemeSettings, build_scheme, shape_key
from netbench.model.shapes_from_count import synthetic_shapes
from netbench.model.steptime import Scenario
from netbench.model.utilization import PAPER_GRID, bandwidth_for, on_grid, token_budget
from netbench.replicators.config import ReplicatorConfig
from netbench.replicators.registry import declared_payload
from netbench.shapes import ParamShape

# arXiv 2501.18512, Table 4: Gbit/s to reach 50/80/90/95/99 % compute utilisation (H = 100 for DiLoCo)
TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)
TABLE4 = {
    ("1B", 24, 0.1): {"full": (86.8, 152.6, 184.2, 222.3, 569.0), "diloco": (1.4, 6.2, 13.3, 23.3, 86.8)},
    ("10B", 48, 0.8): {"full": (104.8, 222.3, 222.3, 268.3, 471.5), "diloco": (1.7, 7.5, 16.0, 33.9, 104.8)},
    ("100B", 108, 4.9): {"full": (184.2, 323.8, 390.7, 390.7, 471.5), "diloco": (3.0, 11.0, 23.3, 49.4, 184.2)},
}
SETTINGS = {"full": SchemeSettings(grad_dtype="bf16"), "diloco": SchemeSettings(grad_dtype="bf16", sync_every=100)}


def grid_steps(ours_bps: float, paper_gbit: float) -> int:
    """How many steps of the paper's grid ours lies from the paper's figure."""
    paper = min(range(len(PAPER_GRID)), key=lambda i: abs(PAPER_GRID[i] / 1e9 - paper_gbit))
    return PAPER_GRID.index(ours_bps) - paper


def test_the_paper_grid_is_fifty_log_spaced_points_from_0_1_to_1000_gbit():
    assert len(PAPER_GRID) == 50 and PAPER_GRID[0] == pytest.approx(0.1e9) and PAPER_GRID[-1] == pytest.approx(1e12)
    printed = {v for columns in TABLE4.values() for figures in columns.values() for v in figures}
    for value in printed:  # each a grid point, to the paper's one decimal (it truncates some, rounds others)
        assert min(abs(value - g / 1e9) for g in PAPER_GRID) <= 0.06, value


@pytest.mark.parametrize("scale", list(TABLE4), ids=lambda s: s[0])
def test_streaming_diloco_table_4_data_parallel_and_diloco_within_one_grid_step(scale):
    """2 workers (datacenters), bf16 gradients and outer gradients reduced layer by layer during backward, forward a
    third of the step, the bandwidth a pure rate (the paper's simulator: docs/concepts/model.md lists the rest)."""
    name, layers, step_s = scale
    params = {"1B": 1e9, "10B": 1e10, "100B": 1e11}[name]
    shapes = shape_key(synthetic_shapes(int(params)))
    backend = IdealBackend(shapes=shapes, model=model_shape(shapes, layers=layers), codec=CodecCost(None))
    scenario = Scenario(nodes=2, up_bps=1e9, down_bps=1e9, compute_s=step_s)
    for replicator, paper in TABLE4[scale].items():
        scheme = build_scheme(replicator, SETTINGS[replicator])
        for target, figure in zip(TARGETS, paper):
            answer = bandwidth_for(backend.step, scheme, scenario, target)
            ours = on_grid(answer["bw_bps"])
            assert ours is not None, answer
            assert abs(grid_steps(ours, figure)) <= 1, (replicator, target, ours / 1e9, figure)


def test_demo_table_1_bytes_per_step_are_exact():
    """DeMo (arXiv 2411.19870) Table 1: 110.32 MB per GPU per step for the 1B model (OLMo-1B: d 2048, 16 blocks,
    fused qkv, SwiGLU 8192, vocabulary 50304 tied), chunk 64, top-k 32, fp32 values and int64 indices."""
    d, blocks, vocab = 2048, 16, 50304
    shapes = [ParamShape("wte", (vocab, d))]
    for i in range(blocks):
        shapes += [
            ParamShape(f"blocks.{i}.att_proj", (3 * d, d)),
            ParamShape(f"blocks.{i}.attn_out", (d, d)),
            ParamShape(f"blocks.{i}.ff_proj", (16384, d)),
            ParamShape(f"blocks.{i}.ff_out", (d, 8192)),
        ]
    config = ReplicatorConfig(name="dct", chunk=64, topk=32, value_dtype="fp32", index_dtype="int64")
    assert sum(s.numel for s in shapes) == 1_176_764_416
    assert declared_payload(shapes, config, 64).bytes_per_step == 110_321_664


def test_a_token_budget_is_steps_times_the_step():
    shapes = shape_key(synthetic_shapes(10**9))
    backend = IdealBackend(shapes=shapes, model=model_shape(shapes, layers=8), codec=CodecCost(None))
    est = backend.step(
        build_scheme("full", SchemeSettings()), Scenario(nodes=4, up_bps=1e10, down_bps=1e10, compute_s=1)
    )
    budget = token_budget(est, 1e9, 1e6)
    assert budget["steps"] == 1000
    assert budget["wall_s"] == pytest.approx(1000 * est.step_time_s)
    assert budget["bytes_per_node"] == pytest.approx(1000 * est.tx.total)


def test_a_target_out_of_reach_says_why():
    shapes = shape_key(synthetic_shapes(10**9))
    backend = IdealBackend(shapes=shapes, model=model_shape(shapes, layers=8), codec=CodecCost(None))
    scheme = build_scheme("full", SchemeSettings())
    no_compute = bandwidth_for(backend.step, scheme, Scenario(nodes=4), 0.5)
    assert no_compute["bw_bps"] is None and "compute time is 0" in no_compute["reason"]
