"""The bucket pipeline's step form, the bucket size chosen from the link, and backward overlap.

A pipelined replicator (``bucket_mb`` > 0) cuts its step into n buckets; one CPU thread encodes
and decodes while gloo's threads carry the buckets. With per-bucket encode e = E/n, decode
d = D/n and wire c = C/n (C includes every call's latency term, so more buckets cost more), a
replicator that decodes one bucket behind (netbench/replicators/pipeline.py, ``behind`` 1) takes::

    T = e + (n - 1) * max(e + d, c) + c + d

the first bucket's encode (fill), the steady state bound by the busier resource, then the last
bucket's wire and decode (drain). One that encodes every bucket before decoding any (``behind``
None; no replicator by default, see replicators/pipeline.py) takes::

    T = max(E + D, e + c + D, E + c + d, e + C + d)

the codec alone, bucket 0 arriving before the decodes can start, the last bucket arriving before
its own decode, and every call's wire time in a row between the first encode and the last decode.
n = 1 gives E + C + D in both, the unpipelined step; many buckets approach max(E + D, C).

Both forms charge every bucket's collective in a row: gloo runs two collectives of a process
group at a time, so on one lane a delayed link costs each bucket its own latency. A pipeline with
a lane per two buckets (replicators/comm.py, the default wherever the replication group is the
world) encodes every bucket first and its collectives travel at once: with C = L + W split into
the calls' latency L (l = L/n each) and their transfer W, bucket i's collective takes
c = l + W/n, and the buckets' bytes follow each other on the wire behind one latency::

    T = max(E + D, e + c + D, E + c + d, e + l + W + d)

(:func:`concurrent_step_s`), which approaches max(E + D, l + W) rather than max(E + D, L + W).
In a ring of two whose ranks settle skewed (gloo_tcp mechanism 5) the late rank's last bytes arrive a lag
x after that (:func:`skew_lag_s`): the lead's halves wait behind the late rank's notifications.

Backward overlap (replicators/backward.py) starts bucket i during backward as soon as its
gradients exist: the communication the pipeline leaves exposed can hide behind the backward
compute that remains after the first bucket is ready, (n - 1) / n of backward for n even
buckets cut in reverse parameter order (one bucket: nothing, it is ready when backward ends).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from netbench.declarations.buckets import lanes_for, travel_at_once
from netbench.declarations.pipeline_policy import behind_for
from netbench.declarations.registry import declared_payload, spec
from netbench.model.gloo_tcp import lead_lag_s, pipeline_skew_expected
from netbench.model.schemes import declared, shape_key
from netbench.workloads.config import BACKWARD_OVERLAP_WORKLOADS

if TYPE_CHECKING:
    from netbench.declarations.config import ReplicatorConfig
    from netbench.model.steptime import StepEstimate
    from netbench.shapes import ParamShape

__all__ = [
    "pipelined",
    "pipelined_step_s",
    "concurrent_step_s",
    "skew_lag_s",
    "MAX_BUCKETS",
    "backward_overlapped",
    "backward_overlapped_step_s",
    "BACKWARD_SHARE",
    "auto_bucket_mb",
    "bucket_mb_for",
    "bucket_mb_for_shapes",
    "MIN_BUCKET_BYTES",
    "GLOO_SEGMENT_BYTES",
    "ENCODE_SHARE",
]

GLOO_SEGMENT_BYTES = 1 << 20  # gloo's ring all-reduce segment (gloo/allreduce.cc)
MIN_BUCKET_BYTES = 64_000  # below this a bucket's fixed costs (a collective, a codec pass) dominate
# Fixed cost of one ring step of one bucket's collective on this host kind (gloo, 2 cores), from
# scripts/bench_pipeline.py: random at 1gbit, 8 buckets instead of 1 cost +23 ms on 2 nodes (7 extra
# buckets x 2 steps: 1.6 ms a step) and +44 ms on 4 nodes (7 x 6 steps: 1.05 ms); 3 ms keeps a margin.
RING_STEP_S = 3e-3
# Which replicators' encode + decode is worth hiding behind the wire is their declaration's
# ``pipelined_by_default``. Codecs that encode by copying (a few ms of CPU for 14 M parameters) are
# not: scripts/bench_pipeline.py measured a pipelined random subset at 0.97-0.99x of one bucket at
# 10mbit but 1.24-1.46x at 100mbit and 1gbit, so `auto` keeps them in one collective; `--bucket-mb N`
# still pipelines them.
# Buckets `auto` cuts a step into at most: two per lane (declarations/buckets.py MAX_LANES), so all
# travel at once; more buckets shrink the pipeline's fill (the first encode) and drain (the last decode).
MAX_BUCKETS = 16
ENCODE_SHARE = (
    0.5  # share of a codec's calibrated encode+decode spent encoding (a transform top-k codec: measured 0.45-0.55)
)


def pipelined_step_s(encode_s: float, decode_s: float, comm_s: float, buckets: int, behind: int | None = 1) -> float:
    """Encode + communicate + decode of one step cut into ``buckets`` overlapping buckets,
    decoded one bucket behind (``behind`` 1), after every bucket is started (``None``), or as
    they arrive (``behind`` 0, pipeline_policy.READY: the better of the two fixed schedules)."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    if behind == 0:
        return min(
            pipelined_step_s(encode_s, decode_s, comm_s, buckets, 1),
            pipelined_step_s(encode_s, decode_s, comm_s, buckets, None),
        )
    e, d, c = encode_s / buckets, decode_s / buckets, comm_s / buckets
    if behind is None:
        return max(encode_s + decode_s, e + c + decode_s, encode_s + c + d, e + comm_s + d)
    return e + (buckets - 1) * max(e + d, c) + c + d


def concurrent_step_s(
    encode_s: float, decode_s: float, latency_s: float, transfer_s: float, buckets: int, lag_s: float = 0.0
) -> float:
    """Encode + communicate + decode of a step cut into ``buckets`` whose collectives travel at once
    (a lane per two buckets), every bucket encoded before any is decoded. ``latency_s`` and
    ``transfer_s``: the step's communication (all buckets' calls) split into latency and wire time.
    ``lag_s``: how long the last bytes to reach the late rank of a skewed ring of two trail the wire's end
    (:func:`~netbench.model.gloo_tcp.lead_lag_s`); it delays the terms that end with the last arrival."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    e, d, lat = encode_s / buckets, decode_s / buckets, latency_s / buckets
    c = lat + transfer_s / buckets
    return max(encode_s + decode_s, e + c + decode_s, encode_s + c + d + lag_s, e + lat + transfer_s + d + lag_s)


def skew_lag_s(est: StepEstimate, kind: str, calls: int, lanes: int, encode_s: float, transfer_s: float) -> float:
    """The lead lag of a step's concurrent buckets where its ring of two settles skewed (gloo_tcp mechanism 5),
    else 0: the late rank starts a bucket every per-bucket encode, each sent as two halves of its wire time."""

    if calls < 2 or transfer_s <= 0:
        return 0.0
    delay = est.scenario.delay_s

    def skewed(lag: float) -> bool:
        return pipeline_skew_expected(kind, est.scenario.machines, calls, est.compression_time_s, delay, lag)

    if not skewed(math.inf):  # a ring that settles unskewed whatever the lag: the lag is not simulated
        return 0.0
    lag = lead_lag_s(calls, lanes, transfer_s / (2 * calls), encode_s / calls)
    return lag if skewed(lag) else 0.0


# Share of a built-in workload's compute (forward + backward) spent in backward: backward costs
# about twice the forward's matrix products.
BACKWARD_SHARE = 2 / 3


def backward_overlapped_step_s(
    compute_s: float, backward_s: float, sync_s: float, codec_s: float, buckets: int
) -> float:
    """Step of ``compute_s`` (of which ``backward_s`` is backward) plus a replicator ``sync_s``
    (``codec_s`` of it encode + decode on the same thread) whose buckets start during backward.

    Only communication hides: the codec runs on the thread that runs backward. Bucket 0 is
    ready after 1/n of backward, so at most (n - 1)/n of backward can cover the exposed wire.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    exposed = max(0.0, sync_s - codec_s)
    return compute_s + sync_s - min(exposed, backward_s * (buckets - 1) / buckets)


def bucket_mb_for(
    replicator: str,
    rate_bps: float,
    rtt_s: float,
    payload_bytes: int | None,
    nodes: int,
    backward: bool = False,
    concurrent: bool = True,
) -> float:
    """What ``--bucket-mb auto`` means for ``replicator``: :func:`auto_bucket_mb`, or 0 (one bucket)
    for replicators whose codec has too little work to hide (their declaration's ``pipelined_by_default``).

    ``backward``: the buckets will start from backward's hooks (``backward_hooks``, a built-in workload), so
    there is backward compute to hide the wire behind even where the codec is small: buckets
    need only outweigh the collective's fixed costs, not :data:`MIN_BUCKET_BYTES`.
    """

    if not spec(replicator).pipelined_by_default:
        return 0.0
    return auto_bucket_mb(
        rate_bps,
        rtt_s,
        payload_bytes,
        nodes=nodes,
        min_bytes=0 if backward else MIN_BUCKET_BYTES,
        concurrent=concurrent,
    )


def bucket_mb_for_shapes(
    replicator: ReplicatorConfig,
    shapes: Sequence[ParamShape],
    rate_bps: float,
    rtt_s: float,
    machines: int,
    *,
    backward: bool = False,
    concurrent: bool = True,
) -> float:
    """What ``--bucket-mb auto`` means for ``replicator`` on ``shapes`` over a link of ``rate_bps`` and ``rtt_s``
    between ``machines``: :func:`bucket_mb_for` of the step's declared payload. A run resolves its buckets with it
    (:mod:`netbench.orchestrator.run.resolve`) and ``plan`` sizes them with it.

    ``backward``: buckets start from backward's hooks; ``concurrent``: they travel at once (one worker per node;
    with several, they queue on the replication subgroup's one lane). ValueError where the replicator's payload
    formula rejects these shapes.
    """
    payload = declared_payload(list(shapes), replicator, machines).bytes_per_step
    return bucket_mb_for(replicator.name, rate_bps, rtt_s, payload, machines, backward=backward, concurrent=concurrent)


def auto_bucket_mb(
    rate_bps: float,
    rtt_s: float,
    payload_bytes: int | None = None,
    max_buckets: int = MAX_BUCKETS,
    nodes: int = 2,
    min_bytes: int = MIN_BUCKET_BYTES,
    concurrent: bool = True,
) -> float:
    """Bucket size (MB, 1e6 B) for a link: enough bytes to keep the pipe full, few enough buckets.

    A bucket holds at least as many bytes as the link carries during its collective's fixed costs
    (2 (nodes - 1) ring steps of :data:`RING_STEP_S`; on a fast link this makes the payload one
    bucket, since there is little wire time to hide), at least ``min_bytes``, and given the step's
    payload no fewer bytes than an even share of ``max_buckets``. Where the buckets' collectives
    travel at once (``concurrent``: a lane per two buckets, replicators/comm.py) their latencies
    overlap and that is all. Where they queue (one lane: sharded nodes' replication subgroup), each collective's latency
    is paid in turn, so a bucket must also hold half a bandwidth-delay product (rate x RTT / 2) or
    its transfer is dominated by that latency.
    """
    fixed_s = 2 * max(1, nodes - 1) * RING_STEP_S
    size = max(rate_bps / 8 * max(0.0 if concurrent else rtt_s / 2, fixed_s), min_bytes, 1)
    if payload_bytes:
        size = max(size, payload_bytes / max_buckets)
    return round(size / 1e6, 6)


def pipelined(
    est: StepEstimate,
    replicator: ReplicatorConfig,
    shapes: Sequence[ParamShape],
    encode_s: float | None = None,
    decode_s: float | None = None,
) -> StepEstimate:
    """``est`` in the pipelined form when ``replicator`` cuts its step into several buckets.

    ``encode_s``/``decode_s``: the step's calibrated encode and decode (default: ``est``'s codec
    time split by :data:`ENCODE_SHARE`).

    The model's comm time already holds every bucket's latency term (the payload formula counts
    one collective per bucket); here encode, wire and decode overlap as :func:`pipelined_step_s`
    says, and ``comm_time_s`` becomes the communication left exposed.
    """

    if replicator.bucket_mb <= 0 or est.overlap or est.scenario.machines < 2:
        return est
    payload = declared(shape_key(shapes), replicator, est.scenario.machines)
    buckets = payload.collectives_per_step
    if buckets < 2:
        return est

    calls = sum(p.collectives_per_step for p in payload.parts())
    # Lanes open where the replication group is the world (one accelerator per node), as the workers do.
    lanes = lanes_for(calls) if est.scenario.gpus_per_node == 1 else 1
    concurrent = travel_at_once(calls, lanes)
    if payload.also:  # two dependent rounds: codec and wire not overlapped in the model, but with
        if not concurrent:  # lanes each round's buckets travel at once: one call's latency per round
            return est
        rounds = len(payload.parts())
        saved = est.wire.latency_s * (1 - rounds / calls)
        return replace(est, comm_time_s=est.comm_time_s - saved, step_time_s=est.step_time_s - saved)
    codec = est.compression_time_s
    enc = codec * ENCODE_SHARE if encode_s is None else encode_s
    dec = codec - enc if decode_s is None else decode_s

    if concurrent:  # behind_for(True): every bucket encoded first
        # comm_time_s may be shorter than the wire's cost (the emulator's tbf credit): what it lost is transfer
        transfer = max(0.0, est.comm_time_s - est.intra_time_s - est.wire.latency_s)
        lag = skew_lag_s(est, payload.collective, buckets, lanes, enc, transfer)
        overlapped = concurrent_step_s(enc, dec, est.wire.latency_s, transfer, buckets, lag)
    else:
        overlapped = pipelined_step_s(enc, dec, est.comm_time_s, buckets, behind_for(False))
    return replace(est, comm_time_s=max(0.0, overlapped - codec), step_time_s=est.compute_time_s + overlapped)


def backward_overlapped(
    est: StepEstimate, replicator: ReplicatorConfig, workload_kind: str, shapes: Sequence[ParamShape]
) -> StepEstimate:
    """``est`` (after :func:`pipelined`) with its buckets started during backward, where the
    worker does that: ``overlap_backward`` on, a built-in workload, a replicator declaring ``backward_hooks``."""

    if (
        not replicator.overlap_backward
        or not spec(replicator.name).backward_hooks
        or workload_kind not in BACKWARD_OVERLAP_WORKLOADS
        or est.overlap
        or est.scenario.machines < 2
    ):
        return est
    buckets = declared(shape_key(shapes), replicator, est.scenario.machines).collectives_per_step
    sync = est.step_time_s - est.compute_time_s
    step = backward_overlapped_step_s(
        est.compute_time_s, BACKWARD_SHARE * est.compute_time_s, sync, est.compression_time_s, buckets
    )
    return replace(est, comm_time_s=max(0.0, est.comm_time_s - (est.step_time_s - step)), step_time_s=step)
