"""Framing: MSS, frame size, efficiency and ACK/control bytes against hand-computed cases."""

import math

import pydantic
import pytest

from netbench.model.framing import Framing, LinkBytes


def test_mtu_1500_ceiling_is_1448_of_1514():
    f = Framing()
    assert (f.mss, f.frame_bytes, f.ack_frame_bytes) == (1448, 1514, 66)
    assert f.efficiency() == pytest.approx(1448 / 1514)
    assert f.efficiency() == pytest.approx(0.9564, abs=1e-4)


def test_ack_competition_lowers_efficiency_by_half_an_ack_per_segment():
    f = Framing()
    assert f.efficiency(ack_competition=True) == pytest.approx(1448 / (1514 + 33))
    assert Framing(acks_per_segment=1.0).efficiency(True) == pytest.approx(1448 / (1514 + 66))


def test_jumbo_mtu():
    f = Framing(mtu=9000)
    assert f.mss == 8948 and f.frame_bytes == 9014


def test_segments_round_up_and_never_zero():
    f = Framing()
    assert f.segments(0) == 1
    assert f.segments(1448) == 1
    assert f.segments(1449) == 2
    assert f.segments(10 * 1448) == 10


def test_bare_tcp_flow_headers_and_acks():
    f = Framing(gloo_preamble_bytes=0, acks_per_segment=0.5)
    w = f.flow(messages=10, message_bytes=10 * 1448)  # 100 full segments
    assert w.forward == LinkBytes(payload=144_800, overhead=100 * 66)
    assert w.reverse == LinkBytes(payload=0, overhead=50 * 66)  # one ACK per 2 segments


def test_gloo_control_ops_by_hand():
    f = Framing()  # preamble 48, acks 0.5
    w = f.flow(messages=1, message_bytes=1400)  # 1400 + 48 preamble = one full segment
    # forward: data preamble + send-ready notify (48 each), 2 segments' headers, ACKs for the recv-ready notify's
    # 48 bytes (ACKs go by full segments' worth of bytes: 0.5 per 1448)
    assert w.forward.payload == 1400
    assert w.forward.overhead == pytest.approx(96 + 2 * 66 + 0.5 * 66 * 48 / 1448)
    # reverse: recv-ready notify (48 + 66 header) + ACKs for the 1496 bytes of the 2 forward segments
    assert w.reverse.payload == 0
    assert w.reverse.overhead == pytest.approx(48 + 66 + 0.5 * 66 * (1400 + 96) / 1448)


def test_short_segments_draw_acks_by_their_bytes_not_their_count():
    # A receiver ACKs once more than a full segment is unacknowledged: a message's short last segment and the 48-byte
    # ops add bytes toward the next ACK instead of one ACK per two segments.
    f = Framing(gloo_preamble_bytes=0, acks_per_segment=0.5)
    w = f.flow(messages=2, message_bytes=4 * 1448 + 100)  # 5 segments each, the fifth 100 bytes
    assert w.reverse.overhead == pytest.approx(0.5 * 66 * 2 * (4 * 1448 + 100) / 1448)
    assert w.reverse.overhead < 0.5 * 66 * 2 * 5  # fewer ACKs than one per two segments


def test_piggybacked_flow_sends_no_pure_acks():
    f = Framing(gloo_preamble_bytes=0, acks_per_segment=0.5)
    w = f.flow(messages=10, message_bytes=10 * 1448, piggyback=True)
    assert w.forward.overhead == 100 * 66 and w.reverse.total == 0


def test_no_messages_no_bytes():
    w = Framing().flow(0, 1000)
    assert w.forward.total == 0 and w.reverse.total == 0


@pytest.mark.parametrize("kwargs", [{"mtu": 100}, {"acks_per_segment": 2}, {"acks_per_segment": -0.1}])
def test_invalid_framing_rejected(kwargs):
    with pytest.raises(pydantic.ValidationError):
        Framing(**kwargs)


def test_efficiency_tends_to_ceiling_for_large_messages():
    f = Framing(gloo_preamble_bytes=0, acks_per_segment=0)
    w = f.flow(1, 1448 * 1000)
    assert w.forward.payload / w.forward.total == pytest.approx(f.efficiency())
    small = f.flow(1, 100)
    assert math.isclose(small.forward.total, 100 + 66)


# ACKs per segment: delayed ACK (0.5) for frames at the line rate and a train's first frames, one per coalesced skb
# for the rest of a train that leaves the shaper's token bucket back-to-back.


def test_acks_stay_at_delayed_ack_rate_without_a_path():
    f = Framing()
    assert f.acks_per_data_segment(400_000) == 0.5
    assert f.acks_per_data_segment(400_000, None) == f.acks_per_segment


def test_slow_path_acks_one_per_two_segments():
    f = Framing()
    # 10mbit: the bucket (10 frames) is shorter than a reader's wake-up, so every segment is ACKed as if paced
    assert f.acks_per_data_segment(200_000, 10e6) == pytest.approx(0.5)
    assert f.acks_per_data_segment(200_000, 100e6) == pytest.approx(0.5)


def test_fast_path_sends_fewer_acks_per_segment():
    f = Framing()
    rates = [10e6, 100e6, 1e9, 10e9]
    acks = [f.acks_per_data_segment(2_000_000, r) for r in rates]
    assert acks == sorted(acks, reverse=True)
    assert acks[-1] < 0.25 * acks[0]


def test_short_messages_are_acked_as_delayed_ack_on_any_path():
    f = Framing()
    # a few segments arrive before the reader does: one ACK per two, however fast the link
    assert f.acks_per_data_segment(8_000, 10e9) == pytest.approx(0.5)


def test_a_coalesced_train_costs_at_least_one_ack_per_64_kib():
    f = Framing(wakeup_segments=0)
    segments = f.segments(10_000_000)
    acks = f.acks_per_data_segment(10_000_000, 100e9) * segments  # the bucket (25 MB) holds the whole message
    assert acks == math.ceil(10_000_000 / f.coalesced_bytes)
    assert f.acks_per_data_segment(10_000_000, 100e9) >= f.mss / f.coalesced_bytes


def test_bytes_beyond_the_bucket_are_paced_and_acked_one_per_two():
    f = Framing(wakeup_segments=0)
    burst = 250_000  # 2 ms of 1 Gbit/s
    message = 4 * burst
    paced_segments = f.segments(message) - math.ceil(burst / f.mss)
    expected = (0.5 * paced_segments + math.ceil(burst / f.coalesced_bytes)) / f.segments(message)
    assert f.acks_per_data_segment(message, 1e9) == pytest.approx(expected, rel=0.02)


def test_longer_wakeup_means_more_acks():
    quick, slow = Framing(wakeup_segments=5), Framing(wakeup_segments=100)
    assert quick.acks_per_data_segment(200_000, 1e9) < slow.acks_per_data_segment(200_000, 1e9) <= 0.5


def test_flow_reverse_bytes_follow_the_path():
    f = Framing(gloo_preamble_bytes=0)
    slow = f.flow(messages=10, message_bytes=200_000, path_bps=10e6)
    fast = f.flow(messages=10, message_bytes=200_000, path_bps=10e9)
    assert slow.forward == fast.forward  # the data is the same
    assert fast.reverse.total < 0.5 * slow.reverse.total
    assert f.flow(messages=10, message_bytes=200_000, piggyback=True, path_bps=10e6).reverse.total == 0
