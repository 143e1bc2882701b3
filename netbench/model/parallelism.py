"""A parallel layout as data, and the step it makes: tensor, pipeline and sharded data parallelism on a GPU cluster.

A :class:`Layout` says how the cluster's GPUs split the model: ``tp`` GPUs of a node share each layer (tensor
parallelism, Megatron-style), ``pp`` pipeline stages of consecutive layers follow each other across nodes (1F1B over
``microbatches`` micro-batches, ``virtual_stages`` chunks a GPU for the interleaved schedule), and the remaining
``dp`` copies train on their own data, their state sharded over a group of them (``shard``: ZeRO-1/2/3, FSDP's full
sharding is ZeRO-3, HSDP is ZeRO-3 inside groups of ``shard_nodes`` nodes) while the replicator synchronises the
groups. Ranks are placed as Megatron and Llama 3 place them: tensor parallel innermost (inside a node), then the
pipeline, then data parallel.

:func:`layout_step` prices one step per GPU with the backend's own collectives (``price``):

* compute: the step's FLOPs over every GPU at the MFU (what the caller passes as ``compute_s``); the pipeline
  runs ``v m + pp - 1`` slots for ``v m`` chunks of work, so a share ``(pp - 1) / (v m + pp - 1)`` of it idles
  (the bubble);
* tensor parallelism: per layer and micro-batch two all-reduces in forward and two in backward of the micro-batch's
  activations (tokens x width, bf16) among the ``tp`` GPUs of a node, on the critical path;
* pipeline: each chunk's activations (forward) and their gradients (backward) go point to point to the next stage,
  each of the ``tp`` GPUs sending its ``1/tp`` share; filling and draining the pipe waits on ``2 (pp - 1)`` of them
  and a slot is never shorter than its two transfers;
* sharding: ZeRO-3 gathers each layer's parameters before its forward and again before its backward, and
  reduce-scatters its gradients after it; ZeRO-1/2 reduce-scatter the gradients and gather the updated parameters
  once (a dense all-reduce's bytes); each gather is prefetched one layer ahead on the network stream, the first
  forward micro-batch and the last backward one hide them, once per step;
* between the groups, the replicator on each GPU's slice of the model, priced by the backend's own layer schedule
  against the last micro-batch's backward.

The parameters stay gathered across a step's micro-batches (torchtitan's setting with pipeline parallelism), the
activations are not counted in memory, and the network between nodes is the plan's one flat network: every node
reaches every other at ``--bw``, shared by the node's GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from netbench.model.memory import MemorySplit
from netbench.model.overlap import BACKWARD_SHARE
from netbench.model.steptime import MAX_PLANNED_WORKERS, Scenario
from netbench.settings import Setting, table

__all__ = [
    "SHARDINGS",
    "ACTIVATION_BYTES",
    "PARALLEL_SETTINGS",
    "Layout",
    "Groups",
    "LayoutStep",
    "group_scenario",
    "site_scenario",
    "bubble_fraction",
    "prefetched",
    "layout_step",
    "memory_split",
]

SHARDINGS = ("none", "zero1", "zero2", "zero3", "hsdp")
SHARD_ALIASES = {"fsdp": "zero3"}  # torch's FSDP (FULL_SHARD) is ZeRO-3
ACTIVATION_BYTES = 2  # bf16 activations between tensor-parallel GPUs and pipeline stages
TP_ALL_REDUCES_PER_LAYER = 4  # Megatron: two in forward (attention, MLP), two in backward
WEIGHT_SHARDS = ("zero3", "hsdp")  # the shardings that gather the weights again for the backward

# A price: (collective, bytes, ranks, ranks per node) -> seconds; bytes is the all-reduce's buffer or one rank's share
Price = Callable[[str, float, int, int], float]


@dataclass(frozen=True)
class Layout:
    """How the GPUs split the model (see the module's docstring); the default is plain data parallelism."""

    tp: int = 1
    pp: int = 1
    microbatches: int | None = None  # None: one per pipeline stage (one with no pipeline)
    virtual_stages: int = 1
    shard: str = "none"
    shard_nodes: int | None = None  # hsdp: nodes per shard group (None: one node)
    sites: int | None = None  # hsdp across sites: a shard group is a site's nodes (the replicator on the WAN)

    @property
    def plain(self) -> bool:
        """Plain data parallelism: every GPU a whole replica, the replicator across all of them."""
        return self.tp == 1 and self.pp == 1 and self.shard == "none"

    @property
    def micro(self) -> int:
        """Micro-batches a step: as given, else one per pipeline stage."""
        return self.microbatches or self.pp

    def groups(self, workers: int, gpus_per_node: int) -> Groups:
        """The group sizes on ``workers`` GPUs, ``gpus_per_node`` a node; ValueError (naming the option) where the
        layout does not divide the cluster."""
        g, model_parallel = gpus_per_node, self.tp * self.pp
        if g % self.tp:
            raise ValueError(
                f"--tp: {self.tp} must divide the {g} GPUs of a node (tensor parallelism stays inside one)"
            )
        if workers % model_parallel:
            raise ValueError(f"--tp x --pp: {model_parallel} GPUs per replica do not divide the {workers} GPUs")
        if model_parallel % g and g % model_parallel:
            raise ValueError(f"--pp: a replica of {model_parallel} GPUs must fill whole nodes of {g} or divide one")
        dp = workers // model_parallel
        per_node = max(1, g // model_parallel)  # a data-parallel group's GPUs in one node
        if self.shard == "none":
            shard = 1
        elif self.shard == "hsdp":
            spanned = dp // per_node  # nodes a data-parallel group spans
            if self.sites:
                if spanned % self.sites:
                    raise ValueError(
                        f"--sites: {self.sites} must divide the {spanned} nodes a data-parallel group spans"
                    )
                nodes = spanned // self.sites
            else:
                nodes = self.shard_nodes or 1
                if spanned % nodes:
                    raise ValueError(
                        f"--shard-nodes: {nodes} must divide the {spanned} nodes a data-parallel group spans"
                    )
            shard = per_node * nodes
        else:
            shard = dp
        return Groups(dp=dp, per_node=per_node, shard=shard, replicas=dp // shard)


@dataclass(frozen=True)
class Groups:
    """A layout on one cluster: data-parallel copies, their GPUs per node, the shard group and the replicas."""

    dp: int
    per_node: int
    shard: int
    replicas: int

    @property
    def shard_per_node(self) -> int:
        return min(self.shard, self.per_node)

    @property
    def replica_per_node(self) -> int:
        """A replica group's GPUs in one node: the copies a node holds beyond its shard group's."""
        return max(1, self.per_node // self.shard)


def memory_split(layout: Layout, groups: Groups) -> MemorySplit:
    """What ``layout`` divides of a GPU's memory: its slice of the model, and the shard group's share of the state
    (ZeRO-1), the gradients (ZeRO-2) and the weights (ZeRO-3, FSDP, HSDP)."""
    level = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "hsdp": 3}[layout.shard]
    n = groups.shard
    return MemorySplit(
        slices=layout.tp * layout.pp,
        weights=n if level >= 3 else 1,
        gradients=n if level >= 2 else 1,
        state=n if level >= 1 else 1,
    )


@dataclass(frozen=True)
class LayoutStep:
    """One step of a layout per GPU: its parts in seconds and the bytes each GPU hands to collectives.

    ``pipeline_s`` is the compute with its bubble and the tensor-parallel and point-to-point time on the critical
    path; ``shard_s`` the sharding collectives left exposed; the replicator's part is the caller's. ``*_bytes``:
    the bus bytes one GPU sends per step for each kind of traffic.
    """

    compute_s: float
    bubble_s: float
    tp_s: float
    p2p_s: float
    shard_s: float
    comm_s: float
    tp_bytes: float
    p2p_bytes: float
    gather_bytes: float
    reduce_bytes: float
    payload_bytes: float  # what one GPU hands to these collectives per step (before each algorithm's bus factor)
    last_backward_s: float  # the last micro-batch's backward on this GPU: what hides the replicator's sync

    @property
    def pipeline_s(self) -> float:
        return self.compute_s + self.bubble_s + self.tp_s + self.p2p_s

    @property
    def step_s(self) -> float:
        return self.pipeline_s + self.shard_s

    def as_dict(self) -> dict:
        return {
            "compute_s": self.compute_s,
            "bubble_s": self.bubble_s,
            "tensor_parallel_s": self.tp_s,
            "pipeline_transfer_s": self.p2p_s,
            "shard_exposed_s": self.shard_s,
            "tensor_parallel_bytes": self.tp_bytes,
            "pipeline_transfer_bytes": self.p2p_bytes,
            "shard_gather_bytes": self.gather_bytes,
            "shard_reduce_bytes": self.reduce_bytes,
        }


def group_scenario(scenario: Scenario, ranks: int, per_node: int, compute_s: float | None = None) -> Scenario:
    """The scenario one group's collective sees: ``ranks`` GPUs, ``per_node`` of them a node, and that share of the
    node's network (the node's other GPUs run their own groups' collectives at the same time)."""
    share = per_node / scenario.gpus_per_node
    update = {
        "workers": ranks,
        "gpus_per_node": per_node,
        "up_bps": scenario.up_bps * share,
        "down_bps": scenario.down_bps * share,
    }
    if compute_s is not None:
        update["compute_s"] = compute_s
    return scenario.model_copy(update=update)


def site_scenario(scenario: Scenario, replicas: int, wan_bps: float, wan_delay_s: float) -> Scenario:
    """The scenario the replicator between sites sees: one GPU of each site a group, every GPU of a site in one
    group at the same time, so each group's share of the site's WAN link is 1 / (the site's GPUs)."""
    site_gpus = scenario.workers // replicas
    rate = wan_bps / site_gpus
    return scenario.model_copy(
        update={"workers": replicas, "gpus_per_node": 1, "up_bps": rate, "down_bps": rate, "delay_s": wan_delay_s}
    )


def bubble_fraction(pp: int, microbatches: int, virtual_stages: int = 1) -> float:
    """The share of a 1F1B pipeline's time its stages idle: (pp - 1) / (v m + pp - 1)."""
    return (pp - 1) / (virtual_stages * microbatches + pp - 1)


def prefetched(compute: Sequence[float], before: Sequence[float], after: Sequence[float] = ()) -> float:
    """Time the network adds to layers computed in order: ``before[i]`` must arrive before layer ``i`` computes
    and is issued when layer ``i - 1`` starts (prefetched one layer ahead); ``after[i]`` is issued when layer ``i``
    ends. One network stream runs them in the order they are issued."""
    after = list(after) or [0.0] * len(compute)
    if not compute:
        return 0.0
    net = arrival = before[0]
    clock = 0.0
    for i, work in enumerate(compute):
        start = max(clock, arrival)
        if i + 1 < len(compute):
            net = max(net, start) + before[i + 1]
            arrival = net
        clock = start + work
        if after[i]:
            net = max(net, clock) + after[i]
    return max(clock, net) - sum(compute)


def _width(layer_params: Sequence[int], d_model: int | None) -> int:
    """The hidden width: the model's, else a transformer layer's 12 d^2 parameters."""
    if d_model:
        return d_model
    return max(1, round(math.sqrt(sorted(layer_params)[len(layer_params) // 2] / 12)))


def layout_step(
    layout: Layout,
    scenario: Scenario,
    layer_params: Sequence[int],
    d_model: int | None,
    tokens_per_step: float,
    element_bytes: int,
    price: Price,
) -> LayoutStep:
    """One step of ``layout`` per GPU on ``scenario`` (its ``compute_s``: the useful compute of a GPU per step).
    ``layer_params``: the model's parameters per layer; ``tokens_per_step``: the global batch; ``element_bytes``:
    the sharding collectives' element size; ``price``: the backend's collective."""
    groups = layout.groups(scenario.workers, scenario.gpus_per_node)
    tp, pp, v, m = layout.tp, layout.pp, layout.virtual_stages, layout.micro
    layers = len(layer_params)
    if layers < pp * v:
        raise ValueError(
            f"--pp: {pp} stages x {v} virtual stages need at least that many layers, the model has {layers}"
        )
    width = _width(layer_params, d_model)
    chunks = v * m
    compute = scenario.compute_s
    slot = compute / chunks
    # tensor parallelism: four all-reduces of a micro-batch's activations per layer of this GPU's stage
    mb_bytes = tokens_per_step / (groups.dp * m) * width * ACTIVATION_BYTES
    stage_layers = layers / pp
    tp_calls = TP_ALL_REDUCES_PER_LAYER * stage_layers * m if tp > 1 else 0
    tp_one = price("all_reduce", mb_bytes, tp, tp) if tp > 1 else 0.0
    tp_s = tp_calls * tp_one
    # pipeline: a chunk's activations forward and their gradients backward, each tp GPU sending 1/tp of them
    p2p_one = _send_s(mb_bytes / tp, scenario, crosses_nodes=tp * pp > scenario.gpus_per_node) if pp > 1 else 0.0
    if pp > 1:
        tp_chunk = tp_s / chunks
        slot_s = max(slot + tp_chunk, 2 * p2p_one)
        pipe = (chunks + pp - 1) * slot_s + 2 * (pp - 1) * p2p_one
        bubble = (pp - 1) * slot_s
        p2p_s = pipe - bubble - compute - tp_s
    else:
        bubble, p2p_s = 0.0, 0.0
    # sharding: per layer of this GPU's stage, its slice of the layer (1/tp of it) gathered and reduce-scattered
    stage = [p / tp for p in _stage_layers(layer_params, pp)]
    gather_bytes = reduce_bytes = 0.0
    payload = tp_calls * mb_bytes + (2 * chunks * mb_bytes / tp if pp > 1 else 0.0)
    shard_s = shard_comm = 0.0
    if groups.shard >= 2:
        n, local = groups.shard, groups.shard_per_node
        bytes_of = [p * element_bytes for p in stage]
        gather = [price("all_gather", b / n, n, local) for b in bytes_of]
        reduce = [price("reduce_scatter", b / n, n, local) for b in bytes_of]
        share = (n - 1) / n
        first_forward = [slot * (1 - BACKWARD_SHARE) / len(stage)] * len(stage)
        last_backward = [slot * BACKWARD_SHARE / len(stage)] * len(stage)
        gathers = 2 if layout.shard in WEIGHT_SHARDS else 1
        backward_gather = gather[::-1] if gathers == 2 else [0.0] * len(stage)
        shard_s = prefetched(first_forward, gather) + prefetched(last_backward, backward_gather, reduce[::-1])
        shard_comm = gathers * sum(gather) + sum(reduce)
        gather_bytes = gathers * share * sum(bytes_of)
        reduce_bytes = share * sum(bytes_of)
        payload += sum(bytes_of) * (1 + gathers / n)  # a reduce-scatter hands in the whole, a gather one share
    tp_bytes = tp_calls * 2 * (tp - 1) / tp * mb_bytes if tp > 1 else 0.0
    p2p_bytes = 2 * chunks * mb_bytes / tp if pp > 1 else 0.0
    return LayoutStep(
        compute_s=compute,
        bubble_s=bubble,
        tp_s=tp_s,
        p2p_s=p2p_s,
        shard_s=shard_s,
        comm_s=tp_s + 2 * chunks * p2p_one + shard_comm,
        tp_bytes=tp_bytes,
        p2p_bytes=p2p_bytes,
        gather_bytes=gather_bytes,
        reduce_bytes=reduce_bytes,
        payload_bytes=payload,
        last_backward_s=slot * BACKWARD_SHARE,
    )


def _stage_layers(layer_params: Sequence[int], pp: int) -> list[float]:
    """One stage's layers: the model's layers in ``pp`` contiguous stages, the stage with the most parameters."""
    bounds = [round(i * len(layer_params) / pp) for i in range(pp + 1)]
    stages = [list(layer_params[a:b]) for a, b in zip(bounds, bounds[1:])]
    return [float(p) for p in max(stages, key=sum)]


def _send_s(nbytes: float, scenario: Scenario, crosses_nodes: bool) -> float:
    """One point-to-point transfer of one GPU: over its share of the node's network and the one-way delay, or over
    its intra-node link."""
    if not crosses_nodes:
        intra = scenario.intra_bits_per_s or scenario.bw_bps
        return nbytes * 8 / intra
    return scenario.delay_s + nbytes * 8 * scenario.gpus_per_node / scenario.bw_bps


# How plan's GPU backends split the model over the cluster (the defaults: plain data parallelism)
PARALLEL_SETTINGS = table(
    (
        Setting(
            "--tp",
            "tp",
            "count",
            "GPU backends: tensor-parallel GPUs per layer, inside a node.",
            default=1,
            range=(1, MAX_PLANNED_WORKERS),
        ),
        Setting(
            "--pp",
            "pp",
            "count",
            "GPU backends: pipeline stages across nodes (1F1B).",
            default=1,
            range=(1, MAX_PLANNED_WORKERS),
        ),
        Setting(
            "--microbatches",
            "microbatches",
            "count",
            "GPU backends: micro-batches per step through the pipeline [default: one per stage].",
            range=(1, MAX_PLANNED_WORKERS),
        ),
        Setting(
            "--virtual-stages",
            "virtual_stages",
            "count",
            "GPU backends: model chunks per GPU in an interleaved 1F1B pipeline (its bubble shrinks by as much).",
            default=1,
            range=(1, MAX_PLANNED_WORKERS),
        ),
        Setting(
            "--shard",
            "shard",
            "choice",
            "GPU backends: shard the data-parallel state: none, zero1 (optimizer), zero2 (+ gradients), zero3 or "
            "fsdp (+ weights, gathered per layer), hsdp (zero3 within --shard-nodes, the replicator between).",
            default="none",
        ),
        Setting(
            "--shard-nodes",
            "shard_nodes",
            "count",
            "--shard hsdp: nodes per shard group (a node, or a site's nodes) [default: 1].",
            range=(1, MAX_PLANNED_WORKERS),
        ),
    )
)
