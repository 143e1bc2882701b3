"""Synthetic shapes for ``plan --params`` (the lowrank and mtdao formulas are their replicators', tested beside
them).
"""

import pytest

from netbench.model.shapes_from_count import synthetic_shapes
from netbench.shapes import total_params


@pytest.mark.parametrize("count", [1, 63, 4096, 100_003, 1_500_000_000])
def test_synthetic_shapes_hit_the_count(count):
    shapes = synthetic_shapes(count)
    assert total_params(shapes) == count
    mats = [s for s in shapes if len(s.shape) == 2]
    assert all(s.shape[1] % 64 == 0 for s in mats)


def test_synthetic_shapes_in_layers_name_them_and_hit_the_count():
    shapes = synthetic_shapes(10**9, layers=24)
    assert total_params(shapes) == 10**9
    assert {s.name.split(".")[1] for s in shapes} == {str(i) for i in range(24)}
    with pytest.raises(ValueError, match="layers must be between 1"):
        synthetic_shapes(10, layers=11)


def test_synthetic_shapes_are_square_ish():
    shapes = synthetic_shapes(1_500_000_000)
    d = shapes[0].shape[0]
    assert shapes[0].shape == (d, d) and 1024 <= d <= 8192
    assert len(shapes) > 20
