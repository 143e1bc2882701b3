"""What a :class:`~netbench.planning.request.PlanRequest` resolves to before anything is priced: the shapes, the network
graphs with their ranks placed, the replicators with their buckets sized; a problem is one :class:`PlanInputError` line
naming the option."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pydantic

from netbench.declarations.spec import SettingError
from netbench.model.network import GraphModel
from netbench.model.overlap import bucket_mb_for_shapes
from netbench.model.schemes import Scheme, SchemeUnavailable
from netbench.model.shapes_from_count import synthetic_shapes
from netbench.planning.request import PlanRequest
from netbench.shapes import (
    MAX_PARAMS,
    MAX_PLANNED_PARAMS,
    ParamShape,
    ShapeError,
    check_param_count,
    resolve_shapes,
)
from netbench.topology import DirectionSpec, PlacementError, Topology, TopologyError, parse_rank_order, place
from netbench.topology.options import PRESETS, refuse_untaken, topology_from_options
from netbench.topology.presets import DEFAULT_PRESET
from netbench.validation import as_option, one_line

__all__ = ["PlanInputError", "PlanInputs", "plan_inputs", "DEFAULT_SHAPES"]

DEFAULT_SHAPES = "gpt2-small:blocks=2"
PLAIN_REPLICATOR = "full"  # the dense all-reduce that ZeRO's sharding collectives replace


class PlanInputError(ValueError):
    """A plan's input the model cannot take: one line naming the option."""


@dataclass(frozen=True)
class PlanInputs:
    """The request resolved: shapes and their label, the topology's name, the graphs (none: the star's closed form) and
    the replicators with ``bucket_mb`` set."""

    shapes: list[ParamShape]
    shapes_label: str
    topology: str
    graphs: list[GraphModel]
    schemes: list[Scheme]


def plan_inputs(request: PlanRequest) -> PlanInputs:
    """The request's shapes, graphs and sized replicators, checked before anything is computed or measured."""
    shapes, label = _shapes(request)
    topology = request.topology or DEFAULT_PRESET
    if request.nodes is not None and topology not in PRESETS:
        raise PlanInputError(f"--nodes: a topology file sets the node count ({topology!r}); leave --nodes out")
    # a GPU layout sharded within sites prices the WAN between them itself (no graph)
    graphs = _sites_checked(request) if request.layout.sites else _placed(request, _graphs(request, topology))
    if request.gpu().asked and graphs and request.backend != "gloo":
        # NCCL's model and the ideal one price a communicator on one NIC rate and one delay: a graph's own links
        # (racks, oversubscribed trunks, asymmetric WAN links) have no term there
        raise PlanInputError(
            "--topology: the GPU backends price a flat cluster on uniform links; give sites as --topology sites "
            "--sites N --wan-bw RATE --wan-delay TIME with --shard hsdp (a site's nodes shard, the replicator "
            "crosses the WAN), or plan the network graph with gloo (leave out --backend and --accelerator)"
        )
    if request.gpu().asked and graphs:
        raise PlanInputError(
            "--topology: the utilisation answers plan a flat cluster (leave out --topology, or --accelerator, "
            "--target-utilization, --tokens and --figure)"
        )
    machines = graphs[0].topology.node_count if graphs else request.node_counts[0]
    # a graph's ring bottleneck, else the star's link
    link = graphs[0].ring_link() if graphs else (min(request.up_bps, request.down_bps), 2 * request.delay)
    schemes = [_with_bucket(request, s, shapes, *link, machines) for s in request.schemes]
    _check_payloads(schemes, shapes, max(2, machines))
    _check_shard(request, schemes)
    return PlanInputs(shapes, label, topology, graphs, schemes)


def _shapes(request: PlanRequest) -> tuple[list[ParamShape], str]:
    """The shape list and its label; ``params`` with ``layers`` names that many layers (``layers.N.``)."""
    params, layers = request.params, request.layers
    cap = MAX_PARAMS if request.backend == "gloo" else MAX_PLANNED_PARAMS  # gloo's plans are of runs on this host
    if params:
        try:
            count = float(params)
        except ValueError:
            raise PlanInputError(
                f"--params: expected a parameter count between 1 and {cap:.0e} (e.g. 1.5e9), got {params!r}"
            ) from None
        try:
            count = check_param_count(round(count) if math.isfinite(count) else count, "--params", cap)
            shape_list = synthetic_shapes(count, min(layers, count) if layers else None)
        except ShapeError as exc:
            raise PlanInputError(f"{exc}{_larger(request, str(exc))}") from None
        in_layers = f" in {layers} layers" if layers else ""
        return shape_list, f"--params {params} (synthetic {shape_list[0].shape[-1]}-wide matrices{in_layers})"
    spec = request.shapes or DEFAULT_SHAPES
    try:
        return resolve_shapes(spec, cap), spec
    except ShapeError as exc:
        raise PlanInputError(f"--shapes: {exc}{_larger(request, str(exc))}") from None


def _sites_checked(request: PlanRequest) -> list[GraphModel]:
    """A GPU layout sharded within sites: the options the sites preset does not take refused as its graph would;
    no graph (the layout prices the WAN)."""
    try:
        refuse_untaken("sites", racks=request.racks, oversubscription=request.oversubscription)
    except TopologyError as exc:
        raise PlanInputError(str(exc)) from None
    if request.rank_order != "topology":
        raise PlanInputError("--rank-order: a layout sharded within sites places each site's nodes together")
    return []


def _larger(request: PlanRequest, error: str) -> str:
    """Where a model over gloo's cap can be planned: on a GPU cluster."""
    over = request.backend == "gloo" and "more than" in error
    return f" (--backend nccl or ideal plans models to {MAX_PLANNED_PARAMS:.0e})" if over else ""


def _graphs(request: PlanRequest, kind: str) -> list[Topology]:
    """The network graph per node count (one for a file), or [] for the star."""
    r = request
    untaken = (r.sites, r.racks, r.wan_bw, r.wan_delay, r.oversubscription)
    try:
        up = DirectionSpec(rate_bps=r.up_bps, delay_s=r.delay)
        down = DirectionSpec(rate_bps=r.down_bps)
    except pydantic.ValidationError as exc:
        if kind == "star" and not any(v is not None for v in untaken):
            return []
        raise PlanInputError(
            one_line(exc, {"rate_bps": "--bw", "delay_s": "--delay"}) + " (on a --topology, links are emulated ones)"
        ) from None
    given = {"sites": r.sites, "racks": r.racks, "wan_bw": r.wan_bw, "wan_delay": r.wan_delay}
    try:
        if refuse_untaken(kind, **given, oversubscription=r.oversubscription) is PRESETS["star"]:
            return []  # every node alike: the model's closed form, at any node count
        counts = r.node_counts if kind in PRESETS else r.node_counts[:1]
        return [topology_from_options(kind, n, up, down, *untaken) for n in counts]
    except TopologyError as exc:
        raise PlanInputError(str(exc) if str(exc).startswith("--") else f"--topology: {exc}") from None


def _placed(request: PlanRequest, graphs: list[Topology]) -> list[GraphModel]:
    """The graphs with their ranks placed ([] for the star)."""
    if not graphs:
        if request.rank_order != "topology":
            raise PlanInputError(
                "--rank-order: places ranks on a --topology of sites or racks; the star's nodes are all alike"
            )
        return []
    if request.gpus_per_node > 1 or request.algorithm != "ring":  # the star model only
        raise PlanInputError(
            "--topology: a network graph is modelled with gloo's ring and one accelerator per node "
            "(leave out --gpus-per-node and --algorithm)"
        )
    try:
        order = parse_rank_order(request.rank_order)
        return [GraphModel(g, place(g, order)) for g in graphs]
    except PlacementError as exc:
        raise PlanInputError(str(exc)) from None


def _with_bucket(
    request: PlanRequest, scheme: Scheme, shapes: list[ParamShape], rate_bps: float, rtt_s: float, machines: int
) -> Scheme:
    """``scheme`` with the request's ``bucket_mb``, or auto from the link by the rule a run resolves it with
    (the buckets travel at once with one worker per node)."""
    value = request.bucket_mb
    if value is None:
        try:
            value = bucket_mb_for_shapes(
                scheme.config, shapes, rate_bps, rtt_s, machines, concurrent=request.gpus_per_node == 1
            )
        except ValueError:
            value = 0.0  # the payload formula rejects these shapes: reported by _check_payloads
    return dataclasses.replace(scheme, config=scheme.config.model_copy(update={"bucket_mb": value}))


def _check_shard(request: PlanRequest, schemes: list[Scheme]) -> None:
    """ZeRO-1/2/3 share one sharded copy among every data-parallel GPU: a replicator has no replicas to synchronise
    but the plain one, whose all-reduce the sharding collectives replace."""
    others = [s.name for s in schemes if s.name != PLAIN_REPLICATOR]
    if request.shard in ("zero1", "zero2", "zero3") and others:
        raise PlanInputError(
            f"--shard {request.shard}: every data-parallel GPU shares one sharded copy, so --replicator {others[0]} "
            "has no replicas to synchronise (--shard hsdp shards within groups and synchronises them)"
        )


def _check_payloads(schemes: list[Scheme], shapes: list[ParamShape], world: int) -> None:
    """A payload formula that rejects these shapes is an input error, before anything is priced."""
    for scheme in schemes:
        try:
            scheme.exchanges(shapes, world)
        except SchemeUnavailable as exc:
            raise PlanInputError(f"--replicator: {exc}") from None
        except SettingError as exc:  # a setting these shapes rule out (fragments that do not divide the layers)
            raise PlanInputError(f"{as_option(exc.field)}: {exc} [replicator {scheme.name}]") from None
        except ValueError as exc:
            raise PlanInputError(f"--replicator {scheme.name}: {exc}") from None
