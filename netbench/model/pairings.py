"""Which pairs a pairwise exchange (gossip) is priced at, and with what weight.

A gossip sync pairs the ranks afresh from the seed and the sync's step (the declaration's ``pairing``, the function
the replicator itself calls), so one sync may pair nodes across a WAN and the next nodes of one site: no single
pairing stands for the run. The model prices each distinct pairing once and averages them, weighted by how many
syncs drew it:

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
) -> list[tuple[float, Pairs]]:
    """(weight, pairs) of every distinct pairing ``exchange`` makes at a sync among ``steps`` (1-based: the steps a
    run measured; those on the exchange's period are its syncs), the weights summing to 1; where none of ``steps`` is a
    sync (or none are given), the first :data:`EXPECTED_SYNCS` syncs of the period."""
    syncs = [s for s in steps or () if s % exchange.period == exchange.offset % exchange.period]
    if not syncs:
        first = exchange.offset % exchange.period or exchange.period
        syncs = [first + exchange.period * i for i in range(EXPECTED_SYNCS)]
    drawn = Counter(canonical(pairing(config, ranks, step)) for step in syncs)
    return [(count / len(syncs), pairs) for pairs, count in sorted(drawn.items())]
