"""The striding replicator's declaration: every n-th element of the flat momentum (n = 1 / rate), all-reduced."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations.full_spec import flat_all_reduce
from netbench.declarations.random_spec import SUBSET_COST_SETTINGS, SubsetSettings, rate_compression
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset
from netbench.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from netbench.shapes import ParamShape


def stride_of(config: Settings) -> int:
    """n = round(1 / rate), at least 1."""
    return max(1, round(1.0 / config.rate))


def slots(shapes: Sequence[ParamShape], config: Settings) -> int:
    """``ceil(P / n)`` values: the last one a zero pad on steps whose offset leaves one element fewer."""
    return math.ceil(sum(s.numel for s in shapes) / stride_of(config))


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return flat_all_reduce(slots(shapes, config), DTYPE_BYTES[config.value_dtype], config)


SPEC = ReplicatorSpec(
    codec_bytes_per_param=50,
    state_bytes_per_param=8,  # the decoupled momentum and the update, fp32 (plain SGD steps)
    name="striding",
    summary="every n-th element of the decoupled momentum (n = 1/rate, rotating offset), all-reduced",
    collective="all-reduce",
    payload=payload,
    codec="netbench.replicators.striding:StridingReplicator",
    order=3,
    settings=SubsetSettings,
    test_preset=TestPreset(check=dict(rate=0.3, lr=0.01), train=dict(rate=0.25, lr=0.003)),
    cost_settings=SUBSET_COST_SETTINGS,
    color="#9467bd",
    compression=rate_compression,
    compression_knob="rate",
)
