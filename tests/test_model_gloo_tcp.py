"""gloo over TCP on a delayed link, against arithmetic written out by hand.

Every case spells out the event times: when an operation is issued, when the receiver's ready
notification arrives (one one-way delay later), when its bytes have left (rate, window, pacing)
and when they arrive (one more delay).
"""

import math

import pytest

from netbench.model.gloo_tcp import (
    BBR_HIGH_GAIN,
    BBR_PACING_MARGIN,
    UNLOADED_PROBE_SHARE,
    KernelTimers,
    Transfer,
    bbr_queue_s,
    bbr_rate_Bps,
    gloo_time,
    pipeline_time_s,
    probe_rtt_s,
    restart_window_bytes,
    ring_operations,
    rto_s,
)
from netbench.tcp import STOCK_LINUX, TcpSettings

MSS = 1448
RATE = 125e6  # payload bytes per second (1 Gbit/s with no framing)
D = 0.05  # one-way delay
RTT = 2 * D
BIG = dict(tcp_wmem_max=1 << 26, tcp_rmem_max=1 << 26)  # buffers that never bind here (window cap 32 MiB)
CUBIC = TcpSettings(cc="cubic", slow_start_after_idle=False, **BIG)
BBR = TcpSettings(cc="bbr", **BIG)
UNPROBED = KernelTimers(expiries_per_window=0)  # no min-RTT window runs out over the priced steps: pacing alone


def t(kind, nbytes, peers, tcp, idle=0.05, rate=RATE, delay=D, overhead=0.0):
    return gloo_time(kind, nbytes, peers, rate, delay, overhead, MSS, tcp, idle, timers=UNPROBED).time_s


def test_ring_operations_follow_gloos_segmenting():
    # 4e6 B on 2 ranks: N_s = roundUp(max(ceil(4e6 / 2^20) = 4, 2P = 4), 2) = 4 segments of 1e6 B,
    # S = 2 per rank, (P - 1) S = 2 operations in each of the two loops.
    assert ring_operations("all_reduce", 4e6, 2) == [(2, 1_000_000), (2, 1_000_000)]
    # 4 ranks: N_s = roundUp(max(4, 8), 4) = 8 segments of 5e5 B, S = 2, 3 x 2 = 6 operations per loop.
    assert ring_operations("all_reduce", 4e6, 4) == [(6, 500_000), (6, 500_000)]
    # 10 MiB on 4 ranks: max(10, 8) = 10 -> 12 segments; ceil(10485760 / 12) = 873814 -> 873816 (4-byte words); S = 3.
    assert ring_operations("all_reduce", 10 * 2**20, 4) == [(9, 873_816), (9, 873_816)]
    # all_gather: one loop of 2 (P - 1) halves of the contribution.
    assert ring_operations("all_gather", 1e6, 4) == [(6, 500_000.0)]


def test_each_pair_of_segments_waits_for_the_ready_notification():
    # cubic, warm window (2 x 2e6 B flight = 4e6 B >= what is sent): no window limit, no pacing.
    # Loop 1: ops 0 and 1 issued at 0; the receiver's notifications arrive at D = 0.05;
    # op 0 leaves 0.05 .. 0.058 (1e6 / 125e6 = 8 ms), op 1 0.058 .. 0.066; they arrive at 0.108 and 0.116.
    # Loop 2 starts at 0.116 and takes as long: 0.232 s.  Alpha-beta says 2 D + 2 x 8 ms = 0.116 s.
    assert t("all_reduce", 4e6, 2, CUBIC) == pytest.approx(2 * (2 * D + 2 * 1e6 / RATE))
    assert t("all_reduce", 4e6, 2, CUBIC) == pytest.approx(0.232)


def test_a_buffer_smaller_than_one_word_per_segment_passes_hop_by_hop():
    # 4 B on 4 ranks: one non-empty segment goes round the ring, reduce-scatter then all-gather:
    # 2 (P - 1) = 6 hops of one delay, one software overhead and 4 B of transfer each.
    assert t("all_reduce", 4, 4, CUBIC, overhead=0.001) == pytest.approx(6 * (D + 0.001 + 4 / RATE))


def test_window_limit_sends_one_window_per_round_trip():
    # Buffers of 200000 B: Linux leaves about half for payload, a window of 1e5 B.
    # all_gather of 4e5 B on 2 ranks: two ops of 2e5 B, issued at 0, ready at 0.05.
    # Round 1 (from 0.05): 1e5 B leave in 0.8 ms; the window is used up until the ACKs at 0.15.
    # Round 2 (0.15): op 0's last 1e5 B -> op 0 arrives at 0.1508 + 0.05 = 0.2008.
    # Op 1 has no room left in round 2: its halves leave at 0.25 and 0.35, the last at 0.3508,
    # arriving 0.4008 s = D + 3 RTT + 1e5 / RATE + D.
    small = TcpSettings(cc="cubic", slow_start_after_idle=False, tcp_wmem_max=200_000, tcp_rmem_max=200_000)
    assert t("all_gather", 4e5, 2, small) == pytest.approx(D + 3 * RTT + 1e5 / RATE + D)
    # With room for all of it, both ops leave back to back from 0.05 and the last arrives at 0.1032.
    assert t("all_gather", 4e5, 2, CUBIC) == pytest.approx(D + 4e5 / RATE + D)


def test_slow_start_after_idle_restarts_the_window():
    # RTO = RTT + 200 ms = 0.3 s. After 1 s idle: 3 halvings (1.0 - 3 x 0.3 = 0.1 > 0, then < 0).
    assert rto_s(RTT) == pytest.approx(0.3)
    assert restart_window_bytes(STOCK_LINUX, MSS, 1.0, RTT, 800_000) == pytest.approx(100_000)
    assert restart_window_bytes(STOCK_LINUX, MSS, 0.29, RTT, 800_000) == 800_000  # idle shorter than the RTO: kept
    assert restart_window_bytes(STOCK_LINUX, MSS, 100.0, RTT, 800_000) == 10 * MSS  # never below the initial window
    assert restart_window_bytes(STOCK_LINUX, MSS, 1e4, RTT, 800_000) == 10 * MSS  # 33,000 halvings: no overflow
    # all_gather of 4e5 B (flight 4e5 B, warm window 2 x flight = 8e5 B) after 1 s idle: window 1e5 B.
    # Round 1 (0.05): op 0's first 1e5 B; ACKs at 0.15 double the window to 2e5 B.
    # Round 2 (0.15): op 0's last 1e5 B (0.1508, arrives 0.2008), op 1's first 1e5 B (0.1516); window used.
    # Round 3 (0.25, window 4e5 B): op 1's last 1e5 B leave by 0.2508 and arrive at 0.3008.
    restart = TcpSettings(cc="cubic", slow_start_after_idle=True, **BIG)
    assert t("all_gather", 4e5, 2, restart, idle=1.0) == pytest.approx(D + 2 * RTT + 1e5 / RATE + D)
    # the same call after 50 ms idle, or with the restart switched off: no restart, 0.1032 s
    assert t("all_gather", 4e5, 2, restart, idle=0.05) == pytest.approx(D + 4e5 / RATE + D)
    assert t("all_gather", 4e5, 2, CUBIC, idle=1.0) == pytest.approx(D + 4e5 / RATE + D)


def test_bbr_paces_application_limited_bursts_below_the_link_rate():
    # bbr stays in STARTUP on app-limited bursts and paces at (2.885 - 1) x flight / RTT.
    # all_gather of 4e5 B: flight 4e5 B -> 1.885 x 4e5 / 0.1 = 7.54e6 B/s (60 Mbit/s on a 1 Gbit/s link).
    pacing = (BBR_HIGH_GAIN - 1) * 4e5 / RTT
    assert bbr_rate_Bps(4e5, RTT) == pytest.approx(pacing)
    # each op: its first segment at once, the other 2e5 - 1448 B at the pacing rate
    op = (2e5 - MSS) / pacing
    assert t("all_gather", 4e5, 2, BBR, idle=1.0) == pytest.approx(D + 2 * op + D)  # no restart after idle with bbr
    assert t("all_gather", 4e5, 2, BBR) > t("all_gather", 4e5, 2, CUBIC) + 0.04
    # all_reduce of 4e6 B on 2 ranks (measured here: 0.308-0.311 s): flight 2e6 B, pacing 3.77e7 B/s,
    # each 1e6 B op 26.5 ms; a loop is D + 2 ops + D, two loops.
    pacing = (BBR_HIGH_GAIN - 1) * 2e6 / RTT
    op = (1e6 - MSS) / pacing
    assert t("all_reduce", 4e6, 2, BBR) == pytest.approx(2 * (2 * D + 2 * op))
    assert t("all_reduce", 4e6, 2, BBR) == pytest.approx(0.306, abs=1e-3)


def test_a_warm_gossip_pair_paces_its_whole_burst_per_round_trip():
    # the ACK of each side's notification restarts its delivery-rate sample while its burst leaves: the highest sample
    # is the burst per round trip, which bbr keeps, paced at 0.99 x 2.885 x B / RTT (1 %: bbr's pacing margin).
    # 1095680 B at 1 Gbit/s and 50 ms: the burst leaves in 35.0 ms (53.1 ms from an empty pipe)
    nbytes = 1_095_680
    pacing = (1 - BBR_PACING_MARGIN) * BBR_HIGH_GAIN * nbytes / RTT
    assert bbr_rate_Bps(nbytes, RTT, pairwise=True) == pytest.approx(pacing)
    assert nbytes / pacing == pytest.approx(0.0350, abs=1e-4)
    # the partner's notification (D), the first segment at once and the rest at that pace, then D
    assert t("pairwise", nbytes, 2, BBR) == pytest.approx(D + (nbytes - MSS) / pacing + D)
    # the pair's first exchange starts from the initial window, paced as a burst from an empty pipe
    fresh = gloo_time("pairwise", nbytes, 2, RATE, D, 0.0, MSS, BBR, 0.05, fresh=True, timers=UNPROBED).time_s
    assert fresh > 3 * RTT


def test_on_a_link_without_delay_the_pipeline_is_the_link_rate():
    # No delay: the ready notification costs the software overhead only; 2(P-1)/P x M at the rate.
    assert t("all_reduce", 4e6, 4, CUBIC, delay=0.0) == pytest.approx(2 * 3 / 4 * 4e6 / RATE)
    assert t("all_reduce", 4e6, 4, BBR, delay=0.0) == pytest.approx(2 * 3 / 4 * 4e6 / RATE)


def test_long_loops_are_extrapolated_exactly():
    # 200 MB on 2 ranks: ceil(200e6 / 2^20) = 191 -> 192 segments, 96 operations (48 pairs) per loop,
    # more than the 8 simulated before the steady pattern is found. Cubic, warm, t = seg / RATE.
    # First pair: D + 2t + D. Then op k+2 is issued when op k arrives and op k+3 when op k+1 does,
    # t later: each leaves one delay after its issue, so every later pair adds 2D + t.
    seg = ring_operations("all_reduce", 200e6, 2)[0][1]
    tx = seg / RATE
    assert t("all_reduce", 200e6, 2, CUBIC) == pytest.approx(2 * ((2 * D + 2 * tx) + 47 * (2 * D + tx)))
    assert math.isfinite(t("all_reduce", 1e9, 100_000, CUBIC))


def test_bbr_never_paces_slower_than_its_largest_burst_or_its_start():
    # STARTUP only raises the pacing rate: a 1 kB burst paces at the initial 2.885 x 10 x 1448 B / RTT.
    assert bbr_rate_Bps(1000, RTT, initcwnd_bytes=10 * MSS) == pytest.approx(BBR_HIGH_GAIN * 10 * MSS / RTT)
    # A call that shares its connection with a larger burst in the same step goes at that burst's rate:
    # all_gather of 4e5 B paced for an 8e5 B burst: 1.885 x 8e5 / 0.1 = 1.508e7 B/s.
    op = (2e5 - MSS) / ((BBR_HIGH_GAIN - 1) * 8e5 / RTT)
    assert gloo_time(
        "all_gather", 4e5, 2, RATE, D, 0.0, MSS, BBR, 0.05, paced_flight_bytes=8e5, timers=UNPROBED
    ).time_s == pytest.approx(D + 2 * op + D)


def test_in_a_ring_of_two_the_notification_queues_behind_the_receivers_own_data():
    # 8e6 B on 2 ranks: 8 segments of 1e6 B, 4 operations per loop; 1e7 B/s, so t = 0.1 s > D = 0.05 s.
    # One connection carries each rank's data and its ready notifications, in order.
    # Loop 1: ops 0, 1 issued at 0 with nothing queued: ready at 0.05; op 0 leaves 0.05-0.15, op 1 0.15-0.25,
    #   arriving 0.20 and 0.30.
    #   op 2 issued at 0.20 while op 1 (0.15-0.25) is leaving: notification out at 0.25, ready 0.30,
    #   leaves 0.30-0.40, arrives 0.45; op 3 issued at 0.30 behind op 2 (0.30-0.40): ready 0.45,
    #   leaves 0.45-0.55, arrives 0.60.
    # Loop 2 repeats it from 0.60 (the queue is empty by then): 1.20 s in all; per loop the first pair
    # arrives after D + 2t + D, and each later op one delay and one transfer after the one before.
    rate, tx = 1e7, 0.1
    assert t("all_reduce", 8e6, 2, CUBIC, rate=rate) == pytest.approx(2 * ((2 * D + 2 * tx) + 2 * (D + tx)))
    assert t("all_reduce", 8e6, 2, CUBIC, rate=rate) == pytest.approx(1.2)
    # With more ranks the notification goes to the other neighbour, on a connection without data:
    # op 2 (issued 0.20) is ready at 0.25 and leaves 0.25-0.35 (arrives 0.40); op 3 (issued 0.30) ready
    # at 0.35, leaves 0.35-0.45, arrives 0.50: one loop of the same ops takes 0.50 s instead of 0.60 s.
    own = Transfer(cwnd=4e6, cap=32 * 2**20)
    assert pipeline_time_s(4, 1e6, D, 0.0, rate, own, shared=False) == pytest.approx(0.5)
    shared = Transfer(cwnd=4e6, cap=32 * 2**20)
    assert pipeline_time_s(4, 1e6, D, 0.0, rate, shared, shared=True) == pytest.approx(0.6)


def test_skewed_ring_of_two_all_gather_waits_one_more_half() -> None:
    """Hand computation (mechanism 4): 723,456 B per rank at 12.5 MB/s payload, 20 ms one way, a window that never
    binds: unskewed 2 d + 2 x_half = 40 + 57.9 ms; the late rank of a skewed pair waits one more half: + 28.9 ms."""
    from netbench.model.gloo_tcp import gloo_time

    tcp = TcpSettings(cc="cubic", tcp_wmem_max=64 << 20, tcp_rmem_max=64 << 20)
    rate, d, n = 12.5e6, 0.020, 723_456
    half = n / 2 / rate
    plain = gloo_time("all_gather", n, 2, rate, d, 0.0, 1448, tcp, idle_s=0.0)
    skew = gloo_time("all_gather", n, 2, rate, d, 0.0, 1448, tcp, idle_s=0.0, skewed=True)
    assert plain.time_s == pytest.approx(2 * d + 2 * half)
    assert skew.time_s == pytest.approx(2 * d + 3 * half)
    assert gloo_time("all_gather", n, 4, rate, d, 0.0, 1448, tcp, idle_s=0.0, skewed=True) == gloo_time(
        "all_gather", n, 4, rate, d, 0.0, 1448, tcp, idle_s=0.0
    )  # separate connections: no shared queue


@pytest.mark.parametrize(
    ("kind", "peers", "calls", "work", "delay", "expected"),
    [
        ("all_gather", 2, 1, 0.16, 0.020, True),  # gpt2-small:blocks=2 dct: 160 ms of codec per step, 20 ms delay
        ("all_gather", 2, 1, 0.16, 0.100, False),  # a round trip longer than the work: jitter stays below a delay
        ("all_gather", 2, 2, 0.16, 0.020, False),  # pipelined: two calls keep the ranks together
        ("all_gather", 4, 1, 0.16, 0.020, False),  # one connection per neighbour: no shared queue
        ("all_reduce", 2, 1, 0.16, 0.020, False),
        ("all_gather", 2, 1, 0.005, 0.005, False),  # the grid's small dct: 5 ms of codec
        ("all_gather", 2, 1, 0.16, 0.0, False),
    ],
)
def test_skew_expected(kind, peers, calls, work, delay, expected) -> None:
    from netbench.model.gloo_tcp import skew_expected

    assert skew_expected(kind, peers, calls, work, delay) is expected


def test_lead_lag_of_one_call_is_one_half_as_mechanism_four() -> None:
    from netbench.model.gloo_tcp import lead_lag_s

    assert lead_lag_s(1, 1, 0.3, 0.0) == pytest.approx(0.3)  # its second half leaves after the late rank's second
    assert lead_lag_s(0, 1, 0.3, 0.0) == 0.0


def test_lead_lag_by_hand_two_lanes_started_together() -> None:
    """Two calls on two lanes, halves of 1 s, started at once. The late uplink shares between both lanes: every
    first half leaves at 2 s, every second at 4 s. The lead's first halves become ready at 2 s and leave (shared)
    at 4 s, its second halves (ready at 4 s) at 6 s: 2 s after the late rank's last."""
    from netbench.model.gloo_tcp import lead_lag_s

    assert lead_lag_s(2, 2, 1.0, 0.0) == pytest.approx(2.0)


def test_lead_lag_grows_with_the_wire_time_per_half_and_fades_behind_slow_starts() -> None:
    from netbench.model.gloo_tcp import lead_lag_s

    wire = 0.62  # 12 buckets of a 706 KiB step at 10mbit; per-bucket encode 6.5 ms
    slow = lead_lag_s(12, 6, wire / 24, 0.0065)
    fast = lead_lag_s(12, 6, wire / 240, 0.0065)  # the same step at 100mbit
    assert 0.09 < slow < 0.14  # measured: the ranks settled 85-110 ms apart, the lead's uplink idled ~120 ms
    assert fast < slow / 10
    # halves shorter than the gap between starts never share an uplink: each lane's last half alone trails
    assert lead_lag_s(12, 6, 0.001, 0.01) == pytest.approx(0.001)
    # more lanes finishing together leave more of the lead's last halves for the end
    assert lead_lag_s(12, 3, wire / 24, 0.0065) < slow < lead_lag_s(12, 12, wire / 24, 0.0065)


@pytest.mark.parametrize(
    ("kind", "peers", "calls", "delay", "lag", "expected"),
    [
        ("all_gather", 2, 12, 0.0, 0.11, True),  # gpt2-small:blocks=2 dct at 10mbit, no delay
        ("all_gather", 2, 2, 0.020, 0.010, False),  # a lag shorter than a delay: the ranks stay together
        ("all_gather", 2, 1, 0.0, 0.11, False),  # one call: mechanism 4 (skew_expected)
        ("all_gather", 4, 12, 0.0, 0.11, False),  # one connection per neighbour: no shared queue
        ("all_reduce", 2, 12, 0.0, 0.11, False),
    ],
)
def test_pipeline_skew_expected(kind, peers, calls, delay, lag, expected) -> None:
    from netbench.model.gloo_tcp import pipeline_skew_expected

    assert pipeline_skew_expected(kind, peers, calls, 0.16, delay, lag) is expected


def test_a_call_launched_after_free_running_steps_is_entered_skewed_at_any_delay() -> None:
    """An overlapped fragment sync is launched by each rank as its own step ends, after local steps no collective
    aligned: in a ring of two the late rank's notification then queues behind its own first half (mechanism 4),
    with or without a delay, where a per-step call without codec work is not."""
    from netbench.model.gloo_tcp import skew_expected

    assert skew_expected("all_gather", 2, 1, 0.0, 0.0, free_running=True)
    assert skew_expected("all_gather", 2, 1, 0.0, 0.05, free_running=True)
    assert not skew_expected("all_gather", 2, 1, 0.0, 0.0)
    assert not skew_expected("all_gather", 4, 1, 0.0, 0.0, free_running=True)  # one connection per neighbour
    assert not skew_expected("all_reduce", 2, 1, 0.0, 0.0, free_running=True)
    assert not skew_expected("all_gather", 2, 2, 0.0, 0.0, free_running=True)


def test_a_point_to_point_ring_cuts_the_buffer_into_one_chunk_per_rank_and_hop():
    # 2 (P - 1) hops of nbytes / P: the quantized ring's reduce-scatter then all-gather.
    assert ring_operations("p2p_ring", 6e6, 6) == [(10, 1e6)]
    assert ring_operations("p2p_ring", 6e6, 2) == [(2, 3e6)]


@pytest.mark.parametrize("peers", [2, 3, 6])
def test_a_ring_with_receives_posted_ahead_waits_for_one_notification_only(peers):
    # cubic, warm (window 2 x 2 chunks): hop 0's notification arrives at D, its chunk leaves D .. D + x and arrives
    # 2 D + x; every later hop's notification was posted a hop earlier, so hop k leaves as hop k - 1 arrives:
    # D + x more each. 2 (P - 1) hops: (2 P - 1) D + 2 (P - 1) x. In a ring of two the notification rides behind
    # the receiver's own chunk, which leaves at the same time by symmetry: no later.
    chunk = 1e6
    x = chunk / RATE
    assert t("p2p_ring", chunk * peers, peers, CUBIC) == pytest.approx((2 * peers - 1) * D + 2 * (peers - 1) * x)


def test_a_point_to_point_rings_latency_grows_by_one_delay_per_hop_after_the_first():
    latency = {p: gloo_time("p2p_ring", 4e5 * p, p, RATE, D, 0.0, MSS, CUBIC, 0.05).latency_s for p in (2, 3, 4, 6)}
    for p, q in ((2, 3), (3, 4), (4, 6)):
        hops = 2 * (q - p)  # a rank more adds two hops: one reduce-scatter, one all-gather
        assert latency[q] - latency[p] == pytest.approx(hops * D, rel=0.02)
    assert latency[2] == pytest.approx(3 * D, rel=0.02)  # the first hop's notification costs one delay more


def test_a_point_to_point_ring_is_cheaper_than_gloos_all_reduce_wherever_delay_dominates():
    # gloo's all-reduce posts each segment's notification only as it issues the segment: about two delays per pair
    for tcp in (CUBIC, BBR):
        for peers in (2, 6):
            assert t("p2p_ring", 5e5, peers, tcp) < t("all_reduce", 5e5, peers, tcp)
    # without delay both are the line rate over the same bytes per rank
    assert t("p2p_ring", 6e6, 6, CUBIC, delay=0.0) == pytest.approx(t("all_reduce", 6e6, 6, CUBIC, delay=0.0))


def test_a_connection_rested_for_ever_restarts_from_its_initial_window():
    cubic = TcpSettings(cc="cubic", slow_start_after_idle=True, **BIG)
    assert restart_window_bytes(cubic, MSS, math.inf, RTT, 1e6) == cubic.initcwnd * MSS
    assert gloo_time("all_reduce", 4e6, 4, RATE, D, 0.0, MSS, cubic, None).time_s > t(
        "all_reduce", 4e6, 4, cubic, idle=0.0
    )


def test_a_posted_ring_over_links_that_differ_waits_on_each_link_in_turn() -> None:
    """Sites: LAN and WAN hops alternate. Priced rank by rank, equal links give the uniform ring's time, and a ring
    of two slow links and two fast ones costs more than the fast ring and less than every hop at the slow price."""
    from netbench.model.collectives import Link
    from netbench.model.gloo_tcp import GlooTime
    from netbench.model.rings import HopPrice, _posted_hops

    hops, chunk_s = 6, 0.002
    lan, wan = HopPrice((), 0.0001, 0.0001), HopPrice((), 0.05, 0.05)
    links = {price: Link(1.0, 1.0, price.forward_s + 0.0002, one_way_s=price.forward_s) for price in (lan, wan)}

    def uniform(price: HopPrice) -> GlooTime:  # a ring of that link alone: one extra notification, then hops
        alpha = links[price].alpha_s
        return GlooTime(alpha + hops * (alpha + chunk_s), 0.0, hops * chunk_s)

    times = {price: uniform(price) for price in (lan, wan)}
    assert _posted_hops((wan,) * 4, times, links, hops).time_s == pytest.approx(times[wan].time_s)
    mixed = _posted_hops((lan, wan, lan, wan), times, links, hops).time_s
    assert times[lan].time_s < mixed < times[wan].time_s


WAN = 1.2e6  # payload bytes per second of a 10 Mbit/s link


def test_a_long_bbr_exchange_that_meets_an_expiry_pays_the_probes_hold():
    # a 2 s exchange after 8 s of rest: its cycle spans the 10 s window, so the expiry lands in it or before it;
    # 4 segments a 100 ms round trip carry 4.8 % of the rate; the flight drains (a round trip), then 200 ms
    carried = 4 * MSS / (RTT * WAN)
    assert probe_rtt_s(2.0, 8.0, RTT, WAN, MSS, BBR, True) == pytest.approx((RTT + 0.2) * (1 - carried))
    # gossip's 1 MB exchange (0.93 s here) after 9.5 s of rest pays it in full
    priced = gloo_time("pairwise", 1e6, 2, WAN, D, 0.0, MSS, BBR, 9.5).time_s
    unprobed = gloo_time("pairwise", 1e6, 2, WAN, D, 0.0, MSS, BBR, 9.5, timers=UNPROBED).time_s
    assert priced == pytest.approx(unprobed + (RTT + 0.2) * (1 - carried))


def test_a_call_pays_the_share_of_the_window_its_cycle_spans():
    # a call every 0.5 s meets one of the window's expiries in 20: 1/20 of the stall
    full = probe_rtt_s(2.0, 8.0, RTT, WAN, MSS, BBR, True)
    assert probe_rtt_s(0.1, 0.4, RTT, WAN, MSS, BBR, True) == pytest.approx(full / 20)


def test_a_dilated_run_meets_the_kernels_timers_sooner():
    # dilated twice, 10 s of wall time are 5 s of the run's and 200 ms are 100: twice the chance, the hold at 0.2 s
    dilated = KernelTimers(timer_scale=0.5)
    carried = 4 * MSS / (RTT * WAN)
    assert probe_rtt_s(1.0, 1.5, RTT, WAN, MSS, BBR, True, timers=dilated) == pytest.approx(
        0.5 * (RTT + 0.1) * (1 - carried)
    )


def test_an_unloaded_call_meets_e_to_the_minus_gamma_of_the_expiries_its_cycle_spans():
    # its samples are the unloaded round trip's, so a new low renews the window: e^-gamma of a loaded call's chance
    loaded = probe_rtt_s(0.1, 0.4, RTT, WAN, MSS, BBR, True)
    unloaded = probe_rtt_s(0.1, 0.4, RTT, WAN, MSS, BBR, True, unloaded=True)
    assert unloaded == pytest.approx(loaded * UNLOADED_PROBE_SHARE)
    assert UNLOADED_PROBE_SHARE == pytest.approx(0.5615, abs=1e-4)
    # a rest past the window leaves nothing to renew it: the restart probes
    assert probe_rtt_s(2.0, None, RTT, WAN, MSS, BBR, True, unloaded=True) == probe_rtt_s(
        2.0, None, RTT, WAN, MSS, BBR, True
    )


def test_a_gossip_exchange_paced_below_the_line_is_unloaded():
    # 1 MB each way at 50 ms: at 1 Gbit/s bbr paces the burst at 1.885 MB per round trip, under the line (no queue:
    # unloaded); at 10 Mbit/s the line holds it back (a queue in every sample: loaded)
    for rate, unloaded in ((RATE, True), (WAN, False)):
        call, priced = (
            gloo_time("pairwise", 1e6, 2, rate, D, 0.0, MSS, BBR, 0.4, timers=t).time_s
            for t in (UNPROBED, KernelTimers())
        )
        share = probe_rtt_s(call, 0.4, RTT, rate, MSS, BBR, True, unloaded=unloaded)
        assert share > 0 and priced - call == pytest.approx(share)
        assert share != pytest.approx(probe_rtt_s(call, 0.4, RTT, rate, MSS, BBR, True, unloaded=not unloaded))


@pytest.mark.parametrize(
    "tcp, shared, delay, timers, why",
    [
        (CUBIC, True, D, KernelTimers(), "cubic has no PROBE_RTT"),
        (BBR, True, D, UNPROBED, "no window runs out over the priced steps (a run shorter than it)"),
        (BBR, False, D, KernelTimers(), "a ring of three or more: the call's first bytes are data, which refresh it"),
        (BBR, True, 0.0, KernelTimers(), "no delay: 4 segments a round trip carry the rate"),
    ],
)
def test_what_pays_no_probe(tcp, shared, delay, timers, why):
    assert probe_rtt_s(2.0, 8.0, 2 * delay, WAN, MSS, tcp, shared, timers=timers) == 0.0, why


def test_a_short_call_pays_no_more_than_its_bytes_take_at_four_segments():
    # 10 kB at 125 MB/s over a 100 ms round trip: 4 segments a round trip take 0.17 s for them, not the whole hold
    call = 1e4 / RATE
    carried = 4 * MSS / (RTT * RATE)
    assert probe_rtt_s(call, 20.0, RTT, RATE, MSS, BBR, True) == pytest.approx(call * (1 / carried - 1))


def test_flows_sharing_a_link_keep_a_queue_that_the_probe_waits_behind():
    # one flow paces at its bandwidth: no queue; two keep 2 x 2 round trips' bytes in flight, 3 of them queued
    assert bbr_queue_s(RTT, 1) == 0.0
    assert bbr_queue_s(RTT, 2) == pytest.approx(3 * RTT)
    carried = 4 * MSS / (RTT * WAN)
    # two pairs across one WAN: the flight drains behind the other direction's queue before the 200 ms hold
    assert probe_rtt_s(2.0, 8.0, RTT, WAN, MSS, BBR, True, flows=2) == pytest.approx(
        (RTT + 3 * RTT + 0.2) * (1 - carried)
    )
