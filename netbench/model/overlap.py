"""The bucket pipeline's step form, and the bucket size chosen from the link.

A pipelined replicator (``bucket_mb`` > 0) cuts its step into n buckets; one CPU thread encodes
and decodes while gloo's threads carry the buckets. With per-bucket encode e = E/n, decode
d = D/n and wire c = C/n (C includes every call's latency term, so more buckets cost more)::

    T = e + (n - 1) * max(e + d, c) + c + d

the first bucket's encode (fill), the steady state bound by the busier resource, then the last
bucket's wire and decode (drain). n = 1 gives E + C + D, the unpipelined step; many buckets
approach max(E + D, C), the overlap limit.
"""

from __future__ import annotations

__all__ = ["pipelined_step_s", "auto_bucket_mb", "MIN_BUCKET_BYTES", "GLOO_SEGMENT_BYTES", "ENCODE_SHARE"]

GLOO_SEGMENT_BYTES = 1 << 20  # gloo's ring all-reduce segment (gloo/allreduce.cc)
MIN_BUCKET_BYTES = 64_000  # below this a bucket's fixed costs (a collective, a codec pass) dominate
ENCODE_SHARE = 0.5  # share of a codec's calibrated encode+decode spent encoding (dct: measured 0.45-0.55)


def pipelined_step_s(encode_s: float, decode_s: float, comm_s: float, buckets: int) -> float:
    """Encode + communicate + decode of one step cut into ``buckets`` overlapping buckets."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    e, d, c = encode_s / buckets, decode_s / buckets, comm_s / buckets
    return e + (buckets - 1) * max(e + d, c) + c + d


def auto_bucket_mb(rate_bps: float, rtt_s: float, payload_bytes: int | None = None, max_buckets: int = 8) -> float:
    """Bucket size (MB, 1e6 B) for a link: enough bytes to keep the pipe full, few enough buckets.

    A bucket should hold at least one bandwidth-delay product (rate x RTT) so its transfer is not
    dominated by the round trips of its collective, and at least :data:`MIN_BUCKET_BYTES`; given
    the step's payload, no more than ``max_buckets`` buckets are made.
    """
    size = max(rate_bps / 8 * rtt_s, MIN_BUCKET_BYTES)
    if payload_bytes:
        size = max(size, payload_bytes / max_buckets)
    return round(size / 1e6, 6)
