"""What one gloo collective over TCP costs on a link with delay: gloo's pipeline and TCP's window.

The alpha-beta term (:mod:`netbench.model.collectives`) is right on a link without delay and for
tiny messages, but wherever there is delay gloo's time is longer than ``hops x delay + bytes /
rate``, because of three mechanisms this module models from their sources, not from a fit:

1. **gloo's pipeline** (gloo/allreduce.cc, gloo/allgather.cc). A ring all-reduce cuts the buffer
   into ``N_s = roundUp(max(ceil(M / 1 MiB), 2P), P)`` segments and runs a reduce-scatter loop and
   an all-gather loop of ``(P - 1) N_s / P`` operations each; all_gather runs one loop of
   ``2(P - 1)`` half-contributions. Each loop keeps **two operations in flight**: operation
   ``k + 2`` is issued only when operation ``k``'s segment has arrived.
2. **the ready-to-receive handshake** (gloo/transport/tcp/pair.cc): a send goes out only after
   the receiver's NOTIFY_RECV_READY has arrived, and the receiver posts it when it issues the
   matching operation. Segment ``k`` leaves ``one-way delay`` after its operation is issued,
   and arrives ``transfer + one-way delay`` after that: a loop of K operations costs about
   ``K / 2 x (2 d + 2 t)`` when the delay dominates, not ``K t + d``.
   In a ring of two, sender and receiver share one connection, so a notification also waits
   behind the receiver's own queued data (gloo keeps one send queue per pair, TCP one byte stream).
3. **TCP's window**: a connection carries at most one window per round trip. The window is the
   smaller of the congestion window and the send/receive buffer limits (``tcp_wmem`` /
   ``tcp_rmem`` maxima: gloo's unbound-buffer sends never set SO_SNDBUF, so the buffers
   autotune up to those). After more than one RTO of idle, Linux restarts the congestion window
   (``tcp_slow_start_after_idle``, net/ipv4/tcp_output.c, tcp_cwnd_restart): it is halved per
   RTO of idle, never below the initial window, and grows back by slow start (doubling per
   round trip). bbr sets its own pacing and skips the restart: a burst from an empty pipe at (2.885 - 1) x burst /
   rtt, a warm gossip pair's at 0.99 x 2.885 x burst / rtt, the ACK of its ready notification restarting bbr's
   rate sample while the burst leaves (:func:`bbr_rate_Bps`).

4. **rank skew in a ring of two** (measured: per-rank step records of gpt2-small:blocks=2, a top-k all-gather,
   2 nodes, 100mbit + 20 ms, one all_gather per step). The model above assumes both ranks enter
   the call together. When one rank enters more than one delay after the other, the other's
   notifications are already there: the late rank's two halves leave at once, and its own
   notifications queue behind them on the shared connection, so the other's halves reach it one
   half's transfer later: the late rank's call takes ``2 d + 3 x_half`` instead of ``2 d + 2 x_half``
   (measured 130 ms vs model 127 ms, against 100 ms unskewed), and it leaves the call
   ``d + x_half`` after the early one, which recreates the same skew next step: once local-work
   jitter has pushed the ranks more than one delay apart, they stay there (measured skew 48 ms,
   model 49 ms). Below one delay a skew just persists (nothing pulls the ranks together or
   apart), so the state is reached when the ranks' CPU work per step jitters by more than a delay:
   :func:`skew_expected` (ranks whose encode + decode takes longer than a round trip). A call the ranks reach
   after steps no collective aligned (an overlapped fragment sync, or a periodic outer sync after H - 1 local
   steps) is entered as far apart as their local work drifted (4-bit DiLoCo over a 10 Mbit/s, 50 ms WAN: ranks
   54-302 ms apart, the late rank's call 376-380 ms against 404 ms priced skewed and about 300 ms in lockstep).
5. **rank skew with several collectives in flight** (a bucket pipeline's all_gathers spread over process groups,
   each group one TCP connection per pair carrying its collectives in the order they were started). The late
   rank's notifications ride each connection behind its own halves, and its uplink shares its rate among the
   connections, so the lead rank's halves on a connection become sendable only as the late rank's halves on that
   connection finish: its uplink idles while they queue and its last halves leave after the late rank's last.
   :func:`lead_lag_s` prices that from the calls, lanes, bytes per half and the gap between the late rank's
   starts (its per-bucket encode), sharing each uplink equally among its busy connections. Measured
   (gpt2-small:blocks=2, a top-k all-gather in 12 buckets on 6 lanes, 2 nodes at 10mbit, no delay): the lead's
   uplink idled about 120 ms of a 0.85 s step and the ranks settled 85-110 ms apart; the lag computed is 113 ms.
   One call on one lane gives one half's transfer, as mechanism 4 says. With a delay the state needs the lag to
   exceed it (:func:`pipeline_skew_expected`; measured: 2 buckets at 20 ms stayed within a delay).
6. **a ring of point-to-point sends with each receive posted a hop ahead** (kind ``p2p_ring``: the quantized ring,
   :mod:`netbench.replicators.ring_quantized`). 2 (P - 1) hops, one unsegmented chunk of ``nbytes / P`` each, one
   operation in flight per connection: a rank issues hop k's send when hop k - 1's chunk has reached it (after
   decoding and adding it), and it posted hop k's receive when it issued hop k - 1's send, so hop k's notification
   reached its sender one delay after hop k - 1 was issued, long before hop k's send. Only the first hop waits for
   its notification (two delays and a transfer); every later hop costs one delay and one transfer
   (:func:`posted_ring_time_s`): ``(2 P - 1)`` delays in all, against about two per segment pair in gloo's
   all-reduce, whose operations post their notifications only as they are issued. Under bbr a hop's chunk is paced
   out as gloo's bursts are (:func:`bbr_rate_Bps`), a round trip holding two hops (:func:`largest_flight_bytes`).
7. **bbr's PROBE_RTT on a connection that opens each call with a notification** (net/ipv4/tcp_bbr.c,
   bbr_update_min_rtt, bbr_check_probe_rtt_done; tcp_input.c, tcp_clean_rtx_queue): bbr keeps the least round trip
   it sampled for ``bbr_min_rtt_win_sec`` = 10 s; a sample refreshes it only when strictly below it or once the
   window has expired, and an expiry puts the flow in PROBE_RTT (cwnd ``bbr_cwnd_min_target`` = 4 segments until
   the flight drains, then ``bbr_probe_rtt_mode_ms`` = 200 ms and a round trip), unless the flow is restarting from
   idle. A loaded call's samples carry the queues and a burst's first ones a full segment's serialisation, so none
   comes below the handshake's: the window runs out 10 s after the connection opened and every 10 s after each
   probe. In a ring of two and a gossip pair the first thing each side sends after a rest is gloo's 48-byte ready
   notification; its ACK acknowledges one runt segment, which Linux flags as possibly delayed
   (FLAG_ACK_MAYBE_DELAYED), so it clears bbr's idle restart without refreshing the minimum, and the next ACK
   enters PROBE_RTT: every expiry costs one probe in the call that follows it (:func:`probe_rtt_s`). Several flows
   sharing a link keep a queue there (:func:`bbr_queue_s`), behind which the draining flight's ACKs wait. A connection
   whose first bytes after a rest are a segment's data (a ring of three or more) refreshes at its call's start
   instead, and is not priced for it (measured: no data-carrying flow of a 4-node ring at 10mbit and 50 ms dropped
   to 4 segments in 40 s of wall time, where the notification-only ones did). A call paced below the line samples
   the unloaded round trip, whose new lows renew the window: it probes e^-gamma as often (:data:`UNLOADED_PROBE_SHARE`).
Time on the wire per segment comes from the framing (payload to frames at the link rate).
Nothing here is fitted: every number is a protocol constant or a setting of the nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netbench.frames import MSS
from netbench.tcp import BBR_LIKE, TcpSettings

__all__ = [
    "MAX_SEGMENT_BYTES",
    "ring_operations",
    "Transfer",
    "window_bytes",
    "restart_window_bytes",
    "warm_window_bytes",
    "skew_expected",
    "lead_lag_s",
    "pipeline_skew_expected",
    "BBR_PACING_MARGIN",
    "bbr_rate_Bps",
    "largest_flight_bytes",
    "chain_time_s",
    "posted_ring_time_s",
    "rto_s",
    "bbr_queue_s",
    "KernelTimers",
    "STEADY_TIMERS",
    "UNLOADED_PROBE_SHARE",
    "probe_rtt_s",
    "pipeline_time_s",
    "GlooTime",
    "gloo_time",
]

MAX_SEGMENT_BYTES = 1 << 20  # gloo AllreduceOptionsImpl::kMaxSegmentSize
RTO_MIN_S = 0.2  # Linux TCP_RTO_MIN
BBR_HIGH_GAIN = 2.885  # bbr_high_gain (net/ipv4/tcp_bbr.c): STARTUP's pacing and cwnd gain
BBR_MIN_RTT_WINDOW_S = 10.0  # bbr_min_rtt_win_sec: how long a minimum round trip stands without a lower sample
BBR_PROBE_RTT_S = 0.2  # bbr_probe_rtt_mode_ms: how long PROBE_RTT holds its window once the flight has drained
BBR_CWND_MIN_SEGMENTS = 4  # bbr_cwnd_min_target: PROBE_RTT's window
BBR_PACING_MARGIN = 0.01  # bbr_pacing_margin_percent: bbr paces this fraction below gain x its bandwidth estimate
EULER_GAMMA = 0.5772156649015329
# Probes per window of a connection whose calls sample the unloaded round trip (with independent noise): the k-th
# call since the last probe sets a new low with chance 1/k, each low renews the window, and the gaps between probes
# then average e^gamma windows (docs/model.md; scripts/bench_min_rtt_lows.py simulates it and counts them on a run).
UNLOADED_PROBE_SHARE = math.exp(-EULER_GAMMA)


@dataclass(frozen=True)
class KernelTimers:
    """How the kernel's timers meet the priced calls: a property of the run, not of the nodes' TCP settings (its
    time dilation and how long its connections had been open; the orchestrator's ``KernelClock`` builds it).

    ``timer_scale``: emulated seconds per second of the kernel's timers, 1 / a run's time dilation (bbr's 10 s and
    200 ms are wall time, which a run dilated k times sees k times shorter). ``expiries_per_window``: bbr min-RTT
    expiries per window of the kernel's time over the priced steps (1 for a run long enough; a run's measured steps
    meet them at whole windows after its connections opened)."""

    timer_scale: float = 1.0
    expiries_per_window: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.timer_scale <= 1 or self.expiries_per_window < 0:
            raise ValueError(f"timer_scale must be in (0, 1] and expiries_per_window >= 0, got {self}")


STEADY_TIMERS = KernelTimers()  # a cluster running undilated for long, as plan prices it


def ring_operations(kind: str, nbytes: float, peers: int) -> list[tuple[int, float]]:
    """gloo's loops for one call: a list of (operations, bytes per operation), one entry per loop.

    all_reduce: two loops (reduce-scatter, all-gather) of (P-1) N_s / P segments; all_gather:
    one loop of 2(P-1) halves of the contribution; all_to_all: one operation, the (P-1)/P of the buffer a rank sends
    to its P - 1 peers at once (gloo/alltoall.cc posts every send and receive together, each send leaving on its
    receiver's ready notification), its connections taken as one; pairwise: one send of
    the whole buffer to the partner.
    """
    if kind == "all_reduce":
        segments = math.ceil(max(math.ceil(nbytes / MAX_SEGMENT_BYTES), 2 * peers) / peers) * peers
        per_rank = segments // peers
        seg = math.ceil(math.ceil(nbytes / segments) / 4) * 4
        ops = (peers - 1) * per_rank
        return [(ops, seg), (ops, seg)]
    if kind == "all_gather":
        return [(2 * (peers - 1), nbytes / 2)]
    if kind == "all_to_all":
        return [(1, (peers - 1) / peers * nbytes)]
    if kind == "pairwise":  # one unsegmented send to the partner, and its receive
        return [(1, nbytes)]
    if kind == "p2p_ring":  # mechanism 6: 2 (P - 1) hops of one chunk each
        return [(2 * (peers - 1), nbytes / peers)]
    return []


def rto_s(rtt_s: float) -> float:
    """Linux's retransmission timeout for a steady round trip: srtt + max(4 rttvar, rto_min) ~ rtt + 200 ms."""
    return rtt_s + RTO_MIN_S


def probe_rtt_s(
    call_s: float,
    rest_s: float | None,
    rtt_s: float,
    rate_Bps: float,
    mss: int,
    tcp: TcpSettings,
    shared: bool,
    flows: int = 1,
    timers: KernelTimers = STEADY_TIMERS,
    unloaded: bool = False,
) -> float:
    """The time bbr's PROBE_RTT adds to one call on average (mechanism 7): the chance that the call is the one a
    min-RTT expiry lands in, times the stall a probe costs at the call's round trip.

    Only a bbr connection that opens each call with gloo's ready notification (``shared``: a ring of two, a
    gossip pair) pays. Its window runs out every 10 s of the kernel's clock (``timers.timer_scale`` of it in emulated
    time) and each expiry costs one probe in the call under way or the next, so a call whose cycle (its ``rest_s``
    before it and its own ``call_s``) spans a share c of the window meets a probe with chance min(1, c) (a rest of
    None: longer than the window). The probe holds the window at 4 segments while the flight drains and then for
    max(200 ms, a round trip) (``timers.timer_scale`` of 200 ms); the flight's ACKs come back behind the queue that
    ``flows`` flows sharing the busiest link direction keep in the other direction (:func:`bbr_queue_s`: none for
    one flow), and the probes of a step's flows come together, so the hold is a round trip, that queue and
    max(200 ms, a round trip), less what 4 segments a round trip still carry at ``rate_Bps``, and never more than
    the call's bytes take at that pace. ``timers.expiries_per_window`` scales the chance by how many expiries the priced
    steps hold (none in a run shorter than the window).

    An ``unloaded`` call (its bytes paced below the line rate, no other flow's queue on its link) samples the
    unloaded round trip itself, give or take the hosts' noise, so a call whose least sample is a new low renews the
    window: its chance is :data:`UNLOADED_PROBE_SHARE` (e^-gamma) of the window's.

    Assumes the connections of a step probe together (they opened together: one process group), so the probe
    stalls the exchange rather than handing the link to a flow that does not probe; that no sample of a loaded
    call refreshes the minimum (the queues are in every one); that a restart after a rest longer than the window
    probes; and that the queue a flow keeps on a link without delay (bbr's ack-aggregation allowance and its
    minimum window) is not there, so that such a link pays nothing.
    """
    if tcp.cc not in BBR_LIKE or not shared or call_s <= 0 or rtt_s <= 0 or timers.expiries_per_window <= 0:
        return 0.0
    window = BBR_MIN_RTT_WINDOW_S * timers.timer_scale
    cycle = call_s + (window if rest_s is None else rest_s)
    renewed = UNLOADED_PROBE_SHARE if unloaded and cycle < window else 1.0  # a rest past the window always probes
    chance = min(1.0, cycle / window * timers.expiries_per_window * renewed)
    carried = min(1.0, BBR_CWND_MIN_SEGMENTS * mss / (rtt_s * rate_Bps))  # of the rate, at 4 segments a round trip
    if carried >= 1.0:
        return 0.0
    # the flight drains, its ACKs behind the other direction's queue, then the probe's own hold
    hold = rtt_s + bbr_queue_s(rtt_s, flows) + max(BBR_PROBE_RTT_S * timers.timer_scale, rtt_s)
    return chance * min(hold * (1.0 - carried), call_s * (1.0 / carried - 1.0))


def bbr_queue_s(rtt_s: float, flows: int) -> float:
    """The standing queue, in seconds of the link, that ``flows`` bbr flows sharing one link direction keep.

    One flow paces at the bandwidth it measures, so it keeps none. Several each take their bandwidth as the most
    their delivery rate reached over ten round trips (bbr's max filter), which is the link's whenever the others
    paused, so together they pace faster than the link and fill it up to their windows, 2 x bandwidth x min_rtt each
    (PROBE_BW's cwnd_gain): 2 n of the round trip's bytes in flight, 2 n - 1 of them queued.
    """
    return (2 * flows - 1) * rtt_s if flows > 1 else 0.0


def window_bytes(tcp: TcpSettings) -> float:
    """Most bytes a connection keeps in flight by its buffers (autotuned send and receive limits).

    The receive buffer holds payload and kernel overhead; Linux advertises about half of
    tcp_rmem for payload (tcp_adv_win_scale = 1); the send buffer counts skb overhead too, also
    about half.
    """
    return min(tcp.tcp_wmem_max, tcp.tcp_rmem_max) / 2


def warm_window_bytes(tcp: TcpSettings, mss: int, flight_bytes: float, cap: float) -> float:
    """The congestion window of a connection that has carried this call's bursts before.

    An application-limited connection grows its window only while it is using half of it
    (tcp_is_cwnd_limited in slow start), so it settles near twice its largest flight; bbr
    sets cwnd = 2.885 x bw x min_rtt, which its bursts make 1.885 flights (:func:`bbr_rate_Bps`).
    Never above what the buffers allow, never below the initial window.
    """
    grown = (BBR_HIGH_GAIN - 1.0) * flight_bytes if tcp.cc in BBR_LIKE else 2.0 * flight_bytes
    return min(cap, max(tcp.initcwnd * mss, grown))


def restart_window_bytes(tcp: TcpSettings, mss: int, idle_s: float, rtt_s: float, cwnd_bytes: float) -> float:
    """The congestion window after ``idle_s`` of idle (tcp_cwnd_restart): halved per RTO, not below the initial
    window.
    """
    if not tcp.restarts_after_idle:
        return cwnd_bytes
    rto = rto_s(rtt_s)
    if idle_s <= rto:
        return cwnd_bytes
    restart = min(tcp.initcwnd * mss, cwnd_bytes)
    if math.isinf(idle_s):  # rested for ever: halved down to the initial window
        return restart
    halvings = int(idle_s / rto)
    return max(restart, math.ldexp(cwnd_bytes, -halvings))  # halved per RTO (an idle of minutes: below any window)


def bbr_rate_Bps(
    flight_bytes: float, rtt_s: float, gain: float = BBR_HIGH_GAIN, initcwnd_bytes: float = 0.0, pairwise: bool = False
) -> float:
    """bbr's pacing rate for a connection that sends bursts of ``flight_bytes`` from idle, one per round trip.

    gloo's bursts are application-limited, and bbr ignores application-limited rounds when it
    decides that the pipe is full (bbr_check_full_bw_reached), so it stays in STARTUP and paces
    at ``gain x bw``. Its bandwidth sample for a burst that starts from an empty pipe is the
    burst over (round trip + time to pace it out): bw = B / (rtt + B / (gain bw)), whose
    fixed point is bw = (1 - 1/gain) B / rtt, so it paces at (gain - 1) B / rtt: each burst
    takes rtt / (gain - 1) ~ 0.53 rtt to leave, whatever the link rate above that.

    In STARTUP bbr never lowers its pacing rate (bbr_set_pacing_rate), so a connection paces at
    the rate of its largest burst, and never below the rate it starts with: gain x initial window
    / rtt (bbr_init_pacing_rate_from_rtt).

    ``pairwise``: a warm gossip pair's exchange, whose burst leaves while the ACK of this side's own ready
    notification comes back on the partner's first data (half a round trip after the burst began, plus the
    partner's lag). That ACK restarts the delivery-rate interval (tcp_rate.c: the packets sent after it carry its
    time and count), so when it lands while the burst is still leaving, the burst's last packets sample all of it
    over one notification flight plus the burst; tcp_rate_gen drops samples shorter than min_rtt, so the highest is
    B / rtt. bbr feeds an application-limited sample to its max filter only when it beats the maximum
    (bbr_update_bw), so once one exchange has sampled it the filter keeps it, and STARTUP paces at (1 - 1 %) x gain
    x B / rtt (bbr_pacing_margin_percent): the burst leaves in about 0.35 rtt (scripts/bench_bbr_pace.py: 35.7 ms
    in a gossip run's warm syncs at 1gbit and 50 ms, 53 ms from an empty pipe). Assumes the pair's earlier exchanges
    met that once; a connection that carried one exchange before paces nearer what its cold first one left.
    """
    if rtt_s <= 0 or flight_bytes <= 0:
        return math.inf
    if pairwise:
        return (1.0 - BBR_PACING_MARGIN) * gain * max(flight_bytes, initcwnd_bytes) / rtt_s
    return max((gain - 1.0) * flight_bytes, gain * initcwnd_bytes) / rtt_s


def largest_flight_bytes(kind: str, nbytes: float, peers: int) -> float:
    """The most one connection sends per round trip of gloo's loops: two operations in flight. A ring of
    point-to-point hops (mechanism 6) has one in flight, but its hops leave one delay and a transfer apart, so a
    round trip holds two of them as well."""
    return max((min(ops, 2) * b for ops, b in ring_operations(kind, nbytes, peers)), default=0.0)


@dataclass
class Transfer:
    """One TCP connection's sending state: congestion window and pacing (payload bytes), and its current round trip.

    A connection sends at most one window per round trip: bytes handed to it when this round's
    window is used up wait until the round's first ACKs return (``round_start + rtt``); the
    window then doubles (slow start: every byte acknowledged adds one), up to ``cap``. A round
    that does not use its window leaves it as it was (application-limited: no growth).
    """

    cwnd: float
    cap: float
    pacing_Bps: float = math.inf
    mss: int = MSS
    free_at: float = 0.0
    round_start: float = -math.inf
    round_bytes: float = 0.0

    def send(self, start: float, nbytes: float, rate_Bps: float, rtt_s: float) -> float:
        """Send ``nbytes`` from ``start`` at ``rate_Bps`` (payload at line rate), or bbr's pacing if lower; returns when
        the last byte has left.
        """
        t = max(start, self.free_at)
        rate = min(rate_Bps, self.pacing_Bps)
        left = nbytes
        while left > 0:
            if rtt_s <= 0:
                room = math.inf
            else:
                if t >= self.round_start + rtt_s:
                    self.round_start, self.round_bytes = t, 0.0
                room = min(self.cwnd, self.cap) - self.round_bytes
            if room <= 0:  # window used up: wait for this round's ACKs, then a doubled window
                t = self.round_start + rtt_s
                self.round_start, self.round_bytes = t, 0.0
                self.cwnd = min(2 * self.cwnd, max(self.cap, self.cwnd))
                continue
            if self.round_bytes == 0 and left > room:
                t, left = self._steady_rounds(t, left, room, rate_Bps, rate, rtt_s)
                room = min(self.cwnd, self.cap)
            chunk = min(left, room)
            # paced: the first segment leaves at once, each later one after its pacing interval
            t += max(chunk / rate_Bps, (chunk - min(chunk, self.mss)) / rate)
            self.round_bytes += chunk
            left -= chunk
        self.free_at = t
        return t

    def stream_floor_s(self, nbytes: float, rate_Bps: float, rtt_s: float) -> float:
        """The least time ``nbytes`` handed to the connection while it is busy take to leave, where their time does
        not depend on how the stream is cut into sends (0 where it does: a window still growing, or pacing slower
        than the line, whose first segment of each send leaves at once).

        Bytes that wait for the connection leave at the line rate, a window per round trip at most: a window of
        W bytes, fixed, takes at least ceil(n / W) - 2 round trips for n bytes (the first and last round may be
        partial)."""
        window = min(self.cwnd, self.cap)
        if self.pacing_Bps < rate_Bps or window <= 0:
            return 0.0
        line = nbytes / rate_Bps
        if rtt_s <= 0 or window / rate_Bps >= rtt_s:
            return line  # the window outlasts the round trip: the line rate alone paces the bytes
        if self.cwnd < self.cap:
            return 0.0
        return max(line, (math.ceil(nbytes / window) - 2) * rtt_s)

    def _steady_rounds(
        self, t: float, left: float, window: float, rate_Bps: float, rate: float, rtt_s: float
    ) -> tuple[float, float]:
        """Skip the whole rounds a send repeats unchanged, from a fresh round at ``t`` with ``left`` > ``window``.

        A round that sends its full window and is followed by more data lasts max(window's wire time, rtt) and
        leaves the window as it was where it cannot grow: the wire time outlasts the round trip (the next round
        starts before the window is used up) or the window is at its cap. Each of those rounds is one step of the
        loop in :meth:`send`; this takes them at once (a slow link would otherwise cost a step per window).
        Returns the time and bytes left after them, at the start of a fresh round.
        """
        wire = max(window / rate_Bps, (window - min(window, self.mss)) / rate)
        if wire < rtt_s and self.cwnd < self.cap:
            return t, left  # slow start: the window doubles each round
        rounds = math.ceil(left / window) - 1  # the last (possibly partial) round is sent by the loop
        if rounds <= 0:
            return t, left
        t += rounds * max(wire, rtt_s)
        self.round_start, self.round_bytes = t, 0.0
        return t, left - rounds * window


def pipeline_time_s(
    ops: int,
    op_bytes: float,
    one_way_s: float,
    overhead_s: float,
    rate_Bps: float,
    conn: Transfer,
    start: float = 0.0,
    shared: bool = False,
) -> float:
    """One gloo loop of ``ops`` operations, two in flight, each sent after the receiver's ready notification.

    Every node runs the same loop at the same time, so the receiver issues operation k when the
    sender does: its notification arrives ``one_way_s + overhead_s`` later, the segment leaves
    then (or when the connection is free) and arrives one transfer and one delay after that;
    operation k + 2 is issued when operation k has arrived. Returns when the last segment has
    arrived. Once two successive pairs of operations take the same time (the window has stopped
    growing), the rest of the loop is extrapolated; once every later segment is bound to wait for the connection
    (:meth:`Transfer.stream_floor_s`: one send outlasts the two hops its successor's notification takes), the rest
    is one send of their bytes, exact: long loops cost O(1) whatever their segments' pattern across the window's
    rounds.

    ``shared``: the notification travels on the connection that carries the receiver's own data
    the other way (a ring of two: one TCP connection per pair of ranks), so it waits behind the
    bytes already queued there (gloo's per-pair send queue, then TCP's in-order stream); by
    symmetry those leave when this direction's data does. Data joins that queue when it starts
    to leave (until the notification it waits for arrives, gloo holds it back).
    """
    if ops <= 0 or op_bytes <= 0:
        return start
    hop = one_way_s + overhead_s
    sending: list[tuple[float, float]] = [
        (conn.free_at, conn.free_at)
    ]  # the last op on the connection: (first byte, last byte)
    issued = [start, start]
    arrived: list[float] = []
    for k in range(ops):
        issue = issued[k] if k < 2 else max(issued[k - 1], arrived[k - 2])
        if k >= 2:
            issued.append(issue)
        # on a shared connection the notification queues behind data already handed to it (started leaving)
        notify = max([issue] + [end for begin, end in sending if begin <= issue]) if shared else issue
        ready = notify + hop
        begin = max(ready, conn.free_at)
        queued = ready <= conn.free_at  # the segment waits for the connection, not for its notification
        left = conn.send(ready, op_bytes, rate_Bps, 2 * one_way_s)
        sending = [(begin, left)]
        arrived.append(left + hop)
        if k >= 7 and k % 2 == 1:
            steps = [arrived[j] - arrived[j - 2] for j in (k, k - 1, k - 2, k - 3)]
            if max(steps) - min(steps) <= 1e-12 * max(1.0, abs(arrived[k])):
                remaining = ops - 1 - k
                return arrived[k] + remaining / 2 * steps[0]
        if queued and not shared and k + 1 < ops and conn.stream_floor_s(op_bytes, rate_Bps, 2 * one_way_s) >= 2 * hop:
            # every later segment is ready before the connection frees (its notification was posted when the segment
            # two before arrived, one send of at least 2 hops earlier): the rest of the loop is one byte stream
            return conn.send(conn.free_at, (ops - 1 - k) * op_bytes, rate_Bps, 2 * one_way_s) + hop
    return max(arrived)


def chain_time_s(hops: int, op_bytes: float, one_way_s: float, overhead_s: float, rate_Bps: float) -> float:
    """A buffer too small to fill more than one segment: it passes the ring hop by hop.

    Receivers have posted their ready notifications long before the data reaches them, so each
    hop costs one delay and one transfer, as alpha-beta says.
    """
    return hops * (one_way_s + overhead_s + op_bytes / rate_Bps)


def posted_ring_time_s(
    hops: int, op_bytes: float, one_way_s: float, overhead_s: float, rate_Bps: float, conn: Transfer, shared: bool
) -> float:
    """A ring of ``hops`` point-to-point hops of ``op_bytes`` each, every receive posted a hop ahead (mechanism 6).

    Every rank runs the same hops at the same time. Hop k is issued when hop k - 1 has arrived (its chunk is what
    hop k passes on); its receiver posted hop k's ready notification when it issued hop k - 1, so the notification
    arrives ``one_way_s + overhead_s`` after that: hop 0 waits for it, later hops find it there. ``shared`` (a ring
    of two: one connection per pair): the notification rides behind the receiver's hop k - 1 data when that had
    started leaving, which by symmetry leaves when this direction's does. Returns when the last hop has arrived.
    """
    if hops <= 0 or op_bytes <= 0:
        return 0.0
    hop = one_way_s + overhead_s
    issued, ready, arrived = 0.0, hop, 0.0
    for _ in range(hops):
        begin = max(ready, conn.free_at)
        left = conn.send(ready, op_bytes, rate_Bps, 2 * one_way_s)
        arrived = left + hop
        notify = max(issued, left) if shared and begin <= issued else issued  # the next hop's, posted at this issue
        issued, ready = arrived, max(arrived, notify + hop)
    return arrived


@dataclass(frozen=True)
class GlooTime:
    """One call's time; ``transfer_s`` is its bytes at line rate, ``latency_s`` everything else (delays, handshakes,
    window, pacing).
    """

    time_s: float
    latency_s: float
    transfer_s: float


def skew_expected(
    kind: str, peers: int, calls: int, cpu_work_s: float, one_way_s: float, free_running: bool = False
) -> bool:
    """Whether a step's ranks settle one delay or more apart (mechanism 4): one all_gather per step in a ring
    of two, with more CPU work per step (encode + decode) than a round trip. The work's step-to-step
    variation (5-10 % of it on the 2-core hosts measured) then exceeds a one-way delay within a few steps.
    Pipelined steps (several calls) keep the ranks within a delay (measured: 2 buckets, skew +-10 ms at 20 ms).

    ``free_running``: the call is launched after local steps that no collective aligned (an overlapped fragment
    sync, each rank launching it as its own step ends, or a periodic outer sync with no collective on the step
    before: :attr:`~netbench.model.exchange.Exchange.runs_free`), so the ranks enter it as far apart as their local
    work drifted, whatever the delay (measured on Streaming DiLoCo's 2-node all-gathers: the ranks launched 61 ms
    apart at 0 ms and 137 ms at 50 ms, median; the first node's data left about 40 ms after the other's, behind the
    late rank's first half; 4-bit DiLoCo's and SparseLoCo's outer all-gathers over 50 ms: 19-302 ms apart).
    """
    if kind != "all_gather" or peers != 2 or calls != 1:
        return False
    return free_running or (one_way_s > 0 and cpu_work_s > 2 * one_way_s)


def _shared_step(busy: list[int], left: list[float]) -> float:
    """Wire time until the first of ``busy`` connections, sharing one uplink equally, finishes its current half."""
    return min(left[j] for j in busy) * len(busy) if busy else math.inf


def lead_lag_s(calls: int, lanes: int, half_s: float, post_gap_s: float) -> float:
    """How long the lead rank's uplink runs on after the late rank's in a skewed ring of two (mechanism 5).

    ``calls`` all_gathers, started ``post_gap_s`` apart by the late rank and round robin over ``lanes``
    connections, each sent as two halves of ``half_s`` wire time. Each uplink shares its rate equally among the
    connections with a half ready; the lead's k-th half on a connection is ready when the late rank's k-th half on
    it has left (its notification follows it). Returns the lead's last departure minus the late rank's.
    """
    if calls < 1 or lanes < 1 or half_s <= 0:
        return 0.0
    streams = [[t for i in range(j, calls, lanes) for t in (i * post_gap_s,) * 2] for j in range(lanes)]
    late_done, lead_done = [0] * lanes, [0] * lanes
    late_left, lead_left = [half_s] * lanes, [half_s] * lanes
    t = late_end = 0.0
    while any(lead_done[j] < len(streams[j]) for j in range(lanes)):
        late = [j for j in range(lanes) if late_done[j] < len(streams[j]) and streams[j][late_done[j]] <= t]
        lead = [j for j in range(lanes) if lead_done[j] < late_done[j]]
        waiting = [streams[j][late_done[j]] - t for j in range(lanes) if late_done[j] < len(streams[j])]
        dt = min([_shared_step(late, late_left), _shared_step(lead, lead_left), *(w for w in waiting if w > 0)])
        t += dt
        for busy, left, done in ((late, late_left, late_done), (lead, lead_left, lead_done)):
            for j in busy:
                left[j] -= dt / len(busy)
                if left[j] <= 1e-12 * half_s:
                    done[j], left[j] = done[j] + 1, half_s
        if all(late_done[j] == len(streams[j]) for j in range(lanes)) and not late_end:
            late_end = t
    return t - late_end


def pipeline_skew_expected(
    kind: str, peers: int, calls: int, cpu_work_s: float, one_way_s: float, lag_s: float
) -> bool:
    """Whether several calls a step (a bucket pipeline) leave a ring of two skewed (mechanism 5): all_gathers whose
    ranks' CPU work per step jitters by more than a delay (as :func:`skew_expected`) and whose lead lag
    (:func:`lead_lag_s`) outlasts a one-way delay, so that the skew it recreates keeps the late rank's
    notifications behind its data."""
    return kind == "all_gather" and peers == 2 and calls > 1 and cpu_work_s > 2 * one_way_s and lag_s > one_way_s


def gloo_time(
    kind: str,
    nbytes: float,
    peers: int,
    payload_Bps: float,
    one_way_s: float,
    overhead_s: float,
    mss: int,
    tcp: TcpSettings,
    idle_s: float | None = None,
    paced_flight_bytes: float = 0.0,
    skewed: bool = False,
    fresh: bool = False,
    flows: int = 1,
    timers: KernelTimers = STEADY_TIMERS,
) -> GlooTime:
    """Time of one gloo ring call of ``nbytes`` among ``peers`` on a link with ``one_way_s`` delay.

    ``payload_Bps``: payload bytes per second the bottleneck direction carries at line rate,
    after framing (headers, ACKs, control ops). ``overhead_s``: software time per message.
    ``idle_s``: how long the connection rested before the call (None: long enough for a
    restart when the settings make one; 0: a warm connection). ``paced_flight_bytes``: the
    largest burst the connection carries in a step (other calls included), which sets bbr's pacing.
    ``skewed``: the ranks of a ring of two enter more than a delay apart (mechanism 4; all_gather only):
    the late rank waits one more half's transfer. ``fresh``: the connection has never carried data (a gossip pair's
    first exchange): it starts from the initial window whatever the congestion control, and bbr paces this call's
    own bursts only. ``flows``: how many flows of the call share its busiest link direction (bbr's queue, mechanism 7).
    ``timers``: how the kernel's timers meet the call (bbr's min-RTT window and probe, mechanism 7).
    """
    loops = ring_operations(kind, nbytes, peers)
    if not loops or peers < 2:
        return GlooTime(0.0, 0.0, 0.0)
    rate_Bps = payload_Bps
    rtt = 2 * one_way_s
    cap = window_bytes(tcp)
    flight = largest_flight_bytes(kind, nbytes, peers)
    warm = warm_window_bytes(tcp, mss, flight, cap)
    if kind == "all_reduce" and loops[0][1] <= 4:  # one 4-byte word per segment: the words pass hop by hop
        hops = 2 * (peers - 1)
        t = chain_time_s(hops, nbytes, one_way_s, overhead_s, rate_Bps)
        return GlooTime(time_s=t, latency_s=hops * (one_way_s + overhead_s), transfer_s=hops * nbytes / rate_Bps)
    if fresh:
        cwnd, paced_flight_bytes = min(cap, tcp.initcwnd * mss), 0.0
    else:
        cwnd = restart_window_bytes(tcp, mss, math.inf if idle_s is None else idle_s, rtt, warm)
    warm_pair = kind == "pairwise" and flows == 1 and not fresh  # its notification's ACK restarts the rate sample
    pacing = (
        bbr_rate_Bps(max(flight, paced_flight_bytes), rtt, initcwnd_bytes=tcp.initcwnd * mss, pairwise=warm_pair)
        if tcp.cc in BBR_LIKE
        else math.inf
    )
    conn = Transfer(cwnd=cwnd, cap=cap, pacing_Bps=pacing, mss=mss)
    t = 0.0
    shared = peers == 2 or kind == "pairwise"  # one connection carries both directions
    for ops, op_bytes in loops:
        if kind == "p2p_ring":
            t = posted_ring_time_s(ops, op_bytes, one_way_s, overhead_s, rate_Bps, conn, shared)
            continue
        t = pipeline_time_s(ops, op_bytes, one_way_s, overhead_s, rate_Bps, conn, start=t, shared=shared)
    if skewed and kind == "all_gather" and peers == 2:  # the late rank's notification behind its own first half
        t += loops[0][1] / min(rate_Bps, pacing)
    unloaded = pacing < rate_Bps and flows <= 1  # paced below the line: no queue in its round-trip samples
    t += probe_rtt_s(t, idle_s, rtt, rate_Bps, mss, tcp, shared, flows, timers, unloaded)
    transfer = sum(ops * b for ops, b in loops) / rate_Bps
    return GlooTime(time_s=t, latency_s=max(0.0, t - transfer), transfer_s=transfer)
