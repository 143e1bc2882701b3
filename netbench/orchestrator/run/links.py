"""Bytes per link direction: what the model says each one carries per step beside what the counters saw.

The model (:meth:`netbench.model.network.GraphModel.estimate`) gives bytes per step on every link direction and names
the direction (or slow node) that sets the step. The run measured the same directions two ways: a node's interface
counters are its access link (``tx``: ``nX up``, ``rx``: ``nX down``), and ``trunks.csv`` holds every trunk
direction's transmit counters per step. Both are named as the model names them, so a report can say "bottleneck: X
(model) / busiest link: Y (counters)", and both are means over the whole run, from the moment every worker has joined
to the moment every worker has ended its steps, so each direction's bytes are the steps' and nothing else's. The
busiest link is the direction that spent the most time sending per step (its bytes over its rate), which is what a
bottleneck means; on a uniform network that is also the one that moved the most bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from netbench.calibrate.hostcache import load_calibration
from netbench.model.network import GraphEstimate, direction_name, direction_of
from netbench.model.schemes import scheme_from_config
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps
from netbench.topology.graph import Hop, Topology
from netbench.validation import error_text

__all__ = [
    "access_bytes_per_step",
    "trunk_bytes_per_step",
    "local_work_by_node",
    "agreement",
    "largest_byte_error",
    "compare_links",
    "read_trunks",
    "link_report",
]


def access_bytes_per_step(steps: pd.DataFrame, topology: Topology, placement: tuple[int, ...]) -> dict[str, float]:
    """Each access link direction's mean bytes per step, from the node's own counters (rank r on ``placement[r]``).

    A step ends when a rank has received what it needs, not when everything it sent has left: a rank ahead of a
    slow hop ends its steps with its last messages still queued (in its sockets, or in its uplink's shaper), and its
    counters book them a step later or after the run. So, where the last step recorded its tail (what the interface
    moved until every rank had ended its steps), the mean runs over the whole run, warm-up included, as a trunk's
    does (:func:`trunk_bytes_per_step`): from the barrier before step 0 to the barrier after the last, every byte
    of every step in, nothing else. Without a tail (the barrier after the last step failed: a peer gone), the
    mean over the measured steps.
    """
    if Col.TX_BYTES not in steps or measured_steps(steps).empty:
        return {}
    out: dict[str, float] = {}
    for rank, rows in steps.groupby(Col.RANK):
        link = topology.access_link(placement[int(rank)]).name
        for column, tail, forward in (
            (Col.TX_BYTES, Col.TAIL_TX_BYTES, True),
            (Col.RX_BYTES, Col.TAIL_RX_BYTES, False),
        ):
            if column in rows and rows[column].notna().any():
                out[direction_name(topology, Hop(link, forward))] = _per_step(rows, column, tail)
    return out


def _per_step(rows: pd.DataFrame, column: Col, tail: Col) -> float:
    """One rank's counter per step: over the whole run with its tail where recorded, else over its measured steps."""
    if tail in rows and rows[tail].notna().any():
        return (float(rows[column].sum()) + float(rows[tail].sum())) / len(rows)
    return float(measured_steps(rows)[column].mean())


def trunk_bytes_per_step(trunks: pd.DataFrame, topology: Topology) -> dict[str, float]:
    """Each trunk direction's mean bytes per step over the whole run, warm-up included, from ``trunks.csv``.

    The orchestrator samples the trunks when the slowest worker's step record appears, which on a crowded host can
    lag that step's traffic by most of a step (an 8-node run on 2 cores booked two steps' bytes in one row and
    nearly none in the last). Only the first sample (every worker joined, held before its first step until it is
    taken, so the rendezvous's bytes stay out) and the last (every worker done: every byte a step sent has arrived)
    are exact, so the mean runs from one to the other: every step of a run carries the same exchanges, or (a
    periodic one) as many per step on average.
    """
    if trunks.empty:
        return {}
    steps = int(trunks["step"].max())
    if steps < 1:
        return {}
    out: dict[str, float] = {}
    for (link, direction), rows in trunks.groupby(["link", "direction"]):
        out[direction_of(topology, str(link), direction == "fwd")] = float(rows["tx_bytes"].sum()) / steps
    return out


def _rates(topology: Topology) -> dict[str, float]:
    return {
        direction_name(topology, Hop(link.name, fwd)): link.direction(fwd).rate_bps
        for link in topology.links
        for fwd in (True, False)
    }


TIE = 0.9  # a link direction at least this busy, relative to the busiest, is as much the bottleneck (equal links tie)
NODE_TIE = 0.95  # a node's local work at least this share of the slowest node's is as slow
ENDED_PHASE = (
    "per-link bytes are modelled for the phase that lasts, and the counters' means run over the whole run, "
    "which holds an ended phase too (a warm-up)"
)
LINK_SHARE = 0.1  # per-link byte errors count on directions carrying at least this share of the busiest one's bytes


def local_work_by_node(steps: pd.DataFrame, placement: tuple[int, ...], names: list[str]) -> dict[str, float]:
    """Each node's median local work per measured step (compute, apply, encode, decode): which node is slow."""
    measured = measured_steps(steps)
    parts = [c for c in (Col.COMPUTE_S, Col.APPLY_S, Col.COMPRESS_S, Col.DECODE_S) if c in measured]
    if measured.empty or not parts:
        return {}
    local = measured[parts].fillna(0.0).sum(axis=1).groupby(measured[Col.RANK]).median()
    return {names[placement[int(rank)]]: float(seconds) for rank, seconds in local.items()}


def agreement(
    model_kind: str, model_name: str, busy: dict[str, float], local: dict[str, float]
) -> tuple[str | None, bool | None]:
    """What the measurement shows sets the step (the slowest node, or the busiest link direction), and whether the
    model's bottleneck is it: within TIE of the busiest link, or NODE_TIE of the slowest node's local work."""
    if model_kind == "node":
        if not local:
            return None, None
        slowest = max(local, key=local.__getitem__)
        return f"node {slowest}", local.get(model_name, 0.0) >= NODE_TIE * local[slowest]
    if not busy:
        return None, None
    busiest = max(busy, key=busy.__getitem__)
    return busiest, busy.get(model_name, 0.0) >= TIE * busy[busiest]


def largest_byte_error(rows: list[dict[str, Any]]) -> float | None:
    """The largest |measured / predicted - 1| over the directions that carry a real share of the traffic."""
    both = [r for r in rows if r["predicted_bytes_per_step"] and r["measured_bytes_per_step"] is not None]
    if not both:
        return None
    biggest = max(r["predicted_bytes_per_step"] for r in both)
    return max(abs(r["ratio"] - 1) for r in both if r["predicted_bytes_per_step"] >= LINK_SHARE * biggest)


def compare_links(
    est: GraphEstimate, topology: Topology, measured: dict[str, float], local: dict[str, float] | None = None
) -> dict[str, Any]:
    """Predicted beside measured bytes per step for every link direction, the model's bottleneck, the busiest link,
    and whether the measurement shows the model's bottleneck (``local``: each node's measured local work)."""
    rates = _rates(topology)
    names = sorted(
        set(est.link_bytes) | set(measured), key=lambda n: -max(est.link_bytes.get(n, 0.0), measured.get(n, 0.0))
    )
    rows = []
    for name in names:
        predicted, seen = est.link_bytes.get(name), measured.get(name)
        rows.append(
            {
                "link": name,
                "rate_bps": rates.get(name),
                "predicted_bytes_per_step": predicted,
                "measured_bytes_per_step": seen,
                "ratio": seen / predicted if seen is not None and predicted else None,
            }
        )
    busy = {n: 8 * b / rates[n] for n, b in measured.items() if rates.get(n)}
    busiest = max(busy, key=busy.__getitem__) if busy else None
    b = est.bottleneck
    shown, agrees = agreement(b.kind, b.name, busy, local or {})
    return {
        "directions": rows,
        "link_bytes_max_error": largest_byte_error(rows),
        "bottleneck_model": b.name if b.kind == "link" else f"node {b.name}",
        "bottleneck_text": b.text,
        "bottleneck_measured": shown,
        "bottleneck_agrees": agrees,
        "busiest_link": busiest,
        "busiest_bytes_per_step": measured.get(busiest) if busiest else None,
        "busiest_send_s_per_step": busy.get(busiest) if busiest else None,
    }


def read_trunks(path: Path | None) -> pd.DataFrame:
    """``trunks.csv`` (an empty frame where the run had no trunks)."""
    if path is not None and path.is_file():
        try:
            return pd.read_csv(path)
        except (OSError, ValueError):
            pass
    return pd.DataFrame(columns=["step", "link", "direction", "tx_bytes", "tx_packets"])


def link_report(config: Any, steps: pd.DataFrame, trunks: pd.DataFrame, calibration: Any) -> dict[str, Any]:
    """:func:`compare_links` for a finished run (one worker per node), or ``{"error": why}``: never fails the run."""
    from netbench.orchestrator.prediction import (  # late: keeps psutil, pyroute2 off this module's import
        model_step,
        run_local_time_s,
        workload_shapes,
    )  # late: keeps psutil, pyroute2 off this module's import

    if getattr(config, "gpus_per_node", 1) != 1:
        return {"error": "per-link bytes are modelled with one worker per node"}
    try:
        cluster = config.cluster
        shapes = workload_shapes(config.workload, cluster.nodes)
        local = run_local_time_s(steps, config, shapes)
        if local is None:
            return {"error": "no measured steps"}
        scheme = scheme_from_config(config.replicator)
        if scheme.ended(shapes, cluster.nodes):
            return {"error": ENDED_PHASE}
        est = model_step(config, shapes, local, calibration if calibration is not None else load_calibration(), scheme)
        measured = {
            **access_bytes_per_step(steps, cluster.topology, cluster.placement),
            **trunk_bytes_per_step(trunks, cluster.topology),
        }
        local = local_work_by_node(steps, cluster.placement, [n.name for n in cluster.topology.nodes])
        return compare_links(est, cluster.topology, measured, local)
    except Exception as exc:  # noqa: BLE001 - reported beside the measurement instead of failing the run
        return {"error": error_text(exc)}
