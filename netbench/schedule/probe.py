"""``probe --schedule``: goodput and round trip of every segment of a schedule, measured in turn on one cluster.

A schedule's segments may be shorter than a goodput measurement needs, so the probe does not keep the schedule's
clock: it applies each segment as the run would (:class:`~netbench.schedule.live.LiveSchedule`), then measures node 0
to the farthest node for ``seconds``, as ``netbench probe`` does. A segment with that path down reports no goodput.
"""

from __future__ import annotations

from typing import Any

from netbench.emulation.cluster import Cluster
from netbench.emulation.probe import farthest_node, measure_goodput, measure_rtt
from netbench.emulation.spec import ClusterSpec
from netbench.schedule.live import LiveSchedule
from netbench.schedule.model import Schedule

__all__ = ["probe_segments"]


def probe_segments(spec: ClusterSpec, schedule: Schedule, seconds: float, pings: int = 10) -> list[dict[str, Any]]:
    """One row per segment: its label, the rate in force on the probed path, goodput and RTT (None where a link is
    down).
    """
    rows = []
    with Cluster(spec) as cluster:
        live = LiveSchedule(cluster, schedule, spec.topology, 1.0, None, None)
        client, server = cluster.nodes[0], cluster.nodes[farthest_node(spec)]
        for segment in live.segments:
            live.apply(segment)
            graph = segment.graph
            row: dict[str, Any] = {
                "segment": segment.index,
                "start_s": segment.start_s,
                "label": segment.label,
                "configured_bps": graph.bottleneck_bps(0, server.index),
                "expected_rtt_ms": (graph.one_way_delay_s(0, server.index) + graph.one_way_delay_s(server.index, 0))
                * 1e3,
            }
            path_down = {graph.access_link(0).name, graph.access_link(server.index).name} & segment.down
            if path_down:
                rows.append({**row, "goodput_bps": None, "rtt_ms": None, "down": sorted(path_down)})
                continue
            goodput, tool, _ = measure_goodput(client, server, seconds)
            rtt = measure_rtt(client, server, count=pings)
            rows.append({**row, "goodput_bps": goodput, "goodput_tool": tool, "rtt_ms": rtt["rtt_ms"]})
        cluster.down()
    return rows
