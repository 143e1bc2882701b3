"""steps.csv's columns, declared once: what each holds, in what unit, and which part of netbench writes it.

steps.csv has one row per node per step, the primary data of every run; the run summary, the
model's replay, the fidelity check, the schedule's segments and the reports are all read from it.
Every column is a member of :class:`Col` (a string enum: ``Col.STEP_S == "step_s"``), so readers
name columns as ``steps[Col.STEP_S]`` and a misspelt one fails where it is written
(``Col.STPE_S`` is an AttributeError, :func:`column` a KeyError). Writers build a step record
with :func:`step_record` or a row's part with :func:`step_row`, which reject a key that is not
one of the writer's columns and fill the writer's optional ones it leaves out.

Who writes a column:

* ``worker``: the training loop of ``netbench run`` and ``netbench worker`` (netbench/worker/loop.py);
* ``exec``: ``netbench.step()`` inside the user's own program under ``netbench exec`` (netbench/steps.py);
* ``sharded``: a worker that shares its node with others (G workers per node, netbench/worker/sharding.py);
* ``capture``: the run writer, from each node's packet capture (empty without one);
* ``schedule``: the run writer, under a link schedule (the segment each step ran in);
* ``quorum``: a worker that trains through churn (netbench/worker/fault_tolerant.py): the quorum each step ran in,
  whether its update was committed, and what healing the node cost.

A run's rows carry the columns its writers write (a ``netbench exec`` run has no ``compute_scale``
and no ``*_cpu_s`` pair, a run without a link schedule no ``schedule_*``); a reader checks ``column in steps``
for every column that is not :data:`REQUIRED`. Standard library only: ``import netbench`` and the workers load it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Literal

__all__ = [
    "Col",
    "Writer",
    "WRITERS",
    "REQUIRED",
    "RECORD_ONLY",
    "column",
    "columns_of",
    "dilated_columns",
    "step_row",
    "step_record",
    "capture_column",
    "numbers_text",
    "numbers_of",
]

Writer = Literal["worker", "exec", "sharded", "capture", "schedule", "quorum"]
WRITERS: tuple[Writer, ...] = ("worker", "exec", "sharded", "capture", "schedule", "quorum")
UNITS = {  # a unit as the reference page spells it
    "s": "seconds",
    "B": "bytes",
    "count": "count",
    "x": "ratio",
    "unix s": "Unix time, seconds",
    "bit/s": "bits per second",
    "": "",
}

_STEP: tuple[Writer, ...] = ("worker", "exec")  # every step record has these
_WORKER: tuple[Writer, ...] = ("worker",)
_SHARDED: tuple[Writer, ...] = ("sharded",)
_CAPTURE: tuple[Writer, ...] = ("capture",)
_SCHEDULE: tuple[Writer, ...] = ("schedule",)
_QUORUM: tuple[Writer, ...] = ("quorum",)
OPTIONAL = "optional"  # a row may leave the column empty (None): not every step or writer has the figure
DILATED = "dilated"  # a duration the run writer divides by a dilated run's factor k (t_start/t_end stay real)


class Col(StrEnum):
    """One steps.csv column: its name (the member's value), type, unit, writers, meaning and flags
    (:data:`OPTIONAL`, :data:`DILATED`)."""

    kind: type
    unit: str
    writers: tuple[Writer, ...]
    meaning: str
    optional: bool
    dilated: bool

    def __new__(
        cls,
        name: str,
        kind: type,
        unit: str,
        writers: tuple[Writer, ...],
        meaning: str,
        *flags: str,
    ) -> Col:
        member = str.__new__(cls, name)
        member._value_ = name
        member.kind, member.unit, member.writers, member.meaning = kind, unit, writers, meaning
        member.optional, member.dilated = OPTIONAL in flags, DILATED in flags
        return member

    # fmt: off
    RANK = "rank", int, "", _STEP, "the worker's global rank (node x G + local rank with G workers per node)"
    STEP = "step", int, "count", _STEP, "the step's index, from 0, warm-up steps included"
    WARMUP = "warmup", bool, "", _STEP, "a warm-up step: left out of the summary and the model's replay"
    T_START = "t_start", float, "unix s", _STEP, "wall clock when the step began (lines steps up with the capture)"
    T_END = "t_end", float, "unix s", _STEP, "wall clock when the step ended"
    COMPUTE_S = "compute_s", float, "s", _STEP, (
        "forward and backward (exec: the phase marked compute, else the step's time outside the other phases)"
    ), DILATED
    COMPUTE_SCALE = "compute_scale", float, "x", _WORKER, (
        "how many times as long this node's CPU phases were made to take (above 1: a straggler)"
    ), OPTIONAL
    COMPRESS_S = "compress_s", float, "s", _STEP, "the replicator's encode", DILATED
    COMM_S = "comm_s", float, "s", _STEP, "the collectives (communicate)", DILATED
    DECODE_S = "decode_s", float, "s", _STEP, "the replicator's decode", DILATED
    APPLY_S = "apply_s", float, "s", _STEP, "the optimizer's update", DILATED
    PAYLOAD_BYTES = "payload_bytes", int, "B", _STEP, (
        "bytes the worker handed to collectives (exec: from the declared payload where the program reports none)"
    ), OPTIONAL
    COLLECTIVES = "collectives", int, "count", _STEP, "collective calls the step made"
    COMPRESS_CPU_S = "compress_cpu_s", float, "s", _WORKER, "thread CPU time of the encode", OPTIONAL
    DECODE_CPU_S = "decode_cpu_s", float, "s", _WORKER, "thread CPU time of the decode", OPTIONAL
    STEP_S = "step_s", float, "s", _STEP, "the whole step by the monotonic clock", DILATED
    LOSS = "loss", float, "", _STEP, "the training loss (exec: where the program sets it)", OPTIONAL
    TX_BYTES = "tx_bytes", int, "B", _STEP, "the node's interface counter, bytes sent during the step"
    RX_BYTES = "rx_bytes", int, "B", _STEP, "the node's interface counter, bytes received during the step"
    TX_PACKETS = "tx_packets", int, "count", _STEP, "the node's interface counter, packets sent"
    RX_PACKETS = "rx_packets", int, "count", _STEP, "the node's interface counter, packets received"
    RETRANS_SEGS = "retrans_segs", int, "count", _STEP, "TCP segments the node's namespace sent again"
    REPLICA_SKETCH = "replica_sketch", str, "", _WORKER, (
        "on a sync of a replicator whose replicas differ after it (gossip): a fixed random projection of the node's "
        "parameters, numbers separated by spaces, from which the run summary's replica drift is computed"
    ), OPTIONAL
    TAIL_TX_BYTES = "tail_tx_bytes", int, "B", _WORKER, (
        "the last step's row only: bytes the node's interface sent after that step ended, until every worker had "
        "ended its steps (a rank ahead of a slow hop ends with its last messages still queued)"
    ), OPTIONAL
    TAIL_RX_BYTES = "tail_rx_bytes", int, "B", _WORKER, (
        "the last step's row only: bytes the node's interface received after that step ended, until every worker "
        "had ended its steps"
    ), OPTIONAL

    NODE = "node", int, "", _SHARDED, "the node the worker runs on"
    LOCAL_RANK = "local_rank", int, "", _SHARDED, "the worker's place on its node"
    SHARD_GROUP = "shard_group", int, "", _SHARDED, "the sharding group (a site's workers)", OPTIONAL
    SHARD_RANK = "shard_rank", int, "", _SHARDED, "the worker's place in its sharding group", OPTIONAL
    INTRA_COMM_S = "intra_comm_s", float, "s", _SHARDED, "collectives inside the sharding group", DILATED
    INTRA_PAYLOAD_BYTES = "intra_payload_bytes", int, "B", _SHARDED, "bytes handed to them"
    INTRA_COLLECTIVES = "intra_collectives", int, "count", _SHARDED, "collective calls inside the group"
    INTRA_SEGMENTS_S = "intra_segments_s", str, "s", _SHARDED, (
        "with the weights sharded (FSDP): the worker's local work between consecutive collectives of its sharding "
        "group inside forward and backward, the pieces before the first and after the last included, seconds "
        "separated by spaces (they add up to compute_s); each collective waits for the group's slowest rank"
    ), OPTIONAL, DILATED
    INTRA_TX_BYTES = "intra_tx_bytes", int, "B", _SHARDED, "the intra-node link's counter, bytes sent", OPTIONAL
    INTRA_RX_BYTES = "intra_rx_bytes", int, "B", _SHARDED, "the intra-node link's counter, bytes received", OPTIONAL
    INTRA_TX_PACKETS = "intra_tx_packets", int, "count", _SHARDED, "the intra-node link's packets sent", OPTIONAL
    INTRA_RX_PACKETS = "intra_rx_packets", int, "count", _SHARDED, "the intra-node link's packets received", OPTIONAL

    CAPTURE_TX_WIRE_BYTES = "capture_tx_wire_bytes", int, "B", _CAPTURE, (
        "captured bytes sent, as MTU frames on a real wire (offloaded segments expanded)"
    ), OPTIONAL
    CAPTURE_TX_PAYLOAD_BYTES = "capture_tx_payload_bytes", int, "B", _CAPTURE, "captured TCP payload sent", OPTIONAL
    CAPTURE_TX_PACKETS = "capture_tx_packets", int, "count", _CAPTURE, "captured frames sent", OPTIONAL
    CAPTURE_TX_ACK_ONLY_BYTES = "capture_tx_ack_only_bytes", int, "B", _CAPTURE, (
        "captured bytes of frames sent that carry only an ACK"
    ), OPTIONAL
    CAPTURE_TX_RETRANS_BYTES = "capture_tx_retrans_bytes", int, "B", _CAPTURE, (
        "captured TCP payload sent again (retransmitted)"
    ), OPTIONAL
    CAPTURE_TX_SKB_BYTES = "capture_tx_skb_bytes", int, "B", _CAPTURE, (
        "captured bytes sent as the kernel handed them over (what the interface counters count)"
    ), OPTIONAL
    CAPTURE_RX_WIRE_BYTES = "capture_rx_wire_bytes", int, "B", _CAPTURE, "captured bytes received, MTU frames", OPTIONAL
    CAPTURE_RX_PAYLOAD_BYTES = "capture_rx_payload_bytes", int, "B", _CAPTURE, "captured TCP payload received", OPTIONAL
    CAPTURE_RX_PACKETS = "capture_rx_packets", int, "count", _CAPTURE, "captured frames received", OPTIONAL
    CAPTURE_RX_ACK_ONLY_BYTES = "capture_rx_ack_only_bytes", int, "B", _CAPTURE, (
        "captured bytes of ACK-only frames received"
    ), OPTIONAL
    CAPTURE_RX_RETRANS_BYTES = "capture_rx_retrans_bytes", int, "B", _CAPTURE, (
        "captured TCP payload received again"
    ), OPTIONAL
    CAPTURE_RX_SKB_BYTES = "capture_rx_skb_bytes", int, "B", _CAPTURE, "captured bytes received, as skbs", OPTIONAL

    SCHEDULE_SEGMENT = "schedule_segment", int, "", _SCHEDULE, "the schedule's segment in force when the step began"
    SCHEDULE_RATE_BPS = "schedule_rate_bps", float, "bit/s", _SCHEDULE, "the slowest link rate in that segment"
    SCHEDULE_DELAY_S = "schedule_delay_s", float, "s", _SCHEDULE, "the longest one-way link delay in that segment"
    SCHEDULE_LINK_DOWN = "schedule_link_down", bool, "", _SCHEDULE, "a link was down in that segment"
    SCHEDULE_MEMBERS = "schedule_members", int, "", _SCHEDULE, (
        "how many nodes took part in that segment (the others had left and not joined again)"
    )
    SCHEDULE_ELAPSED_S = "schedule_elapsed_s", float, "s", _SCHEDULE, (
        "when the step began, from the first measured step's start on rank 0 (the schedule's time 0)"
    )

    QUORUM_REPLICAS = "quorum_replicas", int, "count", _QUORUM, (
        "how many nodes the step's quorum held (the nodes that averaged this step's update)"
    )
    COMMITTED = "committed", bool, "", _QUORUM, (
        "whether the step's update was kept: False where a peer left during its exchange, or the node ran it before "
        "it was healed"
    )
    HEAL_BYTES = "heal_bytes", int, "B", _QUORUM, (
        "bytes of state (weights, optimizer state) this node received from a live peer to catch up, in this step"
    )
    HEAL_S = "heal_s", float, "s", _QUORUM, "how long receiving that state took", DILATED
    RESTART_QUORUM = "restart_quorum", int, "", _QUORUM, (
        "torchft's quorum id where the step's quorum held no member past step 0 after the run began: every node that "
        "held the training had left, and the quorum trained afresh from the first weights; empty otherwise"
    ), OPTIONAL
    # fmt: on


REQUIRED: tuple[Col, ...] = (Col.RANK, Col.STEP, Col.STEP_S)  # a steps.csv without these is not one netbench wrote
RECORD_ONLY = ("event", "spans")  # a step record's keys that steps.csv leaves out: its kind, and its timeline
_CAPTURE_DIRECTIONS = ("tx", "rx")


def column(name: str) -> Col:
    """The column called ``name``; KeyError, naming this module, for one steps.csv does not have."""
    try:
        return Col(name)
    except ValueError:
        raise KeyError(f"steps.csv has no column {name!r} (declare it in netbench/rundir/steps_schema.py)") from None


def columns_of(writer: Writer) -> tuple[Col, ...]:
    """The columns ``writer`` produces, in declaration order."""
    if writer not in WRITERS:
        raise KeyError(f"no steps.csv writer {writer!r} (one of {', '.join(WRITERS)})")
    return tuple(c for c in Col if writer in c.writers)


def dilated_columns() -> tuple[Col, ...]:
    """The durations a dilated run's writer divides by k."""
    return tuple(c for c in Col if c.dilated)


def capture_column(direction: str, quantity: str) -> Col:
    """The capture's column of ``quantity`` (wire_bytes, payload_bytes, ...) in ``direction`` (tx or rx)."""
    if direction not in _CAPTURE_DIRECTIONS:
        raise KeyError(f"capture direction {direction!r} is not tx or rx")
    return column(f"capture_{direction}_{quantity}")


def numbers_text(values: Iterable[float]) -> str | None:
    """A cell of numbers separated by spaces (``replica_sketch``, ``intra_segments_s``); None for none."""
    values = tuple(values)
    return " ".join(f"{v:.9g}" for v in values) if values else None


def numbers_of(text: Any) -> tuple[float, ...]:
    """The numbers of such a cell (none for an empty cell, which pandas reads as nan)."""
    return tuple(float(v) for v in text.split()) if isinstance(text, str) else ()


def step_row(writer: Writer, values: dict[str, Any]) -> dict[str, Any]:
    """``writer``'s part of one row, in declaration order: every key must be one of its columns, every required
    one must be there, and an optional one left out is written empty (None)."""
    mine = columns_of(writer)
    unknown = sorted(set(values) - set(mine))
    if unknown:
        raise KeyError(f"steps.csv: {writer} writes no column {', '.join(unknown)} (netbench/rundir/steps_schema.py)")
    missing = [c.value for c in mine if c not in values and not c.optional]
    if missing:
        raise KeyError(f"steps.csv: {writer}'s row lacks {', '.join(missing)}")
    return {c.value: values.get(c) for c in mine}


def step_record(writer: Writer, values: dict[str, Any], spans: Iterable[Any] = ()) -> dict[str, Any]:
    """One step's JSONL record, as ``netbench run``'s workers and ``netbench exec``'s programs both write it."""
    return {"event": "step", **step_row(writer, values), "spans": list(spans)}
