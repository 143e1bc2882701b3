"""Collective backends: one interface the planner takes, whatever carries the collectives.

* :class:`GlooBackend` -- gloo over TCP on CPU tensors, with this host's calibrated software overhead and codec
  costs (:mod:`~netbench.model.steptime`, :mod:`~netbench.model.gloo_tcp`, the bucket pipeline): what an emulated
  run measures.
* :class:`NcclBackend` -- NCCL on GPUs (:mod:`~netbench.model.nccl`, or for the collectives it has a fit of the
  user's own nccl-tests logs, :mod:`~netbench.model.nccl_tests`): every accelerator is a rank of one communicator,
  reductions run on the device, the codec runs at the accelerator's speed (a measured profile where one exists,
  else its declared memory traffic over the accelerator's memory bandwidth, labelled an estimate).
* :class:`IdealBackend` -- the link alone: a collective takes its bus bytes over the bandwidth and nothing else
  (what published utilisation simulators assume, e.g. Streaming DiLoCo's).

The GPU backends build each replicator's step as a layer schedule (:mod:`~netbench.model.schedule`): dense
all-reduces of the model (DDP's gradient buckets, a periodic outer sync) and replicators declaring backward hooks
send layer by layer as backward produces them; the others send after backward and their encode. A later
replicator with its own schedule (fragments on their own steps, results needed several steps later) gives
:meth:`ScheduledBackend.skeleton` its transfers and the engine is unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Protocol

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import spec
from netbench.declarations.shards import shard_shapes
from netbench.dtypes import DTYPE_BYTES
from netbench.model import nccl
from netbench.model.accelerators import Accelerator
from netbench.model.calibration import Calibration, cost_key
from netbench.model.collectives import CollectiveCost
from netbench.model.compute import ModelShape
from netbench.model.exchange import Exchange, average_bytes_per_step
from netbench.model.framing import LinkBytes
from netbench.model.nccl import NCCL_RELEASE, NcclCluster, NetProfile, bus_factor, nccl_time, net_bus_Bps, net_limit
from netbench.model.nccl_fit import TunedFit
from netbench.model.nccl_tests import NcclFit
from netbench.model.network import GraphModel
from netbench.model.overlap import BACKWARD_SHARE
from netbench.model.parallelism import Layout, LayoutStep, group_scenario, layout_step, site_scenario
from netbench.model.schedule import (
    AFTER_BACKWARD,
    CompiledSchedule,
    ScheduleResult,
    StepSchedule,
    Transfer,
    compile_schedule,
    layer_split,
)
from netbench.model.schemes import Scheme, ShapeKey, shape_key
from netbench.model.step import training_step
from netbench.model.steptime import Scenario, StepEstimate
from netbench.settings import Setting, table
from netbench.shapes import ParamShape

__all__ = [
    "Backend",
    "GlooBackend",
    "ScheduledBackend",
    "NcclBackend",
    "IdealBackend",
    "as_gather",
    "CodecCost",
    "estimated_codec_s",
    "measured_codec_profile",
]


class Backend(Protocol):
    """What the planner asks of a backend: one step of a scheme in a scenario, and a description for reports."""

    name: str

    def step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate: ...

    def step_time(self, scheme: Scheme, scenario: Scenario) -> float: ...

    def describe(self) -> dict: ...

    def floor_reason(self, scenario: Scenario) -> str: ...


@dataclass
class GlooBackend:
    """gloo over TCP with this host's calibration: the step a run's prediction takes (:func:`training_step`)."""

    shapes: ShapeKey
    calibration: Calibration
    params: int
    name: str = "gloo"

    def step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate:
        star = GraphModel.uniform(scenario.machines, scenario.up_bps, scenario.down_bps, scenario.delay_s)
        return training_step(
            star, scheme, self.shapes, scenario, self.calibration, params=self.params, per_link=False
        ).step

    def step_time(self, scheme: Scheme, scenario: Scenario) -> float:
        """The step's time alone (what the planner's searches compare)."""
        return self.step(scheme, scenario).step_time_s

    def describe(self) -> dict:
        return {"name": self.name, "calibration": self.calibration.identity()}

    def floor_reason(self, scenario: Scenario) -> str:
        return "gloo's per-message latency"


@lru_cache(maxsize=8)
def measured_codec_profile(accelerator_name: str) -> Calibration | None:
    """The codec profile measured on ``accelerator_name`` with ``scripts/bench_codec_gpu.py`` and shipped with
    netbench (``data/codec-NAME.json``), or None."""
    ref = resources.files("netbench.model").joinpath(f"data/codec-{accelerator_name}.json")
    if not ref.is_file():
        return None
    return Calibration.model_validate(json.loads(ref.read_text(encoding="utf-8")))


REFERENCE_PROFILE = "h100-sxm"  # the measured profile whose per-tensor costs an estimate borrows


@dataclass(frozen=True)
class CodecCost:
    """A replicator's encode + decode on the accelerator: measured where a profile has it, else estimated.

    The estimate: the replicator's declared memory traffic per parameter over the accelerator's memory
    bandwidth, plus the reference profile's cost per tensor (kernel launches, which memory bandwidth does not
    speed up). Checked on an accelerator whose profile the estimate did not use: see docs/concepts/model.md.
    """

    accelerator: Accelerator | None
    profile: Calibration | None = None

    def source(self, scheme: Scheme) -> str:
        """Where this scheme's codec time comes from: ``measured``, ``estimate`` or ``none``."""
        if not scheme.runs_codec or not spec(scheme.name).encodes:
            return "none"
        if self.profile is not None and self.profile.measured(cost_key(scheme.config)):
            return "measured"
        if self.profile is not None and self.profile.measured(scheme.name):
            return "measured (default settings)"
        return "estimate" if self.accelerator is not None else "none"

    def seconds(self, scheme: Scheme, params: int, tensors: int) -> tuple[float, float]:
        """(encode, decode) per step. A profile measured at the replicator's default settings only is taken at
        this scheme's period: its steps share a synchronisation's codec (DiLoCo measured at H = 10, planned at
        H = 100, encodes a tenth as often)."""
        source = self.source(scheme)
        if source.startswith("measured") and self.profile is not None:
            enc, dec = self.profile.encode_decode_s(cost_key(scheme.config), params, tensors)
            if source == "measured (default settings)":
                declared = spec(scheme.name)
                share = declared.period(ReplicatorConfig(name=scheme.name)) / declared.period(scheme.config)
                enc, dec = enc * share, dec * share
            return enc, dec
        if source == "estimate" and self.accelerator is not None:
            return estimated_codec_s(scheme, self.accelerator, params, tensors)
        return 0.0, 0.0


def estimated_codec_s(scheme: Scheme, accelerator: Accelerator, params: int, tensors: int) -> tuple[float, float]:
    """(encode, decode) per step from the declared traffic of a synchronisation over ``accelerator``'s memory
    bandwidth, shared by the steps of its period, plus the reference profile's per-tensor costs (encode and decode
    halves of the traffic term)."""
    declared = spec(scheme.name)
    traffic = declared.codec_bytes_per_param * params / accelerator.hbm_Bps / declared.period(scheme.config)
    reference = measured_codec_profile(REFERENCE_PROFILE)
    key = (
        scheme.name if reference is None or not reference.measured(cost_key(scheme.config)) else cost_key(scheme.config)
    )
    enc_t = reference.encode_s_per_tensor.get(key, 0.0) * tensors if reference else 0.0
    dec_t = reference.decode_s_per_tensor.get(key, 0.0) * tensors if reference else 0.0
    return traffic / 2 + enc_t, traffic / 2 + dec_t


@dataclass(frozen=True)
class StepSkeleton:
    """A scheme's step on one node count and compute time, its collectives' prices left open (they are what a
    bandwidth changes). ``calls``: each distinct (collective, bytes of one call); ``prices``: per transfer of the
    schedule, (its call, how many of it), call -1 where nothing moves; ``wire``: per exchange, (its call, how many,
    its period, the bytes a step carries); ``compiled``: the layer schedule, run at each bandwidth's seconds."""

    exchanges: tuple[Exchange, ...]
    calls: tuple[tuple[str, float], ...]
    prices: tuple[tuple[int, int], ...]
    wire: tuple[tuple[int, int, int, LinkBytes], ...]
    compiled: CompiledSchedule


@dataclass
class ScheduledBackend:
    """A GPU backend: each scheme's step as a layer schedule, its collectives priced by :meth:`collective`."""

    shapes: ShapeKey
    model: ModelShape
    codec: CodecCost
    name: str = "scheduled"
    # how the GPUs split the model (default: every GPU a replica) and the global batch in tokens (the activations
    # tensor and pipeline parallelism move)
    layout: Layout = field(default_factory=Layout)
    tokens_per_step: float | None = None
    wan: tuple[float, float] | None = None  # (bits/s, one-way s) of each WAN link between sites (--topology sites)
    _memo: dict = field(default_factory=dict, repr=False)
    # scenario -> {(collective, bytes of one call): (time, latency)}: a call priced once per scenario, whichever
    # scheme or layer asks for it
    _prices: dict = field(default_factory=dict, repr=False)
    _parts: dict = field(default_factory=dict, repr=False)
    _slices: dict = field(default_factory=dict, repr=False)
    _codec_s: dict = field(default_factory=dict, repr=False)
    _skeletons: dict = field(default_factory=dict, repr=False)

    def collective(self, kind: str, nbytes: float, scenario: Scenario) -> tuple[float, float]:
        """(time, latency) of one call: ``nbytes`` is the all-reduce's buffer or one rank's all-gather share."""
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name}

    def floor_reason(self, scenario: Scenario) -> str:
        """What keeps communication from vanishing as the network's bandwidth grows without bound."""
        return "the collectives' per-call latency"

    def per_layer(self, scheme: Scheme, ex: Exchange) -> bool:
        """Whether ``ex`` leaves layer by layer during backward: a dense all-reduce of model-sized state (DDP's
        buckets, a periodic outer sync), a fragment of the model's layers, or a replicator that declares backward
        hooks."""
        dense = ex.collective == "all_reduce" and ex.bytes_per_step % max(1, self.model.params) == 0
        return dense or bool(ex.layers) or spec(scheme.name).backward_hooks

    def layer_bytes(self, ex: Exchange) -> list[tuple[int, float]]:
        """(layer, bytes) of ``ex`` per layer it carries, in proportion to the layers' parameters: every layer, or a
        fragment's (its declared layers mapped onto this schedule's, which differ only where ``--layers`` splits
        the model otherwise)."""
        counts = self.model.layer_params
        if ex.layers:
            carried = sorted({layer * len(counts) // ex.layer_count for layer in ex.layers})
        else:
            carried = list(range(len(counts)))
        return list(zip(carried, layer_split(ex.bytes_per_step, [counts[i] for i in carried])))

    def skeleton(self, scheme: Scheme, workers: int, compute_s: float) -> StepSkeleton:
        """The scheme's period as a layer schedule on ``workers`` with ``compute_s`` a step, its collectives' prices
        left open: what a step is apart from the network's rates, built once for every bandwidth a search asks."""
        key = (scheme, workers, compute_s)
        found = self._skeletons.get(key)
        if found is not None:
            return found
        exchanges = scheme.exchanges(self.shapes, workers) if workers >= 2 else ()
        layers = self.model.layers
        forward = [compute_s * (1 - BACKWARD_SHARE) / layers] * layers
        backward = [compute_s * BACKWARD_SHARE / layers] * layers
        period = math.lcm(*(ex.period for ex in exchanges)) if exchanges else 1
        calls: dict[tuple[str, float], int] = {}  # each (collective, bytes of one call) priced once a bandwidth

        def priced(ex: Exchange, nbytes: float, count: int) -> tuple[int, int]:
            """(call, how many of it) of ``count`` calls sharing ``nbytes`` of ``ex``; call -1: nothing moves."""
            if ex.collective == "none" or count <= 0 or nbytes <= 0:
                return -1, 0
            kind, nbytes = as_gather(ex.collective, nbytes, workers)
            return calls.setdefault((kind, nbytes / count), len(calls)), count

        transfers: list[Transfer] = []
        prices: list[tuple[int, int]] = []
        for ex in exchanges:
            delay = 1 + ex.overlap_steps  # a fragment's sync is awaited overlap_steps steps after it starts
            first = (ex.offset - 1) % ex.period  # the 0-based step of the period it communicates on
            for step in range(first, period, ex.period):
                if self.per_layer(scheme, ex):
                    for layer, nbytes in self.layer_bytes(ex):
                        prices.append(priced(ex, nbytes, max(1, round(ex.calls * nbytes / ex.bytes_per_step))))
                        transfers.append(Transfer(step, layer, 0.0, layer, delay=delay, label=ex.label))
                else:
                    prices.append(priced(ex, ex.bytes_per_step, ex.calls))
                    transfers.append(Transfer(step, AFTER_BACKWARD, 0.0, 0, delay=delay, label=ex.label))
        enc, dec = self.codec_seconds(scheme)
        schedule = StepSchedule(tuple(forward), tuple(backward), tuple(transfers), period, (enc + dec,) * period)
        wire = []
        for ex in exchanges:
            kind, nbytes = as_gather(ex.collective, ex.bytes_per_step, workers)
            moved = bus_factor("all_reduce" if kind == "all_reduce" else "all_gather", workers) * (
                nbytes * (1 if kind == "all_reduce" else workers)
            )
            if ex.collective == "pairwise":
                moved = ex.bytes_per_step
            wire.append((*priced(ex, ex.bytes_per_step, ex.calls), ex.period, LinkBytes(payload=moved / ex.period)))
        found = self._skeletons[key] = StepSkeleton(
            exchanges, tuple(calls), tuple(prices), tuple(wire), compile_schedule(schedule)
        )
        return found

    def codec_seconds(self, scheme: Scheme) -> tuple[float, float]:
        """(encode, decode) per step of ``scheme``: the same at every bandwidth and node count a search asks."""
        found = self._codec_s.get(scheme)
        if found is None:
            found = self._codec_s[scheme] = self.codec.seconds(scheme, self.model.params, len(self.shapes))
        return found

    def step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate:
        key = (scheme, scenario)
        if key not in self._memo:
            plain = self.layout.plain
            self._memo[key] = self._step(scheme, scenario) if plain else self._layout_step(scheme, scenario)
        return self._memo[key]

    def layout_parts(self, scheme: Scheme, scenario: Scenario) -> dict | None:
        """The parts of a layout's step (None for plain data parallelism): compute, bubble, tensor-parallel,
        pipeline, sharding and the replicator's exposed seconds, the groups, and each kind's bytes per GPU."""
        self.step(scheme, scenario)
        return self._parts.get((scheme, scenario))

    def _priced(self, kind: str, nbytes: float, ranks: int, per_node: int, scenario: Scenario) -> float:
        """One call of a group's collective: ``ranks`` GPUs, ``per_node`` of them in a node."""
        if ranks < 2 or nbytes <= 0:
            return 0.0
        return self._calls(((kind, nbytes),), group_scenario(scenario, ranks, per_node))[0][0]

    def _calls(self, calls: tuple[tuple[str, float], ...], scenario: Scenario) -> list[tuple[float, float]]:
        """(time, latency) of one call of each (collective, bytes) in ``scenario``."""
        known = self._prices.get(scenario)
        if known is None:
            known = self._prices[scenario] = {}
        out = []
        for call in calls:
            found = known.get(call)
            if found is None:
                found = known[call] = self.collective(*call, scenario)
            out.append(found)
        return out

    def _slice_backend(self, slices: int) -> ScheduledBackend:
        """This backend on one GPU's slice of the model (1/``slices`` of every tensor), plain data parallel: what
        the replicator between shard groups sees."""
        if slices not in self._slices:
            one: list[ParamShape] = shard_shapes(self.shapes, slices)
            model = ModelShape(
                sum(s.numel for s in one),
                tuple(max(1, -(-p // slices)) for p in self.model.layer_params),
                self.model.d_model,
            )
            self._slices[slices] = replace(
                self,
                shapes=shape_key(one),
                model=model,
                layout=Layout(),
                wan=None,
                _memo={},
                _prices={},
                _parts={},
                _slices={},
                _skeletons={},
            )
        return self._slices[slices]

    def _layout_step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate:
        """A layout's step: the pipeline, tensor-parallel and sharding parts (:func:`layout_step`), then the
        replicator between the shard groups on each GPU's slice, its sync hidden behind the last backward."""
        lay = self.layout
        groups = lay.groups(scenario.workers, scenario.gpus_per_node)
        element = DTYPE_BYTES[scheme.config.grad_dtype]

        def price(kind: str, nbytes: float, ranks: int, per_node: int) -> float:
            return self._priced(kind, nbytes, ranks, per_node, scenario)

        tokens = self.tokens_per_step or 0.0
        part: LayoutStep = layout_step(
            lay, scenario, self.model.layer_params, self.model.d_model, tokens, element, price
        )
        exposed = 0.0
        outer: StepEstimate | None = None
        if groups.replicas >= 2:
            sub = self._slice_backend(lay.tp * lay.pp * groups.shard)
            slot = scenario.compute_s / (lay.virtual_stages * lay.micro)
            if lay.sites and self.wan:
                between = site_scenario(scenario, groups.replicas, *self.wan).model_copy(update={"compute_s": slot})
            else:
                between = group_scenario(scenario, groups.replicas, groups.replica_per_node, compute_s=slot)
            outer = sub.step(scheme, between)
            exposed = max(0.0, outer.step_time_s - slot)
        inner_bytes = part.tp_bytes + part.p2p_bytes + part.gather_bytes + part.reduce_bytes
        inner = LinkBytes(payload=inner_bytes)
        wire = CollectiveCost(time_s=part.comm_s, transfer_s=part.comm_s, tx=inner, rx=inner)
        if outer is not None:
            wire = wire + outer.wire
        self._parts[(scheme, scenario)] = part.as_dict() | {
            "replicator_exposed_s": exposed,
            "bubble_fraction": part.bubble_s / part.pipeline_s if part.pipeline_s > 0 else 0.0,
            "data_parallel": groups.dp,
            "shard_group": groups.shard,
            "replicas": groups.replicas,
            "microbatches": lay.micro,
        }
        return StepEstimate(
            scheme=scheme.name,
            scenario=scenario,
            params=self.model.params,
            exchanges=outer.exchanges if outer else (),
            payload_bytes_per_step=part.payload_bytes + (outer.payload_bytes_per_step if outer else 0.0),
            wire=wire,
            comm_time_s=wire.time_s,
            intra_time_s=0.0,
            compression_time_s=outer.compression_time_s if outer else 0.0,
            compute_time_s=scenario.compute_s,
            step_time_s=part.step_s + exposed,
            overlap=True,
        )

    def step_time(self, scheme: Scheme, scenario: Scenario) -> float:
        """``step(scheme, scenario).step_time_s`` without the rest of the estimate: what the planner's searches
        compare, at every bandwidth they probe."""
        found = self._memo.get((scheme, scenario))
        if found is not None or not self.layout.plain:
            return (found or self.step(scheme, scenario)).step_time_s
        return self._run(self.skeleton(scheme, scenario.workers, scenario.compute_s), scenario)[0].step_s

    def _run(self, skeleton: StepSkeleton, scenario: Scenario) -> tuple[ScheduleResult, list[tuple[float, float]]]:
        """The skeleton's schedule at ``scenario``'s prices, and (time, latency) of each of its calls."""
        one = self._calls(skeleton.calls, scenario)
        seconds = [count * one[call][0] if call >= 0 else 0.0 for call, count in skeleton.prices]
        return skeleton.compiled.run(seconds), one

    def _step(self, scheme: Scheme, scenario: Scenario) -> StepEstimate:
        skeleton = self.skeleton(scheme, scenario.workers, scenario.compute_s)
        result, one = self._run(skeleton, scenario)
        wire = CollectiveCost()
        for call, count, period, per_step in skeleton.wire:
            t, lat = (count * one[call][0], count * one[call][1]) if call >= 0 else (0.0, 0.0)
            wire = wire + CollectiveCost(
                time_s=t / period, latency_s=lat / period, transfer_s=(t - lat) / period, tx=per_step, rx=per_step
            )
        enc, dec = self.codec_seconds(scheme)
        return StepEstimate(
            scheme=scheme.name,
            scenario=scenario,
            params=self.model.params,
            exchanges=skeleton.exchanges,
            payload_bytes_per_step=average_bytes_per_step(skeleton.exchanges),
            wire=wire,
            comm_time_s=wire.time_s,
            intra_time_s=0.0,
            compression_time_s=enc + dec,
            compute_time_s=scenario.compute_s,
            step_time_s=result.step_s,
            overlap=True,
        )


@dataclass
class NcclBackend(ScheduledBackend):
    """NCCL on GPUs: NCCL 2.27.5's tuning model over the network (or the user's fitted nccl-tests logs)."""

    accelerator: Accelerator | None = None
    net: NetProfile = field(default_factory=NetProfile)
    fitted: NcclFit | None = None
    # the bandwidth at which the fit applies as measured (None: none); at any other the fitted bus bandwidth is
    # no faster than the scenario's network allows (a slower NIC than the log's, or a bandwidth sweep)
    fit_as_measured_bps: float | None = None
    name: str = "nccl"
    _cluster: tuple = field(default=(None, None), repr=False)  # (scenario, its cluster): the last one built

    def cluster(self, scenario: Scenario) -> NcclCluster:
        """The communicator ``scenario`` runs; the last one asked for is kept (a step prices its calls on one)."""
        last, found = self._cluster
        if scenario is last:
            return found
        self._cluster = (scenario, self._build_cluster(scenario))
        return self._cluster[1]

    def _build_cluster(self, scenario: Scenario) -> NcclCluster:
        acc = self.accelerator
        intra = scenario.intra_bits_per_s / 8 if scenario.intra_bits_per_s else (acc.intra_Bps if acc else 100e9)
        link = "nvlink" if acc is None or acc.intra_link != "pcie" else "pci"
        net = self.net.model_copy(
            update={"nic_bps": scenario.bw_bps, "one_way_s": scenario.delay_s, "tcp": scenario.tcp}
        )
        return NcclCluster(
            ranks=scenario.workers,
            nodes=scenario.machines,
            intra_bytes_per_s=intra,
            intra_link=link,
            generation=acc.nccl_generation if acc else 2,
            net=net,
            nvls=acc is not None and acc.nvswitch,
        )

    def tuned_fit(self, kind: str) -> TunedFit | None:
        """The fit at NCCL's picks that prices ``kind``: its own, else another collective's (the efficiencies are the
        links', the latency scales the algorithms'), or None where the logs were fitted without the cluster."""
        if self.fitted is None or not self.fitted.tuned:
            return None
        return self.fitted.tuned.get(kind) or next(iter(self.fitted.tuned.values()))

    def limit(self, scenario: Scenario) -> tuple[float, str]:
        """The communicator's bus bandwidth (bytes/s) and what sets it: the intra-node link or a network term."""
        c = self.cluster(scenario)
        intra = (c.intra_bytes_per_s, "the intra-node link")
        if c.nodes == 1:
            return intra
        _, ring_bus, bound = nccl.ring_graph(c)
        if bound == "nvlink":  # NCCL's ring over the NICs is held to NVLink as its topology counts it
            intra = min(intra, (ring_bus, "the intra-node link"), key=lambda item: item[0])
        return min(net_limit(c.net), intra, key=lambda item: item[0])

    def waits_on(self, scenario: Scenario, parts: dict | None = None) -> str:
        """The link a step's collectives wait on: ``inter-node network`` or ``intra-node link``, as :meth:`limit`
        names it. Under a layout of sites with a WAN (``parts``: the step's :meth:`layout_parts`), a replicator exposed
        longer than the layout's own collectives waits on the WAN between sites, whatever caps those inside a site;
        a scheme's parts decide that, which the communicator's bus bandwidth alone cannot."""
        if parts is not None and self.layout.sites and self.wan:
            inside = parts["tensor_parallel_s"] + parts["pipeline_transfer_s"] + parts["shard_exposed_s"]
            if parts["replicator_exposed_s"] >= inside:
                return "inter-node network"
        return "intra-node link" if self.limit(scenario)[1] == "the intra-node link" else "inter-node network"

    def floor_reason(self, scenario: Scenario) -> str:
        if self.layout.sites and self.wan:
            return f"the WAN between sites stays at {self.wan[0] / 1e9:.3g} Gbit/s (--wan-bw)"
        bus, why = self.limit(scenario)
        if math.isinf(bus) or bus >= scenario.bw_bps / 8:
            return "NCCL's per-call latency"
        return f"the bus bandwidth stays at {bus / 1e9:.3g} GB/s ({why})"

    def collective(self, kind: str, nbytes: float, scenario: Scenario) -> tuple[float, float]:
        if kind == "pairwise":  # a send and a receive with one partner: one delay, the bytes at the bus's rate
            return nbytes / self.limit(scenario)[0] + scenario.delay_s, scenario.delay_s
        ranks = scenario.workers
        nccl_kind = "all_reduce" if kind == "all_reduce" else "all_gather"
        size = nbytes if nccl_kind == "all_reduce" else nbytes * ranks  # nccl-tests sizes all-gather by its output
        cluster = self.cluster(scenario)
        tuned = self.tuned_fit(nccl_kind)
        if tuned is not None:  # NCCL's pick on this cluster, at the efficiencies and latencies fitted to the logs
            choice = nccl_time(nccl_kind, size, tuned.apply(cluster))
            return choice.time_s, choice.latency_s
        if self.fitted is not None:
            ceiling = None
            if scenario.bw_bps != self.fit_as_measured_bps:
                ceiling = net_bus_Bps(cluster.net) if cluster.nodes > 1 else cluster.intra_bytes_per_s
            fitted = self.fitted.time_s(nccl_kind, size, ranks, ceiling)
            if fitted is not None:
                return fitted, 0.0
        choice = nccl_time(nccl_kind, size, cluster)
        return choice.time_s, choice.latency_s

    def describe(self) -> dict:

        return {
            "name": self.name,
            "nccl_release": NCCL_RELEASE,
            "accelerator": self.accelerator.name if self.accelerator else None,
            "net": self.net.model_dump(exclude={"tcp"}),
            "fitted": self.fitted is not None,
            "fitted_at_nccls_picks": sorted(self.fitted.tuned) if self.fitted else [],
            "fit_regimes": {k: c.regimes for k, c in self.fitted.collectives.items() if c.regimes}
            if self.fitted
            else {},
        }


def as_gather(kind: str, nbytes: float, ranks: int) -> tuple[str, float]:
    """(collective, bytes) as the planner's backends price an exchange: an all_to_all of a buffer moves what an
    all-gather of 1/N of it does ((N - 1) / N of the buffer in and out of every rank); the others as they are."""
    return ("all_gather", nbytes / ranks) if kind == "all_to_all" else (kind, nbytes)


@dataclass
class IdealBackend(ScheduledBackend):
    """The link alone: bus bytes over the bandwidth, no latency, no protocol (published simulators' assumption)."""

    name: str = "ideal"

    def collective(self, kind: str, nbytes: float, scenario: Scenario) -> tuple[float, float]:
        # across nodes the network carries it; a group inside one node, its GPUs' intra-node links
        inside = scenario.machines == 1 and scenario.intra_bits_per_s is not None
        ranks = scenario.workers if inside else scenario.machines
        rate = scenario.intra_bits_per_s if inside else scenario.bw_bps
        if kind == "pairwise":  # what a node sends its partner, while the partner's comes the other way
            return nbytes * 8 / rate, 0.0
        # an all-gather's result is every worker's share: a node's link carries the other nodes' workers' shares
        size = nbytes if kind == "all_reduce" else nbytes * scenario.workers
        factor = bus_factor("all_reduce" if kind == "all_reduce" else "all_gather", ranks)
        return factor * size * 8 / rate, 0.0


# What carries plan's collectives, and NCCL's knobs when it is NCCL
BACKEND_SETTINGS = table(
    (
        Setting(
            "--backend",
            "backend",
            "choice",
            "what carries the collectives: gloo (this host's calibrated gloo over TCP, as a run measures), nccl "
            "(NCCL's cost model on GPUs), ideal (the link alone: bus bytes over the bandwidth).",
            default="gloo",
        ),
        Setting("--transport", "transport", "choice", "--backend nccl: socket (NCCL's TCP) or rdma.", default="socket"),
        Setting(
            "--channels",
            "channels",
            "count",
            "--backend nccl: channels across the network [default: socket 2, rdma 16].",
            range=(1, 64),  # NCCL's MAXCHANNELS
        ),
        Setting(
            "--socket-threads",
            "socket_threads",
            "count",
            "--backend nccl: NCCL_SOCKET_NTHREADS.",
            default=0,
            range=(0, 16),
        ),
        Setting(
            "--socks-per-thread",
            "socks_per_thread",
            "count",
            "--backend nccl: NCCL_NSOCKS_PERTHREAD.",
            default=1,
            range=(1, 64),  # NCCL caps threads x sockets at 64
        ),
        Setting(
            "--nccl-calibration",
            "nccl_calibration",
            "path",
            "--backend nccl: collective costs fitted to your nccl-tests logs (netbench calibrate --from-nccl-tests).",
        ),
        Setting(
            "--nics",
            "nics",
            "count",
            "--backend nccl: NICs per node, each at --bw (a rail-optimised node: one per GPU, e.g. 8 x 400gbit) "
            "[default: 1, or the cluster a --nccl-calibration was fitted for].",
            range=(1, 64),
        ),
        Setting(
            "--nic-vendor",
            "nic_vendor",
            "choice",
            "--backend nccl, --transport socket: whose NICs, for NCCL's own socket threads x sockets per thread "
            "where --socket-threads and --socks-per-thread are left at 0 and 1: other (none: the proxy thread's one "
            "socket), aws (ENA: 2 x 8), gcp (gVNIC: 4 x 1).",
            default="other",
        ),
    )
)
