"""The training step: the one function ``plan`` and a run's prediction both call.

:class:`~netbench.model.network.GraphModel` prices compute, codec and communication on a network; this module applies
the overlap rules to what it priced, in one order and nowhere else: the host's own effects (:class:`HostEffects`:
encode and decode on shared or measured cores, the shaper's refilled token bucket), then the bucket pipeline
(:func:`~netbench.model.overlap.pipelined`), then buckets started during backward
(:func:`~netbench.model.overlap.backward_overlapped`). A plan passes no host effects and no workload (its steps are a
cluster's own); a run's prediction passes the emulated host's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from netbench.declarations.quant_wire import ring_hop_share
from netbench.model.calibration import Calibration
from netbench.model.exchange import average_bytes_per_step, communicating_share
from netbench.model.network import GraphEstimate, GraphModel, Layout, direction_name
from netbench.model.overlap import backward_overlapped, pipelined
from netbench.model.schemes import Scheme
from netbench.model.steptime import Scenario, StepEstimate
from netbench.shapes import ParamShape
from netbench.topology.graph import Hop

__all__ = ["HostEffects", "bounding_direction", "training_step"]


@dataclass(frozen=True)
class HostEffects:
    """What the host running the step adds to the network model (an emulated cluster's, never a plan's).

    ``codec_s``: (encode, decode) per step in place of the calibration's (the host's cores shared by its nodes, or
    what a run measured); ``measured`` says they already hold the slowest node's speed, else they are scaled by it.
    ``burst_credit_s``: seconds of transfer the shaper's refilled token bucket lets through at once, given the bytes
    one communicating step sends and, on a network graph, the (rate, bytes a communicating step sends through it) of
    the link direction that bounds the transfer (:func:`bounding_direction`). ``hop_codec_s``: encode + decode per
    step, averaged over the steps, that a quantized ring's hops are priced at (the calibration's on the host's cores,
    or a run's measured mean: ``codec_s`` is then the run's own statistic, a median where the payload is the same
    every step).
    """

    codec_s: tuple[float, float]
    measured: bool = False
    burst_credit_s: Callable[[float, tuple[float, float] | None], float] | None = None
    hop_codec_s: float | None = None


def training_step(
    graph: GraphModel,
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    scenario: Scenario,
    calibration: Calibration,
    *,
    layout: Layout = "flat",
    trunk_scale: float = 1.0,
    params: int | None = None,
    host: HostEffects | None = None,
    workload_kind: str | None = None,
    per_link: bool = True,
    steps: Sequence[int] | None = None,
) -> GraphEstimate:
    """One step of ``scheme`` on ``graph`` with every overlap rule applied.

    ``per_link`` False asks for the step alone (a uniform star's closed form, at any size): the estimate then holds
    no bytes per link and no bottleneck. ``workload_kind``: the workload whose backward starts the buckets (None: no
    backward overlap). ``steps``: the 1-based steps a run measured, whose syncs a scheme that pairs its ranks each
    sync is priced at (None: the pairing's expectation; :meth:`GraphModel.estimate`).
    """
    if per_link:
        found = graph.estimate(scheme, shapes, scenario, calibration, layout, trunk_scale, params, steps)
    else:
        found = GraphEstimate(graph.step(scheme, shapes, scenario, calibration, params), layout, {}, None)
    est, enc, dec = found.step, None, None
    if host is not None:
        est, enc, dec = _on_host(est, graph, host, bounding_direction(found, graph))
    est = _hop_codec(est, _ring_codec_s(est, graph, host))
    est = pipelined(est, scheme.config, shapes, enc, dec)  # bucket pipeline: encode, wire and decode overlap
    if workload_kind is not None:
        est = backward_overlapped(est, scheme.config, workload_kind, shapes)  # buckets started during backward
    return replace(found, step=est)


def _ring_codec_s(est: StepEstimate, graph: GraphModel, host: HostEffects | None) -> float:
    """Encode + decode per step on the slowest node: the host's where it gives them, else the estimate's own (the
    calibration's)."""
    if host is not None and host.hop_codec_s is not None:
        return host.hop_codec_s * (1.0 if host.measured else graph.slowest_scale)
    return est.compression_time_s


def _hop_codec(est: StepEstimate, codec_s: float) -> StepEstimate:
    """``est`` with the codec work a quantized ring does at its hops, on the ring's path: each node decodes, adds and
    encodes :func:`~netbench.declarations.quant_wire.ring_hop_share` of the buffer there, priced at ``codec_s``, the
    step's calibrated encode + decode of the whole buffer, for the share of the bytes such rings carry that the rank
    waits for at once (an overlapped one's hops run behind the local steps it overlaps)."""
    total = average_bytes_per_step(est.exchanges)
    ringed = sum(ex.bytes_per_step / ex.period for ex in est.exchanges if ex.hop_codec and not ex.overlap_steps)
    if not ringed or not total:
        return est
    extra = ring_hop_share(est.scenario.machines) * codec_s * ringed / total
    return replace(est, comm_time_s=est.comm_time_s + extra, step_time_s=est.step_time_s + extra)


def bounding_direction(found: GraphEstimate, graph: GraphModel) -> tuple[float, float] | None:
    """(rate, bytes per step) of the link direction whose bytes take longest at its rate: the shaper that bounds the
    step's transfer (None where the estimate holds no bytes per link)."""
    if not found.link_bytes:
        return None
    rates = {
        direction_name(graph.topology, h): graph.topology.direction(h).rate_bps
        for h in (Hop(link.name, forward) for link in graph.topology.links for forward in (True, False))
    }
    loaded = [(b / rates[name], rates[name], b) for name, b in found.link_bytes.items() if b > 0 and name in rates]
    if not loaded:
        return None
    _, rate, nbytes = max(loaded)
    return rate, nbytes


def _on_host(
    est: StepEstimate, graph: GraphModel, host: HostEffects, through: tuple[float, float] | None = None
) -> tuple[StepEstimate, float, float]:
    """``est`` with the host's codec times and the shaper's burst credit, and the (encode, decode) it used.
    ``through``: the bounding link direction's (rate, bytes per step), whose shaper's bucket counts where it is slower
    than the node's access link."""
    scale = 1.0 if host.measured else graph.slowest_scale
    enc, dec = host.codec_s[0] * scale, host.codec_s[1] * scale
    est = replace(est, compression_time_s=enc + dec, step_time_s=est.step_time_s - est.compression_time_s + enc + dec)
    if host.burst_credit_s is not None:
        # tbf's refilled bucket shortens the wire time itself; the pipeline then overlaps what is left (subtracting
        # the credit after pipelining took it off the exposed step even where the codec, not the wire, bounds it)
        # once per communicating step (a periodic exchange's burst gets it once per sync, so 1/H of it per step on
        # average), and never more than the communication the step still shows (an exchange hidden behind local work)
        share = communicating_share(est.exchanges) or 1.0
        bound = None if through is None else (through[0], through[1] / share)
        burst = host.burst_credit_s(est.tx.total / share, bound)
        credit = min(share * burst, est.wire.transfer_s, est.comm_time_s)
        est = replace(est, comm_time_s=max(0.0, est.comm_time_s - credit), step_time_s=est.step_time_s - credit)
    return est, enc, dec
