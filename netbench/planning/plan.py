"""``plan(request, calibration)``: the analytic model's answers for one :class:`~netbench.planning.request.PlanRequest`.

The document is what ``netbench plan --json`` prints: per replicator and cluster the payload, wire bytes,
communication and step time (:func:`netbench.model.step.training_step`, the step a run's prediction takes), and the
derived answers (:class:`~netbench.model.planner.Planner`); on a network graph what sets each step
(:mod:`netbench.planning.graphs`); with a GPU backend or an accelerator the utilisation answers
(:mod:`netbench.planning.gpu`). Nothing is printed, drawn or measured here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from netbench.model.calibration import Calibration, cost_key
from netbench.model.compute import model_shape
from netbench.model.framing import Framing
from netbench.model.planner import Planner
from netbench.model.rows import estimate_row
from netbench.model.view import cluster_scenario
from netbench.planning.churn import churn_row, churn_settings
from netbench.planning.gpu import answers, compute_seconds, figure_title, plan_gpu_cluster
from netbench.planning.graphs import plan_on_graphs
from netbench.planning.inputs import PlanInputError, PlanInputs, plan_inputs
from netbench.planning.request import PlanRequest
from netbench.shapes import total_params
from netbench.validation import one_line

__all__ = ["PlanResult", "plan", "COUNTS"]

# what each count in a plan's rows and answers means (a node is a machine, a worker a process: one rank)
COUNTS = {
    "nodes": "workers: the processes that replicate, one rank each (machines x gpus_per_node)",
    "machines": "nodes: the machines the workers run on, gpus_per_node workers each",
}


@dataclass(frozen=True)
class PlanResult:
    """A plan's document and what its text and figure need besides: the inputs resolved, the calibration that priced
    the codecs, the framing (gloo), the figure's curves and title (where a figure was asked)."""

    doc: dict[str, Any]
    inputs: PlanInputs
    calibration: Calibration
    framing: Framing | None = None
    curves: dict | None = None
    figure_title: str = ""
    nic_from_fit: bool = False


def plan(
    request: PlanRequest,
    calibration: Calibration | None = None,
    calibration_path: Path | None = None,
    inputs: PlanInputs | None = None,
    *,
    derived: bool = True,
) -> PlanResult:
    """The plan ``request`` asks for. ``calibration``: this host's constants for gloo (None: the model's defaults), the
    codec profile for a GPU backend (None: the accelerator's shipped profile); ``calibration_path`` names it in the
    document; ``inputs``: :func:`plan_inputs` of ``request`` where the caller resolved them already; ``derived``
    False leaves the derived answers (``derived``: crossovers, doubling node counts, where communication equals
    compute) out of the document, for a caller that reads only the rows or the utilisation answers.
    :class:`PlanInputError` (one line naming the option) where the request's inputs cannot be planned."""
    inputs = inputs or plan_inputs(request)
    gpu = request.gpu()
    if gpu.backend != "gloo":
        found = plan_gpu_cluster(request, inputs, calibration, derived=derived)
        found.doc["counts"] = COUNTS
        return PlanResult(found.doc, inputs, calibration or Calibration(), None, found.curves, found.figure_title,
                          found.nic_from_fit)  # fmt: skip
    calib = calibration or Calibration()
    try:
        acks = {} if request.acks_per_segment is None else {"acks_per_segment": request.acks_per_segment}
        framing = calib.framing(mtu=request.mtu, **acks)
    except pydantic.ValidationError as exc:
        raise PlanInputError(
            one_line(exc, {"mtu": "--mtu", "acks_per_segment": "--acks-per-segment"}, options=True)
        ) from None
    compute_how, compute_s = "", {n: request.compute_ms / 1e3 for n in request.node_counts}
    g = request.gpus_per_node
    if gpu.asked:
        shape_model = model_shape(inputs.shapes, gpu.layers)
        for n in request.node_counts:
            compute_s[n], compute_how = compute_seconds(gpu, shape_model, n * g, request.compute_ms)
    scenarios = [
        cluster_scenario(
            n, request.up_bps, request.down_bps, request.delay, compute_s[n], request.tcp, framing, g,
            request.intra_bits_per_s, request.algorithm,
        )
        for n in request.node_counts
    ]  # fmt: skip
    head = {"shapes": inputs.shapes_label, "params": total_params(inputs.shapes), "counts": COUNTS}
    if inputs.graphs and request.mtbf is not None:
        raise PlanInputError("--mtbf: churn is priced on the star of --nodes (leave --topology out)")
    if inputs.graphs:
        graphs = plan_on_graphs(inputs.graphs, inputs.schemes, inputs.shapes, scenarios[0], calib)
        doc = head | {
            "topology": inputs.topology,
            "rank_order": request.rank_order,
            "graphs": [m.topology.model_dump() for m in inputs.graphs],
            "tcp": request.tcp.model_dump(),
            **graphs,
        }
        return PlanResult(doc, inputs, calib, framing)
    planner = Planner(inputs.shapes, calib)
    rows = [estimate_row(planner.step(s, sc), calib) for s in inputs.schemes for sc in scenarios]
    answered = {"derived": planner.derived(inputs.schemes, scenarios)} if derived else {}
    extra: dict = {}
    if gpu.asked:
        extra = {"compute": {"how": compute_how}} | answers(planner, inputs.schemes, scenarios, gpu, rows)
    curves = extra.pop("curves", None)
    if request.mtbf is not None:
        tokens = (gpu.tokens, gpu.tokens_per_step) if gpu.tokens and gpu.tokens_per_step else None
        pairs = [(s, n) for s in inputs.schemes for n in request.node_counts]
        for row, (scheme, n) in zip(rows, pairs):
            row["churn"] = churn_row(
                request, planner, scheme, inputs.shapes, n, compute_s[n], framing, tokens, calib.overhead("pairwise")
            )
        extra["churn"] = churn_settings(request)
    doc = head | {
        "calibration": {
            "source": calib.source,
            "path": str(calibration_path),
            "created": calib.created,
            "host": calib.host,
            "digest": calib.digest(),
            "measured": [cost_key(s.config) for s in inputs.schemes if calib.measured(cost_key(s.config))],
        },
        "tcp": request.tcp.model_dump(),
        "framing": framing.model_dump()
        | {"mss": framing.mss, "frame_bytes": framing.frame_bytes, "efficiency": framing.efficiency()},
        "rows": rows,
        **answered,
        **extra,
    }
    return PlanResult(doc, inputs, calib, framing, curves, figure_title(inputs.shapes_label, scenarios[0], "gloo"))
