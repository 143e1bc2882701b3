"""Summary figures of a run with G workers per node: the node's payload, and the intra-node link beside the NIC.

Every worker of a node reads the same two interfaces (its NIC and the loopback that is the
intra-node link), so a worker's counter deltas are already its node's; its payload is its own
slices', so the node's is the sum over its G workers.

A node's payload is what it hands to collectives with other nodes. With the weights sharded (``--shard zero3|hsdp``,
one worker per node) the sharding group's gathers and reduce-scatters are such collectives, so they count in it
beside the replicator's; a node's G workers sharding inside the node (FlexDeMo) keep theirs on the intra-node link.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from netbench.rundir.steps_schema import Col


def sharding_summary(measured: pd.DataFrame, how: str, weights_sharded: bool = False) -> dict[str, Any]:
    """Keys added to the summary when workers share nodes (``local_rank`` recorded); {} otherwise.
    ``weights_sharded``: the sharding group's collectives cross between nodes and count in the payload."""
    if Col.LOCAL_RANK not in measured or measured[Col.LOCAL_RANK].isna().all():
        return {}
    per_rank = measured.groupby(Col.RANK)
    node = per_rank[Col.NODE].first()
    out: dict[str, Any] = {"gpus_per_node": int(measured[Col.LOCAL_RANK].max()) + 1}
    handed = measured[Col.PAYLOAD_BYTES]
    if weights_sharded:
        handed = handed + measured[Col.INTRA_PAYLOAD_BYTES].fillna(0)
    worker_payload = handed.groupby(measured[Col.RANK]).agg(how)
    payload = worker_payload.groupby(node).sum()
    out["payload_bytes_per_step"] = float(payload.median())  # per node, as the model and the flat runs give it
    out["worker_payload_bytes_per_step"] = float(worker_payload.median())
    out["intra_comm_time_s"] = float(per_rank[Col.INTRA_COMM_S].agg(how).max())
    by_node: dict[int, dict[str, float]] = {int(n): {"payload_bytes_per_step": float(v)} for n, v in payload.items()}
    for name, column in (
        ("intra_tx_bytes_per_step", Col.INTRA_TX_BYTES),
        ("intra_rx_bytes_per_step", Col.INTRA_RX_BYTES),
    ):
        if column in measured and measured[column].notna().any():
            values = per_rank[column].agg(how).groupby(node).median()
            out[name] = float(values.median())
            for n, v in values.items():
                by_node[int(n)][name] = float(v)
    out["per_machine"] = by_node
    return out
