"""Which pairs a pairwise exchange (gossip) is priced at, and with what weight.

A gossip sync pairs the ranks afresh from the seed and the sync's step (the declaration's ``pairing``, the function
the replicator itself calls), so one sync may pair nodes across a WAN and the next nodes of one site: no single
pairing stands for the run. The model prices each distinct pairing once and averages them, weighted by how many
syncs drew it. A sync that pairs two ranks for the first time in the run is priced apart: that pair's connection has
never carried data, so TCP starts it from its initial window (slow start over the pair's round trip), where a pair
that exchanged before keeps the window its earlier bursts grew.

* a run's prediction and replay pass the 1-based steps it measured, and the syncs among them are the syncs the run
  did (a run about to start: the steps it will measure);
* without a run (``plan``), the first :data:`EXPECTED_SYNCS` syncs the declared pairing draws from the settings'
  seed stand for the pairing's expectation (on 4 nodes each of the 3 pairings comes up within a few percent of a
  third of the draws).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from netbench.declarations.spec import Settings
from netbench.model.exchange import Exchange

__all__ = ["EXPECTED_SYNCS", "Pairs", "canonical", "sync_pairings"]

EXPECTED_SYNCS = 256  # draws standing for the expectation: a pairing's share is within ~3 points of its probability

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
) -> list[tuple[float, Pairs, bool]]:
    """(weight, pairs, fresh) of every distinct pairing ``exchange`` makes at a sync among ``steps`` (1-based: the
    steps a run measured; those on the exchange's period are its syncs), the weights summing to 1; where none of
    ``steps`` is a sync (or none are given), the first :data:`EXPECTED_SYNCS` syncs of the period. ``fresh``: some
    pair of the sync exchanges for the first time in the run (every sync from the first counted, warm-up included),
    so its connection has never carried data and starts from TCP's initial window."""
    first = exchange.offset % exchange.period or exchange.period
    syncs = [s for s in steps or () if s >= first and (s - first) % exchange.period == 0]
    if not syncs:
        syncs = [first + exchange.period * i for i in range(EXPECTED_SYNCS)]
    wanted, seen = set(syncs), set()
    drawn: Counter[tuple[Pairs, bool]] = Counter()
    for step in range(first, max(syncs) + 1, exchange.period):
        pairs = canonical(pairing(config, ranks, step))
        if step in wanted:
            drawn[pairs, not seen.issuperset(pairs)] += syncs.count(step)
        seen.update(pairs)
    return [(count / len(syncs), pairs, fresh) for (pairs, fresh), count in sorted(drawn.items())]
