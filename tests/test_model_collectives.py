"""Collective patterns and alpha-beta costs against hand-computed cases."""

import pytest

from netbench.model.collectives import Link, cost, pattern
from netbench.model.framing import Framing

BARE = Framing(gloo_preamble_bytes=0, acks_per_segment=0.0)  # headers only: easy to compute by hand
MBIT100 = Link(up_bps=100e6, down_bps=100e6, alpha_s=0.0)


def test_ring_all_reduce_pattern_matches_gloo():
    p = pattern("all_reduce", "ring", 4_000_000, 4)
    assert p.hops == 6  # 2(N-1) sequential latencies
    assert p.messages_out == 12  # 2 segments per chunk: 4(N-1) messages
    assert p.message_bytes == pytest.approx(500_000)  # B / 2N
    assert p.payload_out == pytest.approx(6_000_000)  # 2(N-1)/N of the buffer
    assert p.critical_bytes == p.payload_out


def test_ring_all_gather_pattern():
    p = pattern("all_gather", "ring", 1_000_000, 5)
    # gloo/allgather.cc: each contribution travels in two halves, N-1 hops
    assert (p.hops, p.messages_out, p.message_bytes, p.payload_out) == (4, 8, 500_000, 4_000_000)


def test_ring_all_reduce_time_by_hand_4_nodes_100mbit():
    c = cost(pattern("all_reduce", "ring", 4_000_000, 4), MBIT100, BARE)
    segments = 12 * -(-500_000 // 1448)  # 346 segments per 500 kB message
    expected = 8 * (6_000_000 + segments * 66) / 100e6
    assert c.time_s == pytest.approx(expected)
    assert c.time_s == pytest.approx(0.50, rel=0.01)  # measured 0.503 s through tbf (docs/benchmarks)
    assert c.tx.payload == pytest.approx(6_000_000) and c.rx.payload == pytest.approx(6_000_000)
    assert c.tx.overhead == pytest.approx(segments * 66)


def test_ring_all_reduce_2_nodes():
    c = cost(pattern("all_reduce", "ring", 4_000_000, 2), MBIT100, BARE)
    assert c.tx.payload == pytest.approx(4_000_000)
    assert c.time_s == pytest.approx(8 * 4_000_000 / (100e6 * 1448 / 1514), rel=2e-3)


def test_latency_term_counts_hops():
    link = Link(100e6, 100e6, alpha_s=0.01)
    ar = cost(pattern("all_reduce", "ring", 8, 8), link, BARE)
    assert ar.latency_s == pytest.approx(14 * 0.01)
    ag = cost(pattern("all_gather", "ring", 8, 8), link, BARE)
    assert ag.latency_s == pytest.approx(7 * 0.01)
    assert ag.time_s == pytest.approx(ag.latency_s + ag.transfer_s)


def test_acks_compete_on_the_uplink():
    with_acks = Framing(gloo_preamble_bytes=0, acks_per_segment=0.5)
    p = pattern("all_gather", "ring", 1448 * 1000, 3)  # 2 messages of 1000 segments per node
    bare = cost(p, MBIT100, BARE)
    acked = cost(p, MBIT100, with_acks)
    # every node also sends half an ACK per segment it receives, on the same uplink as its data
    assert acked.tx.total - bare.tx.total == pytest.approx(2 * 1000 * 33)
    assert acked.transfer_s / bare.transfer_s == pytest.approx((1514 + 33) / 1514)


def test_two_node_ring_sends_pure_acks():
    """N=2: one connection carries data both ways, yet captured gloo rings send pure ACKs (0.45-0.67
    per data segment at 10-100mbit, as 4-node rings do): they compete with data like any ring's."""
    with_acks = Framing(gloo_preamble_bytes=0, acks_per_segment=0.5)
    for kind in ("all_reduce", "all_gather"):
        p = pattern(kind, "ring", 4_000_000, 2)
        assert not p.bidirectional
        assert cost(p, MBIT100, with_acks).tx.total > cost(p, MBIT100, BARE).tx.total
    assert not pattern("all_reduce", "ring", 4_000_000, 3).bidirectional
    assert pattern("all_reduce", "halving_doubling", 4_000_000, 8).bidirectional
    assert not pattern("all_reduce", "tree", 4_000_000, 8).bidirectional


def test_gloo_timings_measured_through_tbf_at_100mbit():
    """Measured through tbf at 100mbit (docs/benchmarks): 4 MB all_reduce 0.335 s (2 nodes), 0.503 s (4 nodes);
    all_gather of 4 MB per rank on 4 nodes 1.01-1.06 s. The default framing must land within a few percent."""
    f = Framing()
    ar2 = cost(pattern("all_reduce", "ring", 4e6, 2), MBIT100, f).time_s
    ar4 = cost(pattern("all_reduce", "ring", 4e6, 4), MBIT100, f).time_s
    ag4 = cost(pattern("all_gather", "ring", 4e6, 4), MBIT100, f).time_s
    assert ar2 == pytest.approx(0.335, rel=0.025)  # pure ACKs compete at N=2 too (captured): the model says 0.342
    assert ar4 == pytest.approx(0.503, rel=0.03)
    assert 1.01 * 0.97 < ag4 < 1.06 * 1.03


def test_asymmetric_link_slower_direction_bounds():
    p = pattern("all_gather", "ring", 1_000_000, 4)
    sym = cost(p, Link(100e6, 100e6, 0), BARE)
    slow_down = cost(p, Link(100e6, 25e6, 0), BARE)
    slow_up = cost(p, Link(25e6, 100e6, 0), BARE)
    assert slow_down.transfer_s == pytest.approx(4 * sym.transfer_s)
    assert slow_up.transfer_s == pytest.approx(4 * sym.transfer_s)


def test_tree_all_reduce():
    p = pattern("all_reduce", "tree", 1000, 8)
    assert p.hops == 6  # binomial reduce + broadcast, log2(8) levels each
    assert p.critical_bytes == 6 * 1000
    assert pattern("all_reduce", "tree", 1000, 5).hops == 6  # ceil(log2 5) = 3


def test_halving_doubling_power_of_two_and_not():
    p = pattern("all_reduce", "halving_doubling", 1000, 8)
    assert p.hops == 6 and p.payload_out == pytest.approx(2 * 7 / 8 * 1000)
    q = pattern("all_reduce", "halving_doubling", 1000, 6)  # 4-node core + 2 extra exchanges
    assert q.hops == 4 + 2 and q.payload_out == pytest.approx(2 * 3 / 4 * 1000 + 2000)
    g = pattern("all_gather", "halving_doubling", 10, 5)
    assert g.hops == 3 and g.payload_out == 40


def test_nothing_moves():
    assert pattern("none", "ring", 100, 4) is None
    assert pattern("all_reduce", "ring", 0, 4) is None
    assert pattern("all_reduce", "ring", 100, 1) is None
    assert cost(None, MBIT100, BARE).time_s == 0


def test_more_nodes_cost_more_latency_but_bounded_ring_bandwidth():
    link = Link(1e9, 1e9, 1e-4)
    t = [cost(pattern("all_reduce", "ring", 1e8, n), link, BARE) for n in (2, 16, 128)]
    assert t[0].latency_s < t[1].latency_s < t[2].latency_s
    assert all(c.transfer_s < 2 * 8 * 1e8 / 1e9 * 1.1 for c in t)  # never more than 2B/bw (+framing)
