"""The quantized ring's hop codec in the step: each node decodes, adds and encodes (N - 1) / N of the buffer on the
ring's path, priced at the step's calibrated encode + decode; dense rings and overlapped exchanges pay none."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.network import GraphModel
from netbench.model.schemes import scheme_from_config
from netbench.model.step import HostEffects, training_step
from netbench.model.steptime import Scenario
from netbench.shapes import resolve_shapes
from netbench.topology import DirectionSpec, place, star

CALIB = Calibration(
    encode_s_per_param={"diloco": 3e-9, "streaming": 3e-9}, decode_s_per_param={"diloco": 2e-9, "streaming": 2e-9}
)
SHAPES = resolve_shapes("gpt2-small:blocks=2")


def _steps(nodes: int, host: HostEffects | None = None, **settings):
    """(the graph's step before any rule, the training step) of a replicator on a 100mbit star."""
    topology = star(nodes, DirectionSpec(rate_bps=1e8), DirectionSpec(rate_bps=1e8))
    graph = GraphModel(topology, place(topology, "topology"))
    scheme = scheme_from_config(ReplicatorConfig(**settings))
    scenario = Scenario(workers=nodes, compute_s=0.05)
    raw = graph.estimate(scheme, SHAPES, scenario, CALIB).step
    return raw, training_step(graph, scheme, SHAPES, scenario, CALIB, host=host).step


@pytest.mark.parametrize("nodes", [2, 6])
def test_a_quantized_ring_pays_its_hops_codec_on_its_path(nodes):
    raw, step = _steps(nodes, name="diloco", sync_every=4, quant_bits=8)
    hops = (nodes - 1) / nodes * raw.compression_time_s
    assert raw.compression_time_s > 0
    assert step.comm_time_s == pytest.approx(raw.comm_time_s + hops)
    assert step.step_time_s == pytest.approx(raw.step_time_s + hops)


def test_a_run_prices_the_hops_at_the_codec_it_gives():
    host = HostEffects((0.0, 0.0), measured=True, hop_codec_s=0.3)
    raw, step = _steps(6, host, name="diloco", sync_every=4, quant_bits=8)
    assert step.comm_time_s == pytest.approx(raw.comm_time_s + 5 / 6 * 0.3)


def test_a_dense_ring_pays_no_hop_codec():
    raw, step = _steps(6, name="diloco", sync_every=4)
    assert (step.comm_time_s, step.step_time_s) == (raw.comm_time_s, raw.step_time_s)


def test_an_overlapped_exchange_pays_no_hop_codec_on_the_step():
    settings = dict(name="streaming", sync_every=4, fragments=2, fragment_sync_delay=1, quant_bits=8)
    raw, step = _steps(6, **settings)
    assert (step.comm_time_s, step.step_time_s) == (raw.comm_time_s, raw.step_time_s)
