"""Planning-only payload formulas (lowrank, mtdao) and synthetic shapes."""

import pydantic
import pytest

from netbench.model.payloads import LowRankConfig, MTDAOConfig, lowrank_payload, lowrank_rank, mtdao_payload
from netbench.model.synthetic import synthetic_shapes
from netbench.model.traffic import average_bytes_per_step
from netbench.shapes import ParamShape, total_params

SHAPES = [ParamShape("w", (100, 50)), ParamShape("b", (10,)), ParamShape("tiny", (4, 4)), ParamShape("conv", (8, 3, 3, 3))]


def test_lowrank_by_hand():
    ex = {e.label: e for e in lowrank_payload(SHAPES, LowRankConfig(rank=4))}
    # w: (100 + 50) * 4 = 600 < 5000 -> P 100x4, Q 50x4; conv viewed 8 x 27: (35)*4 = 140 < 216 -> P 8x4, Q 27x4
    assert ex["lowrank:P"].bytes_per_step == (400 + 32) * 4
    assert ex["lowrank:Q"].bytes_per_step == (200 + 108) * 4
    # tiny: (4 + 4) * 4 = 32 >= 16 -> dense; the bias is 1-D -> dense
    assert ex["lowrank:dense"].bytes_per_step == (16 + 10) * 4
    assert all(e.collective == "all_reduce" and e.period == 1 for e in ex.values())


def test_lowrank_fractional_rank_and_bf16():
    assert lowrank_rank(100, 50, 0.1) == 5
    assert lowrank_rank(100, 50, 0.001) == 1
    assert lowrank_rank(100, 50, 80) == 50
    ex = lowrank_payload([ParamShape("w", (100, 50))], LowRankConfig(rank=0.1, dtype="bf16"))
    assert sum(e.bytes_per_step for e in ex) == (100 + 50) * 5 * 2


def test_lowrank_full_rank_is_dense():
    ex = lowrank_payload([ParamShape("w", (64, 64))], LowRankConfig(rank=32))
    assert [e.label for e in ex] == ["lowrank:dense"] and ex[0].bytes_per_step == 64 * 64 * 4


def test_lowrank_rank_validation():
    with pytest.raises(pydantic.ValidationError):
        LowRankConfig(rank=2.5)
    with pytest.raises(pydantic.ValidationError):
        LowRankConfig(rank=0)


def test_mtdao_average_bytes():
    ex = mtdao_payload(SHAPES, MTDAOConfig(params_every=4, m1_every=2, m2_every=8))
    dense = total_params(SHAPES) * 4
    assert [e.period for e in ex] == [4, 2, 8]
    assert all(e.bytes_per_step == dense for e in ex)
    assert average_bytes_per_step(ex) == pytest.approx(dense * (1 / 4 + 1 / 2 + 1 / 8))


@pytest.mark.parametrize("count", [1, 63, 4096, 100_003, 1_500_000_000])
def test_synthetic_shapes_hit_the_count(count):
    shapes = synthetic_shapes(count)
    assert total_params(shapes) == count
    mats = [s for s in shapes if len(s.shape) == 2]
    assert all(s.shape[1] % 64 == 0 for s in mats)


def test_synthetic_shapes_are_square_ish():
    shapes = synthetic_shapes(1_500_000_000)
    d = shapes[0].shape[0]
    assert shapes[0].shape == (d, d) and 1024 <= d <= 8192
    assert len(shapes) > 20
