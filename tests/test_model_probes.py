"""A fan-out's spurious tail-loss probes: which flows wait past the probe timeout, and the bytes the model adds."""

from __future__ import annotations

import pytest

from netbench.model.collectives import Link, cost, flow_of, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.network import GraphModel, _link_bytes
from netbench.model.probes import DSACK_OPTION_BYTES, PROBES_PER_LATE_FLOW, late_flows, probe_bytes
from netbench.model.steptime import Scenario, call_cost
from netbench.topology import DirectionSpec, place, star

MBIT = 1e6
SIGNS = 49_248  # 1-bit Adam's packed signs of a 394k-parameter model at 6 nodes (n' / 8)


def _message_wire(framing: Framing, message: float) -> float:
    stream = message + framing.gloo_preamble_bytes
    return stream + framing.segments(stream) * framing.header_bytes


@pytest.mark.parametrize(
    ("nodes", "rate", "delay", "late"),
    [
        (6, 10 * MBIT, 0.0, 4),  # 6.9 ms a message: every flow but the first waits past 4 ms
        (4, 10 * MBIT, 0.0, 2),
        (6, 100 * MBIT, 0.0, 0),  # 0.69 ms a message: the last waits 2.8 ms, within the timer's 4 ms
        (6, 40 * MBIT, 0.0, 2),  # 1.7 ms a message: the fourth and fifth wait past 4 ms
        (6, 10 * MBIT, 0.020, 0),  # 44 ms of slack: no flow waits that long
        (6, 1000 * MBIT, 0.0, 0),
        (2, 10 * MBIT, 0.0, 0),  # one flow waits behind nothing
    ],
)
def test_flows_that_wait_behind_the_others_past_the_probe_timeout_are_late(nodes, rate, delay, late):
    framing = Framing()
    wire = _message_wire(framing, SIGNS / nodes)
    assert late_flows(nodes - 1, wire, rate, delay) == late


def test_a_probe_resends_the_messages_last_segment_and_draws_one_duplicate_sack():
    framing = Framing()
    message = SIGNS / 6  # 8208 bytes + gloo's 48-byte preamble: 5 full segments and a 1016-byte tail
    forward, reverse = probe_bytes(framing, 5, message, 10 * MBIT, 0.0)
    probes = 4 * PROBES_PER_LATE_FLOW
    assert forward.total == pytest.approx(probes * (1016 + framing.header_bytes))
    assert reverse.total == pytest.approx(probes * (framing.ack_frame_bytes + DSACK_OPTION_BYTES))
    assert probe_bytes(framing, 5, message, None, 0.0)[0].total == 0


def test_an_all_to_all_is_priced_with_its_probes_and_a_ring_without():
    framing, link = Framing(), Link(10 * MBIT, 10 * MBIT, 1e-4, one_way_s=0.0)
    a2a = pattern("all_to_all", "ring", SIGNS, 6)
    assert a2a is not None and a2a.fan_out
    plain = framing.flow(a2a.messages_out, a2a.message_bytes, path_bps=10 * MBIT)
    priced = cost(a2a, link, framing)
    extra = probe_bytes(framing, a2a.messages_out, a2a.message_bytes, 10 * MBIT, 0.0)
    assert extra[0].total > 0
    assert priced.tx.total == pytest.approx(plain.forward.total + plain.reverse.total + extra[0].total + extra[1].total)
    ring = pattern("all_gather", "ring", SIGNS / 6, 6)
    assert ring is not None and not ring.fan_out
    assert flow_of(ring, framing, 10 * MBIT, 10 * MBIT, 0.0) == framing.flow(
        ring.messages_out, ring.message_bytes, path_bps=10 * MBIT
    )
    delayed = cost(a2a, Link(10 * MBIT, 10 * MBIT, 0.02, one_way_s=0.02), framing)
    assert delayed.tx.total == pytest.approx(plain.forward.total + plain.reverse.total)


def test_a_graphs_links_carry_the_probes_the_star_prices():
    """On a 6-node star at 10mbit each access link carries what the star prices for a rank's all_to_all: the
    framing's bytes and the probes of its 4 late flows."""
    ex, scenario = Exchange("all_to_all", SIGNS), Scenario(workers=6)
    topo = star(6, DirectionSpec(rate_bps=10 * MBIT), DirectionSpec(rate_bps=10 * MBIT))
    loads = _link_bytes(GraphModel(topo, place(topo, "topology")).flat, [ex], scenario)
    star_tx = call_cost(ex, 6, Link(10 * MBIT, 10 * MBIT, 0.0), scenario.framing, "ring").tx.total
    a2a = pattern("all_to_all", "ring", SIGNS, 6)
    assert a2a is not None
    plain = scenario.framing.flow(a2a.messages_out, a2a.message_bytes, path_bps=10 * MBIT)
    assert star_tx > plain.forward.total + plain.reverse.total
    assert {round(b, 6) for b in loads.values()} == {round(star_tx, 6)}


def test_a_fan_out_through_a_fast_uplink_draws_no_probes_on_a_slow_path():
    """The messages wait in the sender's uplink: at 1gbit none waits 4 ms, whatever the receiver's downlink."""
    framing = Framing()
    a2a = pattern("all_to_all", "ring", SIGNS, 6)
    assert a2a is not None
    plain = framing.flow(a2a.messages_out, a2a.message_bytes, path_bps=10 * MBIT)
    fast_up = cost(a2a, Link(1000 * MBIT, 10 * MBIT, 1e-4, one_way_s=0.0), framing)
    assert fast_up.tx.total == pytest.approx(plain.forward.total + plain.reverse.total)
    slow_up = cost(a2a, Link(10 * MBIT, 1000 * MBIT, 1e-4, one_way_s=0.0), framing)
    assert slow_up.tx.total > fast_up.tx.total
