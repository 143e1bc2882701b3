"""nccl-tests output read, and a collective's latency and bandwidth terms fitted to it.

nccl-tests (NVIDIA/nccl-tests, ``src/common.cu``) prints one fixed table for every collective: size (bytes),
count, type, redop, root (newer releases), then time (us), algbw and busbw (GB/s) and #wrong (or error), out of
place and in place. Above it, ``Rank N ... on HOST device D`` lines name every rank and its host. What a fit needs
from a log: the collective, the rank and node counts and the table's (size, time) rows; every one of them is checked
(sizes, counts and row numbers bounded, numbers finite and positive), and a log that is not nccl-tests output is a
one-line :class:`NcclTestsError`.

NCCL chooses a protocol per size (LL for small messages, LL128, Simple for large ones), each a line
``time = latency + bytes / bandwidth``; the fit cuts the rows into up to three size ranges and fits each with
least squares on relative error, keeping a cut only where it lowers the information criterion (n log(SSE / n)
+ 2 k log n). Each range's terms are stored as NCCL's: a latency per call and a bus bandwidth (nccl-tests'
busbw: 2(n-1)/n of algbw for all-reduce, (n-1)/n for all-gather and reduce-scatter). At another rank count the
latency scales with the ring's steps and the bus bandwidth stays: :meth:`NcclFit.time_s`.

NCCL's own model never has the bus bandwidth fall as the size grows (it picks per size the fastest of its choices).
Where a later range's bus bandwidth is well below the one before, the log holds a second regime that model does not
make (a switch slower on those hosts than NCCL expects, or the hosts' CPUs and memory moving the socket transport's
data): the fit says so (``CollectiveFit.regimes``) and which sizes each regime covers, since a fit of one regime does
not predict the other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from netbench import untrusted
from netbench.model.nccl import bus_factor, steps_of
from netbench.model.nccl_fit import TunedFit
from netbench.units import format_bytes
from netbench.validation import ShownText

__all__ = [
    "NcclTestsError",
    "NcclTestsLog",
    "Row",
    "parse_log",
    "read_log",
    "Segment",
    "CollectiveFit",
    "NcclFit",
    "fit_log",
    "fit_logs",
    "COLLECTIVES",
]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
MAX_ROWS = 512
MAX_SIZE_BYTES = 2**45
MAX_RANKS = 1 << 20
MAX_SEGMENTS = 3
TIME_RANGE_US = (1e-3, 1e9)  # a table's times: a nanosecond to a thousand seconds (outside: not a row of one)
MAX_RANK_DIGITS = 7  # MAX_RANKS has seven digits
BUS_RANGE_BPS = (1e-6, 1e21)  # a fitted bus bandwidth (a flat range's is 1e18 B/s: pure latency)
MAX_LATENCY_S = 1e4
SLOWER_REGIME = 1.5  # a range this many times below the range before it in bus bandwidth: not one of NCCL's switches
_RANK = re.compile(
    rf"^#\s+Rank\s+(\d{{1,{MAX_RANK_DIGITS}}})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device", re.MULTILINE
)
# the binary's name: ``all_reduce_perf``, and the MPI builds' ``all_reduce_perf_mpi`` (what NGC containers ship)
_TEST = re.compile(r"\b(all_reduce|all_gather|reduce_scatter)_perf(?:_mpi)?\b")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


class NcclTestsError(ValueError):
    """A log that cannot be read as nccl-tests output (one line, naming the file)."""


@dataclass(frozen=True)
class Row:
    """One size of the table: bytes, and the out-of-place and in-place times (seconds)."""

    size: int
    oop_s: float
    ip_s: float
    busbw_GBps: float


@dataclass(frozen=True)
class NcclTestsLog:
    """What a fit reads from one log."""

    source: str
    collective: str
    ranks: int
    nodes: int | None
    rows: tuple[Row, ...]
    nccl_version: str | None = None


def _number(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(token)
    return value


def _row(tokens: list[str]) -> Row | None:
    """A table row, or None for a line that is not one."""
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    try:
        size = int(tokens[0])
        tail = tokens[-8:]
        oop, algbw, busbw, ip = _number(tail[0]), _number(tail[1]), _number(tail[2]), _number(tail[4])
    except ValueError:
        return None
    low, high = TIME_RANGE_US
    if not (0 < size <= MAX_SIZE_BYTES and low <= oop <= high and low <= ip <= high and algbw >= 0 and busbw >= 0):
        return None
    return Row(size, oop * 1e-6, ip * 1e-6, busbw)


def _ranks_from_ratio(collective: str, text: str) -> int | None:
    """The rank count from busbw / algbw where no rank lines were printed, read on the row with the largest
    algbw (the most digits)."""
    best: tuple[float, float] | None = None
    for line in text.splitlines():
        tokens = line.split()
        if line.startswith("#") or _row(tokens) is None:
            continue
        algbw, busbw = float(tokens[-7]), float(tokens[-6])
        if algbw > 0 and busbw > 0 and (best is None or algbw > best[0]):
            best = (algbw, busbw)
    if best is None:
        return None
    ratio = best[1] / best[0]
    if collective == "all_reduce":
        n = 2 / (2 - ratio) if ratio < 2 else None
    else:
        n = 1 / (1 - ratio) if ratio < 1 else None
    return max(2, round(n)) if n and math.isfinite(n) else None


def parse_log(text: str, source: str, collective: str | None = None) -> NcclTestsLog:
    """Read nccl-tests output; ``collective`` when the log does not say which test printed it."""
    found = _TEST.search(text)
    if collective is None and found is None:
        raise NcclTestsError(
            f"{source}: says nothing of which test printed it (no all_reduce_perf, all_gather_perf or "
            "reduce_scatter_perf line); pass --collective"
        )
    kind = collective or found.group(1)  # type: ignore[union-attr]
    if kind not in COLLECTIVES:
        raise NcclTestsError(f"{source}: collective {kind!r} is not one of {', '.join(COLLECTIVES)}")
    rows: list[Row] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        row = _row(line.split())
        if row is not None:
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise NcclTestsError(f"{source}: more than {MAX_ROWS} table rows")
    if len(rows) < 2:
        raise NcclTestsError(f"{source}: fewer than two rows of an nccl-tests table (size, count, type ... busbw)")
    hosts: dict[int, str] = {int(m.group(1)): m.group(2) for m in _RANK.finditer(text)}
    ranks = len(hosts) or _ranks_from_ratio(kind, text)
    if not ranks or not 2 <= ranks <= MAX_RANKS:
        raise NcclTestsError(
            f"{source}: cannot tell the rank count (no 'Rank N ... on HOST' lines, and busbw / algbw names none)"
        )
    version = _VERSION.search(text)
    return NcclTestsLog(
        source=source,
        collective=kind,
        ranks=ranks,
        nodes=len(set(hosts.values())) if hosts else None,
        rows=tuple(sorted(rows, key=lambda r: r.size)),
        nccl_version=version.group(1) if version else None,
    )


def read_log(path: Path, collective: str | None = None) -> NcclTestsLog:
    """:func:`parse_log` of a file (bounded in size; unreadable or not text: one-line error)."""
    try:
        text = untrusted.read_text(path, untrusted.NCCL_TESTS_LOG)
    except untrusted.BadInput as exc:
        raise NcclTestsError(str(exc)) from None
    return parse_log(text, str(path), collective)


class Segment(BaseModel):
    """One protocol's line: ``time = latency + size x factor / bus bandwidth`` for sizes up to ``upto_bytes``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    upto_bytes: float = Field(gt=0, le=MAX_SIZE_BYTES)
    latency_s: float = Field(ge=0, le=MAX_LATENCY_S)
    bus_Bps: float = Field(ge=BUS_RANGE_BPS[0], le=BUS_RANGE_BPS[1])


class CollectiveFit(BaseModel):
    """A collective's fitted terms at the log's rank count, and the fit's relative residual per size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ranks: int = Field(ge=2, le=MAX_RANKS)
    nodes: int | None = Field(None, ge=1, le=MAX_RANKS)
    segments: tuple[Segment, ...] = Field(min_length=1, max_length=MAX_SEGMENTS)
    residuals: tuple[tuple[float, float], ...] = Field((), max_length=MAX_ROWS)  # (size, (fit - measured) / measured)
    source: str = Field("", max_length=4096)  # the log's path (escaped where it is shown)
    regimes: ShownText = ""  # where the bus bandwidth falls as the size grows: which sizes each regime covers

    def segment(self, nbytes: float) -> Segment:
        return next((s for s in self.segments if nbytes <= s.upto_bytes), self.segments[-1])

    def time_s(self, kind: str, nbytes: float, ranks: int, ceiling_Bps: float | None = None) -> float:
        """One call of ``nbytes`` on ``ranks`` ranks: the latency scaled by the ring's steps, the bus bandwidth
        kept (no faster than ``ceiling_Bps``, the network the plan assumes)."""
        seg = self.segment(nbytes)
        latency = seg.latency_s * steps_of(kind, ranks) / steps_of(kind, self.ranks)  # type: ignore[arg-type]
        bus = min(seg.bus_Bps, ceiling_Bps) if ceiling_Bps else seg.bus_Bps
        return latency + nbytes * bus_factor(kind, ranks) / bus  # type: ignore[arg-type]


class NcclFit(BaseModel):
    """``netbench calibrate --from-nccl-tests``'s output: fitted terms per collective, which ``plan --backend nccl``
    takes with ``--nccl-calibration``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["nccl-tests-fit"] = "nccl-tests-fit"
    nccl_version: ShownText | None = Field(None, max_length=64)
    collectives: dict[Literal["all_reduce", "all_gather", "reduce_scatter"], CollectiveFit] = Field(
        default_factory=dict
    )
    # per collective, the same logs fitted at NCCL's picks for the cluster described (calibrate --accelerator ...):
    # what carries to other node counts (netbench.model.nccl_fit)
    tuned: dict[Literal["all_reduce", "all_gather", "reduce_scatter"], TunedFit] = Field(default_factory=dict)

    def time_s(self, kind: str, nbytes: float, ranks: int, ceiling_Bps: float | None = None) -> float | None:
        """A call's time from the fit (all-gather and reduce-scatter stand in for each other), or None."""
        fit = self.collectives.get(kind)
        if fit is None and kind in ("all_gather", "reduce_scatter"):
            fit = self.collectives.get("reduce_scatter" if kind == "all_gather" else "all_gather")
        return None if fit is None else fit.time_s(kind, nbytes, ranks, ceiling_Bps)


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """(a, c, sse) of t = a + c s, least squares on relative error, a >= 0 and c > 0."""
    a, c = _terms(*_sums(points))
    sse = sum(((a + c * s) - t) ** 2 / (t * t) for s, t in points)
    return a, c, sse


def _terms(w: float, ws: float, wss: float, wt: float, wst: float) -> tuple[float, float]:
    """(a, c) of the least-squares line of a range from its weighted sums (weight 1/t^2), a >= 0 and c > 0."""
    det = w * wss - ws * ws
    a, c = ((wss * wt - ws * wst) / det, (w * wst - ws * wt) / det) if det > 0 else (0.0, 0.0)
    if c <= 0:  # flat: pure latency (a tiny slope keeps the bandwidth finite)
        a, c = wt / w, 1e-18
    if a < 0:
        a, c = 0.0, wst / wss
    return a, c


def _sums(points: Sequence[tuple[float, float]]) -> tuple[float, float, float, float, float]:
    w = ws = wss = wt = wst = 0.0
    for s, t in points:
        k = 1 / (t * t)
        w, ws, wss, wt, wst = w + k, ws + k * s, wss + k * s * s, wt + k * t, wst + k * s * t
    return w, ws, wss, wt, wst


def _range_errors(points: Sequence[tuple[float, float]]) -> Callable[[int, int], float]:
    """``err(lo, hi)``: the squared relative error of the line fitted to ``points[lo:hi]``, in constant time from
    prefix sums (w t^2 = 1 for every point, so the error is a quadratic form of the sums)."""
    prefix = [(0.0, 0.0, 0.0, 0.0, 0.0)]
    for s, t in points:
        k = 1 / (t * t)
        w, ws, wss, wt, wst = prefix[-1]
        prefix.append((w + k, ws + k * s, wss + k * s * s, wt + k * t, wst + k * s * t))

    def err(lo: int, hi: int) -> float:
        (w1, ws1, wss1, wt1, wst1), (w0, ws0, wss0, wt0, wst0) = prefix[hi], prefix[lo]
        w, ws, wss, wt, wst = w1 - w0, ws1 - ws0, wss1 - wss0, wt1 - wt0, wst1 - wst0
        a, c = _terms(w, ws, wss, wt, wst)
        return max(a * a * w + c * c * wss + (hi - lo) + 2 * a * c * ws - 2 * a * wt - 2 * c * wst, 0.0)

    return err


def _best_cut(points: list[tuple[float, float]], pieces: int) -> tuple[float, list[tuple[int, int]]]:
    """Least total error of ``pieces`` contiguous ranges (each with at least two sizes), and the ranges.

    Each range's error comes from prefix sums in constant time, so three pieces cost O(n^2) (every pair of cuts) and
    two O(n); the ranges found are measured again point by point for the error returned.
    """
    n = len(points)
    err = _range_errors(points)
    if pieces == 1:
        ranges = [(0, n)]
    else:
        tails = {cut: err(cut, n) for cut in range(2, n - 1)}  # the last range, from each cut to the end
        if pieces == 2:
            best = min(range(2, n - 1), key=lambda cut: err(0, cut) + tails[cut])
            ranges = [(0, best), (best, n)]
        else:
            # best two-piece split of each suffix [first, n): the second cut at each first cut's best
            second = {
                first: min(range(first + 2, n - 1), key=lambda cut: err(first, cut) + tails[cut])
                for first in range(2, n - 3)
            }
            first = min(second, key=lambda f: err(0, f) + err(f, second[f]) + tails[second[f]])
            ranges = [(0, first), (first, second[first]), (second[first], n)]
    return sum(_line(points[lo:hi])[2] for lo, hi in ranges), ranges


def fit_log(log: NcclTestsLog, min_size: int = 0) -> CollectiveFit:
    """Fit ``log``'s rows of at least ``min_size`` bytes (both placements as samples)."""
    rows = [r for r in log.rows if r.size >= min_size]
    if len(rows) < 2:
        raise NcclTestsError(f"{log.source}: fewer than two rows of at least {min_size} bytes to fit")
    points = [(float(r.size), (r.oop_s + r.ip_s) / 2) for r in rows]
    n = len(points)
    choice: tuple[float, list[tuple[int, int]]] | None = None
    best_score = math.inf
    for pieces in range(1, min(MAX_SEGMENTS, n // 2) + 1):
        sse, ranges = _best_cut(points, pieces)
        score = n * math.log(max(sse, 1e-12) / n) + 2 * pieces * math.log(n)
        if score < best_score - 1e-9:
            best_score, choice = score, (sse, ranges)
    assert choice is not None
    factor = bus_factor(log.collective, log.ranks)  # type: ignore[arg-type]
    segments = []
    for i, (lo, hi) in enumerate(choice[1]):
        a, c, _ = _line(points[lo:hi])
        upto = points[hi - 1][0] if i < len(choice[1]) - 1 else float(MAX_SIZE_BYTES)
        bus = min(max(factor / c, BUS_RANGE_BPS[0]), BUS_RANGE_BPS[1])
        segments.append(Segment(upto_bytes=upto, latency_s=min(a, MAX_LATENCY_S), bus_Bps=bus))
    fit = CollectiveFit(
        ranks=log.ranks,
        nodes=log.nodes,
        segments=tuple(segments),
        source=log.source,
        regimes=regimes(segments, [s for s, _ in points]),
    )
    residuals = tuple(
        (float(r.size), fit.time_s(log.collective, r.size, log.ranks) / ((r.oop_s + r.ip_s) / 2) - 1) for r in log.rows
    )
    return fit.model_copy(update={"residuals": residuals})


def regimes(segments: Sequence[Segment], sizes: Sequence[float]) -> str:
    """Where the fitted bus bandwidth falls by :data:`SLOWER_REGIME` or more from one size range to the next, each
    side's sizes and bus bandwidth; empty where it never does."""
    notes = []
    lows = [0.0, *(s.upto_bytes for s in segments)]
    for i in range(1, len(segments)):
        before, after = segments[i - 1], segments[i]
        if after.bus_Bps * SLOWER_REGIME > before.bus_Bps:
            continue
        first = [s for s in sizes if lows[i - 1] < s <= lows[i]]
        second = [s for s in sizes if lows[i] < s <= lows[i + 1]]
        notes.append(
            f"{format_bytes(min(first))}-{format_bytes(max(first))} at {before.bus_Bps / 1e9:.3g} GB/s, "
            f"{format_bytes(min(second))}-{format_bytes(max(second))} at {after.bus_Bps / 1e9:.3g} GB/s"
        )
    if not notes:
        return ""
    return (
        f"two regimes: {'; '.join(notes)}. NCCL's own model never has the bus bandwidth fall as the size grows (it "
        "picks the fastest choice per size): either a switch it makes runs slower on these hosts than it expects "
        "(a rerun with NCCL_ALGO and NCCL_PROTO pinned tells) or something outside it slows the larger sizes (the "
        "hosts moving the socket transport's data); a fit of one regime does not predict the other, and plan prices "
        "each size with its own regime's terms"
    )


def fit_logs(logs: Sequence[NcclTestsLog]) -> NcclFit:
    """One fit per collective (the last log of a collective wins: name one log per collective)."""
    versions = {log.nccl_version for log in logs if log.nccl_version}
    return NcclFit(
        nccl_version=versions.pop() if len(versions) == 1 else None,
        collectives={log.collective: fit_log(log) for log in logs},
    )
