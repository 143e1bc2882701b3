"""The intra-node link of a node with several workers: its loopback, shaped with tbf when asked.

Workers of one node bind gloo to the node's own address; the kernel routes traffic between local
addresses through ``lo``, never through the node's shaped NIC. So ``lo`` *is* the intra-node link:
its counters give the intra-node bytes, and a tbf on it gives ``--intra-bw``.
"""

from __future__ import annotations

from typing import Any

from pyroute2 import IPRoute

from netbench.emulation.node import Node
from netbench.emulation.shaping import TbfParams

INTRA_IFACE = "lo"


def _shape_lo(rate_bps: float) -> dict[str, Any]:

    tbf = TbfParams.for_rate(rate_bps, offload=True)  # lo sends 64 KiB segments: the burst must hold two
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=INTRA_IFACE)[0]
        ipr.tc(
            "add",
            "tbf",
            index=index,
            handle="1:",
            rate=f"{int(rate_bps)}bit",
            burst=tbf.burst_bytes,
            limit=tbf.limit_bytes,
        )
    return {"rate_bps": rate_bps, "burst_bytes": tbf.burst_bytes, "limit_bytes": tbf.limit_bytes}


def shape_intra(nodes: list[Node], rate_bps: float | None) -> dict[str, Any]:
    """tbf on every node's loopback at ``rate_bps`` (None: left unshaped); what was installed, for run.json."""
    if rate_bps is None:
        return {"iface": INTRA_IFACE, "shaped": False}
    return {"iface": INTRA_IFACE, "shaped": True, "tbf": {node.netns: node.call(_shape_lo, rate_bps) for node in nodes}}
