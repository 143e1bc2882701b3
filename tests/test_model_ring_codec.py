"""The quantized ring in the step: each node decodes, adds and encodes (N - 1) / N of the buffer on the ring's path,
priced at the step's calibrated encode + decode (dense rings and overlapped exchanges pay none), and its wire is framed
as its one message a hop."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.collectives import Link, cost, pattern
from netbench.model.framing import Framing
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


@pytest.mark.parametrize("nodes", [2, 4, 6])
def test_the_quantized_ring_sends_one_message_a_hop(nodes):
    ring, gloo = pattern("p2p_ring", "ring", 1e6, nodes), pattern("all_reduce", "ring", 1e6, nodes)
    assert (ring.hops, ring.messages_out, ring.message_bytes) == (2 * (nodes - 1), 2 * (nodes - 1), 1e6 / nodes)
    assert (ring.payload_out, ring.critical_bytes) == (gloo.payload_out, gloo.critical_bytes)
    assert ring.messages_out * ring.message_bytes == pytest.approx(ring.payload_out)


def test_a_quantized_rings_wire_is_framed_as_its_messages():
    """Half the messages of gloo's ring of the same bytes: half its preambles, notifications and short last
    segments on the wire."""
    raw, _ = _steps(6, name="diloco", sync_every=4, quant_bits=8)
    (ring,) = [ex for ex in raw.exchanges if ex.moves_bytes]
    assert ring.ring_kind == "p2p_ring"
    ring_tx = cost(pattern("p2p_ring", "ring", ring.bytes_per_step, 6), Link(1e8, 1e8, 0.0), Framing()).tx.total
    gloo_tx = cost(pattern("all_reduce", "ring", ring.bytes_per_step, 6), Link(1e8, 1e8, 0.0), Framing()).tx.total
    assert raw.tx.total == pytest.approx(ring_tx / ring.period, rel=1e-3)
    assert raw.tx.total < gloo_tx / ring.period
