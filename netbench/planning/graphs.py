"""``plan`` on a network graph: the step per replicator, what sets it, and the WAN questions.

Every step comes from :func:`netbench.model.step.training_step`, the function a run's prediction calls on the run's
graph and placement. Beside each step: the link direction or node that sets it and its share; the WAN rate at which
communication equals compute (the trunks' rates scaled together, bisected); and whether replicating between sites,
sharded within them, beats one flat ring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbench.model.calibration import Calibration
from netbench.model.network import GraphEstimate, GraphModel
from netbench.model.planner import BW_RANGE_BPS
from netbench.model.rows import estimate_row
from netbench.model.schemes import Scheme
from netbench.model.search import sign_change_log
from netbench.model.step import training_step
from netbench.model.steptime import Scenario
from netbench.shapes import ParamShape
from netbench.topology import Topology

__all__ = ["wan_comm_equals_compute", "plan_on_graphs"]


def _slowest_trunk_bps(topology: Topology) -> float | None:
    rates = [rate for t in topology.trunks for rate in (t.forward.rate_bps, t.reverse.rate_bps)]
    return min(rates) if rates else None


def wan_comm_equals_compute(
    model: GraphModel, scheme: Scheme, shapes: Sequence[ParamShape], scenario: Scenario, calib: Calibration
) -> dict[str, Any]:
    """The slowest trunk direction's rate (all trunks scaled together) at which communication equals compute."""
    out: dict[str, Any] = {"replicator": scheme.name, "nodes": model.topology.node_count, "wan_bps": None}
    base = _slowest_trunk_bps(model.topology)
    if base is None:
        return out | {"reason": "no WAN links: every node is behind one switch"}
    if scenario.compute_s <= 0:
        return out | {"reason": "compute time is 0 (pass --compute-ms)"}

    def gap(wan_bps: float) -> float:
        return (
            training_step(model, scheme, shapes, scenario, calib, trunk_scale=wan_bps / base).step.comm_time_s
            - scenario.compute_s
        )

    lo, hi = BW_RANGE_BPS
    if gap(hi) > 0:
        return out | {
            "reason": f"the LAN or the delays keep communication above compute even with {hi:.0e} bit/s WAN links"
        }
    if gap(lo) < 0:
        return out | {"reason": f"communication is shorter than compute even with {lo:.0e} bit/s WAN links"}
    return out | {"wan_bps": sign_change_log(gap, lo, hi), "reason": None}


def _row(est: GraphEstimate, calib: Calibration) -> dict[str, Any]:
    b = est.bottleneck
    return estimate_row(est.step, calib) | {
        "layout": est.layout,
        "bottleneck": {"kind": b.kind, "name": b.name, "share": b.share, "text": b.text},
        "link_bytes_per_step": est.link_bytes,
    }


def plan_on_graphs(
    models: Sequence[GraphModel],
    schemes: Sequence[Scheme],
    shapes: Sequence[ParamShape],
    scenario: Scenario,
    calib: Calibration,
) -> dict[str, Any]:
    """Rows (flat ring, and sharded within sites where the sites are even) and the WAN answers for every graph."""
    rows, wan, sites = [], [], []
    for model in models:
        sc = scenario.model_copy(update={"workers": model.topology.node_count})
        for scheme in schemes:
            flat = training_step(model, scheme, shapes, sc, calib)
            rows.append(_row(flat, calib))
            wan.append(wan_comm_equals_compute(model, scheme, shapes, sc, calib))
            if model.per_site is None:
                continue
            sharded = training_step(model, scheme, shapes, sc, calib, layout="sites")
            rows.append(_row(sharded, calib))
            sites.append(
                {
                    "replicator": scheme.name,
                    "nodes": model.topology.node_count,
                    "flat_step_s": flat.step.step_time_s,
                    "sites_step_s": sharded.step.step_time_s,
                    "sites_faster": sharded.step.step_time_s < flat.step.step_time_s,
                }
            )
    return {"rows": rows, "derived": {"wan_comm_equals_compute_bw": wan, "sites_vs_flat": sites}}
