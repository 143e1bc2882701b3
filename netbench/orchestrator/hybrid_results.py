"""Summary figures of a run with G workers per node: the node's payload, and the intra-node link beside the NIC.

Every worker of a node reads the same two interfaces (its NIC and the loopback that is the
intra-node link), so a worker's counter deltas are already its node's; its payload is its own
slices', so the node's is the sum over its G workers.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def hybrid_summary(measured: pd.DataFrame, how: str) -> dict[str, Any]:
    """Keys added to the summary when workers share nodes (``local_rank`` recorded); {} otherwise."""
    if "local_rank" not in measured or measured["local_rank"].isna().all():
        return {}
    per_rank = measured.groupby("rank")
    node = per_rank["node"].first()
    out: dict[str, Any] = {"gpus_per_node": int(measured["local_rank"].max()) + 1}
    payload = per_rank["payload_bytes"].agg(how).groupby(node).sum()
    out["payload_bytes_per_step"] = float(payload.median())  # per node, as the model and the flat runs give it
    out["worker_payload_bytes_per_step"] = float(per_rank["payload_bytes"].agg(how).median())
    out["intra_comm_time_s"] = float(per_rank["intra_comm_s"].agg(how).max())
    by_node: dict[int, dict[str, float]] = {int(n): {"payload_bytes_per_step": float(v)} for n, v in payload.items()}
    for name, column in (("intra_tx_bytes_per_step", "intra_tx_bytes"), ("intra_rx_bytes_per_step", "intra_rx_bytes")):
        if column in measured and measured[column].notna().any():
            values = per_rank[column].agg(how).groupby(node).median()
            out[name] = float(values.median())
            for n, v in values.items():
                by_node[int(n)][name] = float(v)
    out["per_machine"] = by_node
    return out
