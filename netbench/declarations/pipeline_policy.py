"""Which schedule a bucket pipeline runs: the workers' pipeline (:mod:`netbench.replicators.pipeline`) runs it and
the model (:mod:`netbench.model.overlap`) predicts it, so it is declared here, without torch."""

from __future__ import annotations

__all__ = ["behind_for", "READY", "ENCODE_FIRST"]

READY = 0  # ``behind`` = 0: decode what has arrived, block only after the last start
ENCODE_FIRST = None  # ``behind`` = None: start every bucket, then wait and decode in order

# Measured (scripts/race_reference.py --bucket-mb MB, DeMo's top-k, 100mbit + 20 ms, gpt2-small:blocks=2,
# reports/pipeline/race-lanes.txt): with a lane per two buckets, 7 buckets, READY ran 1.31x the overlap limit (it
# decodes arrivals while buckets are left to encode, so the last buckets start late), encoding first 1.09x. Where
# buckets queue on one lane, each encoded-first bucket waits out the ones before it, and READY decodes while they
# wait.


def behind_for(concurrent: bool) -> int | None:
    """The schedule a pipeline runs (the model reads it too): :data:`ENCODE_FIRST` where its buckets'
    collectives travel at once (``concurrent``: a lane per two buckets), :data:`READY` where they queue."""
    return ENCODE_FIRST if concurrent else READY
