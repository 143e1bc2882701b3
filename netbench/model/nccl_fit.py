"""An nccl-tests log fitted through NCCL's own tuner, so that the fit carries to other node counts.

A log's bus bandwidth belongs to the algorithm NCCL picked at that log's nodes: on two nodes of an NVSwitch system
NVLSTree, whose bus bandwidth is bound by NVLink and can exceed the NICs' line rate; from three nodes on a ring
bound by the NICs or by NVLink. A fit of the log's bus bandwidth therefore carries the wrong algorithm to other node
counts. Here each size of the log is attributed to the algorithm and protocol NCCL's model
(:func:`~netbench.model.nccl.nccl_pick`) picks for the cluster as described (its accelerator, NICs per node and rate
per NIC, transport) at the log's nodes and GPUs, and what is fitted is the cluster's own terms:

* the efficiency of each link that bounds a size's transfer (``nic``: what the NICs deliver of NCCL's per-NIC
  speed; ``nvlink``: what NVLink delivers to rings and trees of the model's NVLink-bound bandwidth; ``nvls``: what
  NVLink SHARP delivers to NVLS and NVLSTree);
* a latency scale per algorithm the sizes were attributed to (each algorithm's per-hop latencies times one
  factor);

by least squares on relative error. A term no size of the log exercised stays at NCCL's model (1) and the fit says
so: a two-node log of an NVSwitch system (NVLSTree, NVLink-bound) says nothing of its NICs, a ring run
(``NCCL_ALGO=Ring``) or a run on three or more nodes does. At another node count, NCCL's model picks again and the
fitted terms price the pick (:meth:`TunedFit.time_s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from netbench.model.accelerators import accelerator
from netbench.model.nccl import NcclCluster, NetProfile, Term, nccl_pick
from netbench.settings import Setting, table


class LogRow(Protocol):
    size: int
    oop_s: float
    ip_s: float
    busbw_GBps: float


class NcclTestsLog(Protocol):
    """What a fit reads of an nccl-tests log (:class:`netbench.model.nccl_tests.NcclTestsLog`, which stores these
    fits beside its own and so is not imported here)."""

    source: str
    collective: str
    ranks: int
    nodes: int | None
    rows: Sequence[LogRow]


class NcclFitError(ValueError):
    """A log this fit cannot read (one line, naming the file)."""


__all__ = [
    "NcclFitError",
    "ClusterHardware",
    "TunedFit",
    "fit_tuned",
    "model_ceiling_Bps",
    "segment_warnings",
    "CEILING_MARGIN",
    "DEFAULT_MIN_SIZE",
]

# What calibrate --from-nccl-tests asks of the logs' cluster to fit them at NCCL's picks (with --accelerator, --nics
# and --transport, declared where plan takes them)
FIT_SETTINGS = table(
    (
        Setting(
            "--nic-bw",
            "nic_bw",
            "rate",
            "with --from-nccl-tests and --accelerator: each NIC's line rate on the logs' nodes (tc units, e.g. "
            "400gbit); the logs are then also fitted at the algorithms NCCL picks there, which carries to other node "
            "counts.",
        ),
    )
)
BOUNDS = ("nic", "nvlink", "nvls")
CEILING_MARGIN = 1.05  # a log this much above the model's largest bus bandwidth has more hardware than described
# Sizes a fit reads by default: those a training step's collectives have (DDP's gradient buckets are 25 MiB). Below
# them NCCL cuts channels and chunks per size, which its tuner's line (latency + bytes / bandwidth) leaves out.
DEFAULT_MIN_SIZE = 16 << 20
MIN_SIZES = 2  # sizes a term needs (at least MIN_SHARE of their time) to be fitted
MIN_SHARE = 0.1


class ClusterHardware(BaseModel):
    """A GPU cluster as its users describe it: the accelerator, NICs per node, each NIC's rate, the transport."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    accelerator: str = "h100-sxm"
    nics: int = Field(8, ge=1, le=64)
    nic_bps: float = Field(400e9, gt=0)
    transport: str = Field("rdma", pattern="^(rdma|socket)$")

    def cluster(self, ranks: int, nodes: int) -> NcclCluster:
        """The communicator NCCL's model sees on ``nodes`` nodes of ``ranks`` GPUs in all."""
        acc = accelerator(self.accelerator)
        net = NetProfile(transport=self.transport, nic_bps=self.nic_bps, nics=self.nics)  # type: ignore[arg-type]
        return NcclCluster(
            ranks=ranks,
            nodes=nodes,
            intra_bytes_per_s=acc.intra_Bps,
            intra_link="pci" if acc.intra_link == "pcie" else "nvlink",
            generation=acc.nccl_generation,
            net=net,
            nvls=acc.nvswitch,
        )

    def describe(self) -> str:
        return f"{self.nics} x {self.nic_bps / 1e9:g} Gbit/s {self.transport} NICs a node, {self.accelerator}"


class TunedFit(BaseModel):
    """A log's fitted terms at NCCL's picks: efficiencies per bounding link, latency scales per algorithm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "nccl-tuned-fit"
    source: str = ""
    collective: str
    ranks: int = Field(ge=2)
    nodes: int = Field(ge=1)
    hardware: ClusterHardware
    efficiencies: dict[str, float] = Field(default_factory=dict)  # bound -> fitted efficiency (absent: the model's)
    latency_scales: dict[str, float] = Field(default_factory=dict)  # algorithm -> fitted scale
    picks: tuple[tuple[float, str], ...] = ()  # (size, "algorithm/protocol, bound") as attributed
    residuals: tuple[tuple[float, float], ...] = ()  # (size, (fit - measured) / measured)
    warnings: tuple[str, ...] = ()

    @property
    def gpus_per_node(self) -> int:
        return self.ranks // self.nodes

    def cluster(self, nodes: int, gpus_per_node: int | None = None) -> NcclCluster:
        """The fitted cluster on ``nodes`` nodes (of the log's GPUs per node unless given)."""
        g = gpus_per_node or self.gpus_per_node
        return self.apply(self.hardware.cluster(g * nodes, nodes))

    def apply(self, base: NcclCluster) -> NcclCluster:
        """``base`` (any node count, NICs or bandwidth) at this fit's efficiencies and latency scales."""
        return replace(
            base,
            nic_efficiency=self.efficiencies.get("nic", 1.0),
            nvlink_efficiency=self.efficiencies.get("nvlink", 1.0),
            nvls_efficiency=self.efficiencies.get("nvls", 1.0),
            latency_scales=tuple(sorted(self.latency_scales.items())),
        )

    def time_s(self, nbytes: float, nodes: int, gpus_per_node: int | None = None) -> float:
        """One call of ``nbytes`` on ``nodes`` nodes: NCCL's pick there, priced with the fitted terms."""
        c = self.cluster(nodes, gpus_per_node)
        term = nccl_pick(self.collective, nbytes, c)  # type: ignore[arg-type]
        return 0.0 if term is None else term.time_s(c)

    def unfitted(self) -> list[str]:
        """The link efficiencies no size of the log exercised (they stay at NCCL's model)."""
        return [b for b in BOUNDS if b not in self.efficiencies]


def _measured(log: NcclTestsLog) -> list[tuple[float, float]]:
    return [(float(r.size), (r.oop_s + r.ip_s) / 2) for r in log.rows]


def _solve(terms: list[Term], times: list[float]) -> tuple[dict[str, float], dict[str, float]]:
    """Efficiencies and latency scales by least squares on relative error; a column with fewer than
    :data:`MIN_SIZES` sizes where it is the larger share of the time, or a non-positive solution, stays at 1."""
    algos = sorted({t.algorithm for t in terms})
    columns = [("lat", a) for a in algos] + [("bw", b) for b in BOUNDS]

    def value(term: Term, col: tuple[str, str]) -> float:
        if col[0] == "lat":
            return term.latency_s if term.algorithm == col[1] else 0.0
        return term.transfer_s if term.bound == col[1] else 0.0

    def share(term: Term, col: tuple[str, str]) -> float:
        return value(term, col) / (term.latency_s + term.transfer_s)

    import numpy as np  # late: a plan that only reads a fit never loads numpy

    free = [c for c in columns if sum(share(t, c) > MIN_SHARE for t in terms) >= MIN_SIZES]
    while True:
        fixed = [c for c in columns if c not in free]
        a = np.array([[value(t, c) / y for c in free] for t, y in zip(terms, times)])
        rhs = np.array([(y - t.wire_s - sum(value(t, c) for c in fixed)) / y for t, y in zip(terms, times)])
        x = np.linalg.lstsq(a, rhs, rcond=None)[0] if free else np.array([])
        bad = [c for c, v in zip(free, x) if v <= 0]
        if not bad:
            break
        free = [c for c in free if c not in bad]
    lat = {c[1]: float(v) for c, v in zip(free, x) if c[0] == "lat"}
    eff = {c[1]: 1 / float(v) for c, v in zip(free, x) if c[0] == "bw"}
    return eff, lat


def fit_tuned(log: NcclTestsLog, hardware: ClusterHardware, min_size: int = DEFAULT_MIN_SIZE) -> TunedFit:
    """Fit ``log``'s sizes of at least ``min_size`` bytes at the picks NCCL's model makes for ``hardware`` on the
    log's nodes (the log must name its hosts: ``Rank N ... on HOST`` lines); residuals cover every size."""
    if log.nodes is None or log.ranks % log.nodes:
        raise NcclFitError(
            f"{log.source}: names no hosts of its ranks (keep its 'Rank N ... on HOST' lines): the fit needs its "
            "node count"
        )
    base = hardware.cluster(log.ranks, log.nodes)
    every = _measured(log)
    terms = [nccl_pick(log.collective, s, base) for s, _ in every]  # type: ignore[arg-type]
    if any(t is None for t in terms):
        raise NcclFitError(f"{log.source}: a size NCCL's model moves nothing for")
    picked: list[Term] = [t for t in terms if t is not None]
    fitted = [(term, t) for (s, t), term in zip(every, picked) if s >= min_size]
    if len(fitted) < 2:
        raise NcclFitError(f"{log.source}: fewer than two sizes of at least {min_size} bytes to fit")
    eff, lat = _solve([term for term, _ in fitted], [t for _, t in fitted])
    fit = TunedFit(
        source=log.source,
        collective=log.collective,
        ranks=log.ranks,
        nodes=log.nodes,
        hardware=hardware,
        efficiencies=eff,
        latency_scales=lat,
        picks=tuple((s, f"{t.algorithm}/{t.protocol}, {t.bound}") for (s, _), t in zip(every, picked)),
        warnings=tuple(_ceiling_warnings(log, base)),
    )
    residuals = tuple((s, fit.time_s(s, log.nodes) / t - 1) for s, t in every)
    return fit.model_copy(update={"residuals": residuals})


def model_ceiling_Bps(kind: str, c: NcclCluster) -> float:
    """The largest bus bandwidth NCCL's model gives any algorithm it enables on ``c`` (a very large call)."""
    term = nccl_pick(kind, 2.0**40, c)  # type: ignore[arg-type]
    return 0.0 if term is None else term.bus_Bps


def segment_warnings(
    source: str, kind: str, ranks: int, nodes: int, buses: Sequence[float], hardware: ClusterHardware
) -> list[str]:
    """Fitted bus bandwidths (``buses``, bytes/s: a bus-bandwidth fit's segments) above NCCL's ceiling for
    ``hardware``: a latency-bound range whose slope is no link's bandwidth, or more hardware than described."""
    ceiling = model_ceiling_Bps(kind, hardware.cluster(ranks, nodes))
    return [
        f"{source}: a fitted bus bandwidth of {bus / 1e9:.4g} GB/s is above the {ceiling / 1e9:.4g} GB/s NCCL's "
        f"model gives {hardware.describe()} on {nodes} nodes: that size range is latency-bound (its slope is no "
        "link's bandwidth) or the cluster has more than described"
        for bus in buses
        if ceiling > 0 and bus > ceiling * CEILING_MARGIN
    ]


def _ceiling_warnings(log: NcclTestsLog, c: NcclCluster) -> list[str]:
    """A log faster than NCCL's model allows the described hardware: more or faster NICs (or NVLink) than said."""
    ceiling = model_ceiling_Bps(log.collective, c)
    best = max(r.busbw_GBps for r in log.rows) * 1e9
    if ceiling <= 0 or best <= ceiling * CEILING_MARGIN:
        return []
    return [
        f"{log.source}: bus bandwidth {best / 1e9:.4g} GB/s is above the {ceiling / 1e9:.4g} GB/s NCCL's model gives "
        f"{c.nodes} nodes of {c.gpus_per_node} GPUs with {c.net.nics} x {c.net.nic_bps / 1e9:g} Gbit/s NICs: the "
        "cluster has more or faster NICs (or a faster intra-node link) than described"
    ]
