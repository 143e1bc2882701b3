"""Which pairs a pairwise exchange (gossip) is priced at, and with what weight.

A gossip sync pairs the ranks afresh from the seed and the sync's step (the declaration's ``pairing``, the function
the replicator itself calls), so one sync may pair nodes across a WAN and the next nodes of one site: no single
pairing stands for the run. The model prices each distinct pairing once and averages them, weighted by how many
syncs drew it. A sync that pairs two ranks for the first time in the run is priced apart: that pair's connection has
never carried data, so TCP starts it from its initial window (slow start over the pair's round trip), where a pair
that exchanged before keeps the window its earlier bursts grew, unless its connection rested over other syncs'
exchanges long enough for a restart after idle (``tcp_slow_start_after_idle`` with a congestion control without its
own, such as cubic): each sync is priced apart by how many syncs ago its pairs last met.

* a run's prediction and replay pass the 1-based steps it measured, and the syncs among them are the syncs the run
  did (a run about to start: the steps it will measure);
* without a run (``plan``), the first :data:`EXPECTED_SYNCS` syncs the declared pairing draws from the settings'
  seed stand for the pairing's expectation (on 4 nodes each of the 3 pairings comes up in 27-38 % of the draws over
  five seeds).

Where the syncs draw more than :data:`MOST_PRICED` distinct pairings (8 nodes and more), that many syncs spread
evenly over them stand for them: a sync's price on many nodes varies little from pairing to pairing (many pairs
share each link), and pricing one costs a graph's rings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from netbench.declarations.spec import Settings
from netbench.model.exchange import Exchange

__all__ = ["EXPECTED_SYNCS", "MOST_PRICED", "Pairs", "canonical", "each_sync", "sync_pairings"]

EXPECTED_SYNCS = 256  # draws standing for the expectation: on 4 nodes a pairing's share within ~6 points of a third
# Distinct pairings priced at most (each a graph's rings built and priced: ~5 ms at 16 nodes): where the syncs draw
# more, that many syncs spread evenly over them stand for them. 4 nodes draw 3 pairings (each apart by how many syncs
# ago its pairs last met): every sync counts.
MOST_PRICED = 32

Pairs = tuple[tuple[int, int], ...]


def canonical(pairs: Sequence[tuple[int, int]]) -> Pairs:
    """``pairs`` in one order (each pair low rank first, the pairs sorted): a pair's exchange is symmetric, so two
    draws that pair the same ranks price the same."""
    return tuple(sorted((min(a, b), max(a, b)) for a, b in pairs))


def sync_pairings(
    pairing: Callable[[Settings, int, int], list[tuple[int, int]]],
    config: Settings,
    ranks: int,
    exchange: Exchange,
    steps: Sequence[int] | None = None,
) -> list[tuple[float, Pairs, int]]:
    """(weight, pairs, since) of every distinct pairing ``exchange`` makes at a sync among ``steps`` (1-based: the
    steps a run measured; those on the exchange's period are its syncs), the weights summing to 1; where none of
    ``steps`` is a sync (or none are given), the first :data:`EXPECTED_SYNCS` syncs of the period; where they draw
    more than :data:`MOST_PRICED` pairings, that many syncs spread evenly over them. ``since``: how many syncs ago the
    sync's pairs last exchanged, the longest of its pairs' (every sync from the first counted, warm-up included); 0
    where some pair exchanges for the first time in the run, so its connection has never carried data and starts
    from TCP's initial window; 2 or more where a pair's connection rested over other syncs' exchanges."""
    first = exchange.first_sync
    syncs = sorted({s for s in steps or () if s >= first and (s - first) % exchange.period == 0})
    if not syncs:
        syncs = [first + exchange.period * i for i in range(EXPECTED_SYNCS)]
    drawn = _drawn(pairing, config, ranks, exchange.period, first, syncs)
    if len(drawn) > MOST_PRICED:  # that many syncs spread evenly over them: at most that many pairings to price
        syncs = [syncs[i * len(syncs) // MOST_PRICED] for i in range(MOST_PRICED)]
        drawn = _drawn(pairing, config, ranks, exchange.period, first, syncs)
    return [(count / len(syncs), pairs, since) for (pairs, since), count in sorted(drawn.items())]


def each_sync(
    pairing: Callable[[Settings, int, int], list[tuple[int, int]]],
    config: Settings,
    ranks: int,
    exchange: Exchange,
    steps: Sequence[int],
) -> dict[int, tuple[Pairs, int]]:
    """Per sync among ``steps`` (1-based), its pairs and how many syncs ago they last met (as :func:`sync_pairings`
    counts it): what a replay with a clock per node (:mod:`netbench.model.node_clocks`) walks through."""
    first = exchange.first_sync
    wanted = {s for s in steps if s >= first and (s - first) % exchange.period == 0}
    out: dict[int, tuple[Pairs, int]] = {}
    last: dict[tuple[int, int], int] = {}
    for index, step in enumerate(range(first, max(wanted, default=0) + 1, exchange.period)):
        pairs = canonical(pairing(config, ranks, step))
        if step in wanted:
            out[step] = pairs, 0 if any(pair not in last for pair in pairs) else max(index - last[p] for p in pairs)
        last.update(dict.fromkeys(pairs, index))
    return out


def _drawn(
    pairing: Callable[[Settings, int, int], list[tuple[int, int]]],
    config: Settings,
    ranks: int,
    period: int,
    first: int,
    syncs: Sequence[int],
) -> Counter[tuple[Pairs, int]]:
    """How many of ``syncs`` drew each pairing, apart by how many syncs ago its pairs last met (0: some never)."""
    wanted, last = set(syncs), {}
    drawn: Counter[tuple[Pairs, int]] = Counter()
    for index, step in enumerate(range(first, max(syncs) + 1, period)):
        pairs = canonical(pairing(config, ranks, step))
        if step in wanted:
            since = 0 if any(pair not in last for pair in pairs) else max(index - last[pair] for pair in pairs)
            drawn[pairs, since] += 1
        last.update(dict.fromkeys(pairs, index))
    return drawn
