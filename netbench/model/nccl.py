"""What a collective costs on a GPU cluster as NCCL runs it: NCCL's own tuning model plus the network under it.

NCCL picks, for every call, the algorithm and protocol its cost model says is fastest
(``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``); netbench follows the model of
NCCL **2.27.5** (tag ``v2.27.5-1``, the constants below):

    time = latency(collective, algorithm, protocol) + bytes / algorithm bandwidth

* latency: a base per algorithm and protocol, plus per step a hardware latency of the link kind the step crosses
  (NVLink or PCIe inside a node, NET between nodes, the latter at least the proxy's post overhead, three times it
  for Simple). A ring all-reduce takes 2(nRanks - 1) steps, 2(nNodes - 1) of them across the network; all-gather
  and reduce-scatter nRanks - 1 and nNodes - 1. A tree all-reduce takes 2((ranks per node - 1) intra + log2(nNodes)
  inter) steps. Past 64 bytes per channel and rank, a multi-node ring Simple all-reduce's latency is multiplied by
  1.4 (Ampere and later; 1.9 before: NCCL's "plateau").
* bandwidth: the bus bandwidth of the channels, turned into algorithm bandwidth by nRanks / steps for rings and
  by one half for trees; LL runs at half of it (capped per generation and node count), LL128 at 0.92 of it (capped
  per channel), trees at 0.92 (capped per channel) with NCCL's per-size correction factors.

NCCL's bus bandwidth comes from its topology search (``src/graph/search.cc``): across nodes every ring channel takes
one NIC at a speed from a fixed ladder no faster than the NIC, as many channels as NICs, and every channel crosses
every GPU of a node, so their sum stays within the GPU's NVLink as NCCL counts it (``topo.h``: 20.6 GB/s a link on
Hopper, 20 before; an 8 x H100 node with 8 x 400G NICs gets 8 channels of 45 GB/s, not 48). On Hopper and later GPUs
on an NVSwitch, NVLS (one node) and NVLSTree (several, over RDMA) compete too: one channel per GPU with a NIC, an
intra-node speed whose channels plus one fit the GPU's NVLink, an inter-node speed no faster than a NIC (halved
beyond two nodes), five sixths of it as algorithm bandwidth. NCCL picks by this model; what a cluster delivers is
the model's bandwidth times the efficiency of what bounds it (the NICs, NVLink or NVLink SHARP) and its latency
times a scale per algorithm, 1 unless fitted to the cluster's own nccl-tests logs (:mod:`~netbench.model.nccl_fit`).

What NCCL's model takes as given, netbench computes from the network (:class:`NetProfile`): the bus bandwidth
across nodes is the NIC's payload rate, limited by what the transport can keep in flight over the round trip
(NCCL_BUFFSIZE per channel; over sockets every TCP connection's window) and, over sockets, by what one socket
stream moves through a CPU thread; each step across nodes also waits the link's one-way delay, which NCCL's model
leaves out (its network latency is a property of the NIC, 0 for sockets). Inside a node the bus bandwidth is the
accelerator's intra-node link. Reductions run on the device: no per-byte CPU cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from netbench.frames import FRAME_BYTES, MSS
from netbench.tcp import STOCK_LINUX, TcpSettings

__all__ = [
    "NCCL_RELEASE",
    "NetProfile",
    "NcclCluster",
    "NcclChoice",
    "nccl_time",
    "bus_factor",
    "steps_of",
    "socket_streams",
    "net_bus_Bps",
    "net_limits",
    "net_limit",
    "tcp_window_bytes",
    "ring_graph",
    "nvls_graph",
    "NVLINK_SHARE",
    "SOCKET_VENDOR_DEFAULTS",
    "Term",
    "nccl_pick",
]

NCCL_RELEASE = "2.27.5"
CollectiveName = Literal["all_reduce", "all_gather", "reduce_scatter"]
PROTOCOLS = ("LL", "LL128", "Simple")

# Latencies in microseconds, bandwidths in GB/s, as tuning.cc declares them (index: LL, LL128, Simple).
BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
# llMaxBws[index1][index2]: single node by GPU generation, several nodes by CPU vendor (Intel row used);
# index2 = nNodes - 1 up to 2.
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128 = (20.0, 20.0, 36.7, 73.4)
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0))
PER_CH_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (73.4, 73.4, 58.0))
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9),
)
# NVLS and NVLSTree: Simple only, no base latency; hwLat NVLINK 25 us, NET 18 (NVLS) and 14 (NVLSTree) us.
NVLS_LAT_US = 25.0
NVLS_TREE_NET_LAT_US = 14.0
NVLS_RATIO = 5.0 / 6.0  # NVLS and NVLSTree: algorithm bandwidth over the channels' bus bandwidth
# The search's per-channel speeds (GB/s, search.cc): across nodes (Hopper and Blackwell have their own ladders),
# and inside a node for NVLS.
SPEEDS_INTER = (
    48.0,
    30.0,
    28.0,
    24.0,
    20.0,
    18.0,
    15.0,
    12.0,
    10.0,
    9.0,
    7.0,
    6.0,
    5.0,
    4.0,
    3.0,
    2.4,
    1.2,
    0.24,
    0.12,
)
SPEEDS_INTER_SM90 = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SPEEDS_INTRA_SM90 = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SPEEDS_INTER_SM100 = (48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SPEEDS_INTRA_SM100 = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
# NVLink as NCCL's topology counts it over the datasheet's per-direction figure, per generation (topo.h's
# SM70/SM80/SM90/SM100 NVLink bandwidth per link: 20, 20, 20.6, 40.1 GB/s; datasheets: 25, 25, 25, 50 GB/s per
# link and direction). Other links are taken as NCCL counts them.
NVLINK_SHARE = (20.0 / 25.0, 20.0 / 25.0, 20.6 / 25.0, 40.1 / 50.0)
MAX_NVLS_HEADS = 32  # NCCL_MAX_NVLS_ARITY
NET_OVERHEAD_US = 1.0  # getNetOverhead: 1 us on Intel x86 (2 on AMD), tripled for Simple
BUFFSIZE = 4 << 20  # NCCL_BUFFSIZE: bytes a channel's connection keeps in flight (Simple)
# One socket stream's ceiling through NCCL's socket transport (a proxy or helper thread copying through the host):
# github.com/NVIDIA/nccl/issues/450 measured 4.5-5.2 GB/s bus bandwidth (8-16 MB all-reduce, 4 x 8 V100, 100 GbE)
# with NCCL_MIN_NCHANNELS=4 and NCCL_SOCKET_NTHREADS=2 (one socket a thread): 8 streams, 0.56-0.65 GB/s each.
# With NCCL's defaults (2 channels, one socket each) that gives the 0.7-1.4 GB/s published socket runs show on
# 10-100 GbE; `netbench calibrate --from-nccl-tests` replaces it with the user's own.
SOCKET_STREAM_BPS = 0.6e9
# The socket transport's helper threads and sockets per thread when NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD
# are unset, by the NIC's PCI vendor (net_socket.cc, ncclNetSocketGetNsockNthread): AWS ENA (0x1d0f) 2 x 8, GCP
# gVNIC (0x1ae0) 4 x 1, any other none (the proxy thread sends on one socket).
SOCKET_VENDOR_DEFAULTS = {"other": (0, 1), "aws": (2, 8), "gcp": (4, 1)}
WIRE_EFFICIENCY = MSS / FRAME_BYTES  # TCP payload per Ethernet frame at MTU 1500 (RDMA's is about the same)
# What a TCP connection keeps in flight of its buffers (the smaller of tcp_wmem and tcp_rmem max): Linux sizes the
# receive window as the buffer times its segments' payload over their memory (len / truesize). Measured through
# netbench's emulator on Linux 6.18 (scripts/bench_parallel_streams.py, iperf3, 1 gbit, 20-100 ms one way, 4 MiB
# buffers): one stream moved 0.61-0.63 of a buffer per round trip.
TCP_BUFFER_SHARE = 0.62


def steps_of(kind: CollectiveName, ranks: int) -> int:
    """Ring steps of one call (NCCL's nsteps): 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter."""
    return 2 * (ranks - 1) if kind == "all_reduce" else ranks - 1


def bus_factor(kind: CollectiveName, ranks: int) -> float:
    """nccl-tests' bus bandwidth over algorithm bandwidth (doc/PERFORMANCE.md): 2(n-1)/n for all-reduce, (n-1)/n for
    all-gather and reduce-scatter."""
    return (2.0 if kind == "all_reduce" else 1.0) * (ranks - 1) / ranks


class NetProfile(BaseModel):
    """The network between nodes as NCCL's transport meets it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["socket", "rdma"] = Field("socket", description="NCCL's socket transport or RDMA (IB/RoCE)")
    nic_bps: float = Field(100e9, ge=1e-6, le=1e15, description="each node's NIC line rate, bits/s")
    one_way_s: float = Field(0.0, ge=0, le=3600, description="one-way delay between two nodes")
    channels: int = Field(2, ge=1, le=64, description="NCCL channels crossing the network per node")
    threads: int = Field(0, ge=0, le=16, description="NCCL_SOCKET_NTHREADS (0: the proxy thread itself)")
    socks_per_thread: int = Field(1, ge=1, le=64, description="NCCL_NSOCKS_PERTHREAD")
    stream_Bps: float = Field(SOCKET_STREAM_BPS, ge=1e-6, le=1e15, description="one socket stream's ceiling, bytes/s")
    tcp: TcpSettings = STOCK_LINUX

    nics: int = Field(1, ge=1, le=64, description="NICs per node, each at nic_bps (rail-optimised: one per GPU)")

    @property
    def rtt_s(self) -> float:
        return 2 * self.one_way_s


def socket_streams(net: NetProfile) -> int:
    """TCP connections per channel and peer: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, at most 64
    (``net_socket.cc``); with no helper threads the one connection the proxy thread drives."""
    return max(1, min(64, net.threads * net.socks_per_thread))


def tcp_window_bytes(tcp: TcpSettings) -> float:
    """Bytes one TCP connection keeps in flight by its buffers (:data:`TCP_BUFFER_SHARE` of the smaller)."""
    return TCP_BUFFER_SHARE * min(tcp.tcp_wmem_max, tcp.tcp_rmem_max)


def net_limits(net: NetProfile) -> dict[str, float]:
    """Each cap on the bus bandwidth across nodes (bytes/s), named: the NIC's payload rate, NCCL_BUFFSIZE per channel
    over the round trip and, over sockets, the streams' TCP windows over the round trip and their CPU ceiling."""
    trip = f"over the {1e3 * net.rtt_s:.3g} ms round trip"
    names = {
        "nic": f"the {net.nics} NICs' payload rate" if net.nics > 1 else "the NIC's payload rate",
        "buffer": f"NCCL's {BUFFSIZE >> 20} MiB buffer per channel {trip}",
        "window": f"the TCP windows {trip}",
        "cpu": "the socket streams' CPU ceiling",
    }
    return {names[cap]: value for cap, value in _net_caps(net).items()}


def _net_caps(net: NetProfile) -> dict[str, float]:
    """:func:`net_limits` by short names (``nic``, ``buffer``, ``window``, ``cpu``): what the searches read at every
    bandwidth they probe, unnamed."""
    rtt = net.rtt_s
    caps = {"nic": net.nics * net.nic_bps / 8 * WIRE_EFFICIENCY}
    if rtt > 0:
        caps["buffer"] = net.channels * BUFFSIZE / rtt
    if net.transport == "socket":
        streams = max(net.channels, net.nics) * socket_streams(net)
        if rtt > 0:
            caps["window"] = streams * tcp_window_bytes(net.tcp) / rtt
        caps["cpu"] = streams * net.stream_Bps
    return caps


def net_bus_Bps(net: NetProfile) -> float:
    """Bus bandwidth the network gives a ring across nodes (bytes/s): the smallest of :func:`net_limits`."""
    return min(_net_caps(net).values())


def net_limit(net: NetProfile) -> tuple[float, str]:
    """The bus bandwidth across nodes and what sets it."""
    name, value = min(net_limits(net).items(), key=lambda item: item[1])
    return value, name


@dataclass(frozen=True)
class NcclCluster:
    """Ranks (workers), nodes (machines) and links of one NCCL communicator, and how close the cluster comes to
    NCCL's model (1: as the model says; fitted to its nccl-tests logs otherwise)."""

    ranks: int
    nodes: int
    intra_bytes_per_s: float  # bus bandwidth inside a node (the accelerator's intra-node link, one direction)
    intra_link: Literal["nvlink", "pci"]
    generation: int  # NCCL's per-generation table row (accelerators.NCCL_GENERATIONS)
    net: NetProfile
    intra_channels: int = 16  # channels inside a node (NCCL opens up to 32 on NVLink systems)
    nvls: bool = False  # the node's GPUs share an NVSwitch with NVLink SHARP (NVLS, NVLSTree)
    nic_efficiency: float = 1.0  # what the NICs deliver of the model's per-NIC speed
    nvlink_efficiency: float = 1.0  # what NVLink delivers of the model's NVLink-bound bandwidth (rings, trees)
    nvls_efficiency: float = 1.0  # what NVLink SHARP delivers of the model's NVLS-bound bandwidth
    latency_scales: tuple[tuple[str, float], ...] = ()  # (algorithm, the cluster's latency over the model's)

    def latency_scale(self, algorithm: str) -> float:
        """The cluster's latency of ``algorithm`` over the model's (1 where not fitted)."""
        return next((scale for algo, scale in self.latency_scales if algo == algorithm), 1.0)

    def efficiency(self, bound: str) -> float:
        """What the link bounding a transfer (``nic``, ``nvlink`` or ``nvls``) delivers of the model's bandwidth."""
        return {"nvlink": self.nvlink_efficiency, "nvls": self.nvls_efficiency}.get(bound, self.nic_efficiency)

    @property
    def gpus_per_node(self) -> int:
        """Ranks per node (NCCL's tuning model calls it ppn)."""
        return self.ranks // self.nodes

    @cached_property
    def ring(self) -> tuple[int, float, str]:
        """:func:`ring_graph` of this cluster, found once: every algorithm and protocol of every call reads it."""
        return ring_graph(self)


@dataclass(frozen=True)
class NcclChoice:
    """The algorithm and protocol NCCL's model picks for a call, and its predicted time; ``bound``: what sets its
    bandwidth (``nic``: the network, ``nvlink``: the intra-node link, ``nvls``: NVLink SHARP on the NVSwitch)."""

    time_s: float
    algorithm: str
    protocol: str
    latency_s: float
    bus_Bps: float
    bound: str = "nic"


def _nvlink_GBps(c: NcclCluster) -> float:
    """A GPU's intra-node link as NCCL's topology counts it (GB/s, one direction)."""
    share = NVLINK_SHARE[min(c.generation, len(NVLINK_SHARE) - 1)] if c.intra_link == "nvlink" else 1.0
    return c.intra_bytes_per_s / 1e9 * share


def _ladders(c: NcclCluster) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(inter-node, NVSwitch) speed ladders of the cluster's GPU generation."""
    if c.generation >= 3:
        return SPEEDS_INTER_SM100, SPEEDS_INTRA_SM100
    return (SPEEDS_INTER_SM90 if c.generation == 2 else SPEEDS_INTER), SPEEDS_INTRA_SM90


@lru_cache(maxsize=256)
def _ring_search(nics: int, nic_GBps: float, nvlink_GBps: float, ladder: tuple[float, ...]) -> tuple[int, float, bool]:
    """(channels, speed GB/s, NVLink-bound) of the ring graph across nodes: the ladder speed no faster than a NIC
    whose channels (as many per NIC as its rate holds, 32 at most) carry the most within a GPU's NVLink."""

    def best(limit: float) -> tuple[int, float]:
        found = (1, ladder[-1])
        for speed in ladder:
            if speed > nic_GBps:
                continue
            channels = min(nics * int(nic_GBps // speed), int(limit // speed), 32)
            if channels >= 1 and channels * speed > found[0] * found[1] + 1e-9:
                found = (channels, speed)
        return found

    channels, speed = best(nvlink_GBps)
    free = best(1e18)
    return channels, speed, free[0] * free[1] > channels * speed + 1e-9


def ring_graph(c: NcclCluster) -> tuple[int, float, str]:
    """(channels, bus bandwidth bytes/s, bound) of the ring across nodes: the graph NCCL's search finds over the
    node's NICs, no faster than the network delivers (:func:`net_bus_Bps`)."""
    channels, speed, nvlink = _ring_search(c.net.nics, c.net.nic_bps / 8e9, _nvlink_GBps(c), _ladders(c)[0])
    graph = channels * speed * 1e9
    net = net_bus_Bps(c.net)
    if net < graph:
        return channels, net, "nic"
    return channels, graph, "nvlink" if nvlink else "nic"


def nvls_graph(c: NcclCluster) -> tuple[int, float, float]:
    """(channels, intra-node speed, inter-node speed) in bytes/s of NVLS's graph: one channel per GPU with a NIC
    (every GPU on one node), the NVSwitch ladder's speed whose channels plus one fit a GPU's NVLink, and across
    nodes a NIC's ladder speed (at most twice the intra-node one), no faster than the network delivers a NIC."""
    heads = min(c.gpus_per_node, MAX_NVLS_HEADS) if c.nodes == 1 else min(c.gpus_per_node, c.net.nics)
    nvlink = _nvlink_GBps(c)
    inter_ladder, intra_ladder = _ladders(c)
    intra = next((s for s in intra_ladder if (heads + 1) * s <= nvlink), intra_ladder[-1])
    if c.nodes == 1:
        return heads, intra * 1e9, intra * 1e9
    nic = c.net.nic_bps / 8e9
    inter = next((s for s in inter_ladder if s <= nic and s <= 2 * intra), inter_ladder[-1])
    return heads, intra * 1e9, min(inter * 1e9, net_bus_Bps(c.net) / c.net.nics)


def _bus(c: NcclCluster) -> tuple[int, float, str]:
    """(channels, bus bandwidth bytes/s, bound) of rings and trees before protocol refinements."""
    if c.nodes == 1:
        return c.intra_channels, c.intra_bytes_per_s, "nvlink"
    return c.ring


def _algo_bw_GBps(kind: CollectiveName, algo: str, proto: int, c: NcclCluster) -> tuple[float, str]:
    """NCCL's algorithm bandwidth (GB/s) of one algorithm and protocol (0 when NCCL would not use it), and what
    bounds it."""
    gen, nodes = c.generation, c.nodes
    if algo in ("nvls", "nvls_tree"):
        heads, intra, inter = nvls_graph(c)
        inter = inter if nodes <= 2 else inter / 2
        return heads * min(intra, inter) / 1e9 * NVLS_RATIO, "nvls" if intra <= inter else "nic"
    ch, bus, bound = _bus(c)
    bus /= 1e9
    index2 = min(nodes, 3) - 1
    if algo == "tree":
        if kind != "all_reduce" or nodes == 1:
            return 0.0, bound
        bus = min(bus * 0.92, ch * PER_CH_MAX_TREE[gen][index2])
        if proto == 0:
            bus = min(bus / 3.8, LL_MAX_BW[0 if nodes > 1 else gen][index2])
        elif proto == 1:
            bus = min(bus * 120.0 / 128.0, ch * PER_CH_MAX_TREE_LL128[gen][index2])
        return bus * 0.5, bound
    if proto == 0:
        bus = min(LL_MAX_BW[0 if nodes > 1 else gen][index2], bus * 0.5)
    elif proto == 1:
        bus = min(bus * 0.92, ch * PER_CH_MAX_RING_LL128[gen])
    return bus * c.ranks / steps_of(kind, c.ranks), bound


def _latency_us(kind: CollectiveName, algo: str, proto: int, c: NcclCluster, nbytes: float) -> float:
    """NCCL's latency of one call (us), with the plateau factor, before the network's own delay."""
    if algo == "nvls":
        return NVLS_LAT_US
    if algo == "nvls_tree":
        return NVLS_LAT_US + 2 * int(math.log2(c.nodes)) * NVLS_TREE_NET_LAT_US
    intra_hw = "nvlink" if c.intra_link == "nvlink" else "pci"
    nsteps = steps_of(kind, c.ranks)
    lat = BASE_LAT[algo][proto]
    intra = HW_LAT[intra_hw][algo][proto]
    inter = HW_LAT["net"]["tree" if c.gpus_per_node == 1 else algo][proto]
    # (NCCL adds the NIC's latency, twice for Simple's flush: 0 for sockets and for IB alike)
    if algo == "ring":
        if c.nodes == 1:
            lat += nsteps * intra
        else:
            overhead = NET_OVERHEAD_US * (3 if proto == 2 else 1)
            intra = max(intra, overhead)
            inter_steps = 2 * (c.nodes - 1) if kind == "all_reduce" else c.nodes - 1
            lat += (nsteps - inter_steps) * intra + inter_steps * inter
        if proto == 2 and kind == "all_reduce" and c.nodes > 1 and nbytes / (_bus(c)[0] * c.ranks) >= 64:
            lat *= 1.4 if c.generation >= 1 else 1.9
    else:
        lat += 2 * ((c.gpus_per_node - 1) * intra + int(math.log2(c.nodes)) * inter)
    return lat


def _wire_delay_s(kind: CollectiveName, algo: str, c: NcclCluster) -> float:
    """The network's one-way delay paid by the steps that cross it (NCCL's model leaves it out)."""
    if c.nodes == 1:
        return 0.0
    if algo == "ring":
        steps = 2 * (c.nodes - 1) if kind == "all_reduce" else c.nodes - 1
    else:
        steps = 2 * int(math.ceil(math.log2(c.nodes)))
    return steps * c.net.one_way_s


def _choices(kind: CollectiveName, c: NcclCluster) -> list[tuple[str, int]]:
    """(algorithm, protocol) pairs NCCL enables: LL128 only where the network path is GPU-direct (not over sockets);
    NVLS on one node of an NVSwitch, NVLSTree across nodes over RDMA (all-reduce, Simple)."""
    protocols = (0, 2) if c.nodes > 1 and c.net.transport == "socket" else (0, 1, 2)
    pairs = [(algo, proto) for algo in ("ring", "tree") for proto in protocols]
    if c.nvls and kind == "all_reduce" and c.gpus_per_node > 1 and c.generation >= 2:
        if c.nodes == 1:
            pairs.append(("nvls", 2))
        elif c.net.transport == "rdma":
            pairs.append(("nvls_tree", 2))
    return pairs


@dataclass(frozen=True)
class Term:
    """One choice's time split into NCCL's model's latency and transfer (seconds) and what bounds the transfer."""

    algorithm: str
    protocol: str
    latency_s: float
    wire_s: float
    transfer_s: float
    bound: str
    bus_Bps: float

    def time_s(self, c: NcclCluster) -> float:
        """The time on ``c``: the model's latency scaled, the transfer over the efficiency of what bounds it."""
        return (
            self.latency_s * c.latency_scale(self.algorithm) + self.wire_s + self.transfer_s / c.efficiency(self.bound)
        )


def nccl_pick(kind: CollectiveName, nbytes: float, c: NcclCluster) -> Term | None:
    """The choice NCCL's model makes for a call (the fastest by the model itself, whatever the cluster's
    efficiencies), as a :class:`Term`; None where there is nothing to move (one rank, no bytes)."""
    if c.ranks < 2 or nbytes <= 0:
        return None
    best: tuple[float, Term] | None = None
    for algo, proto in _choices(kind, c):
        bw, bound = _algo_bw_GBps(kind, algo, proto, c)
        if bw <= 0:
            continue
        if algo == "tree":
            log_size = int(math.log2(max(1.0, nbytes / 64)))
            if 0 <= log_size < 23:
                bw *= TREE_CORRECTION[proto][log_size]
        lat_s = _latency_us(kind, algo, proto, c, nbytes) * 1e-6
        wire_s = _wire_delay_s(kind, "tree" if algo == "nvls_tree" else algo, c)
        transfer = nbytes / (bw * 1e9)
        t = lat_s + wire_s + transfer
        if best is None or t < best[0]:
            name = PROTOCOLS[proto]
            term = Term(algo, name, lat_s, wire_s, transfer, bound, bw * 1e9 * bus_factor(kind, c.ranks))
            best = (t, term)
    if best is None:  # every rate is bounded above zero where it is read (NetProfile, the fit's terms)
        raise ValueError(f"NCCL's model has no algorithm for {kind} on this network (no bandwidth above zero)")
    return best[1]


def nccl_time(kind: CollectiveName, nbytes: float, c: NcclCluster) -> NcclChoice:
    """Time of one ``kind`` call on ``nbytes`` (all-reduce: the buffer; all-gather: the gathered result, as
    nccl-tests sizes it; reduce-scatter: the input): NCCL's pick among ring, tree, NVLS and NVLSTree and their
    protocols, at the cluster's efficiencies."""
    term = nccl_pick(kind, nbytes, c)
    if term is None:
        return NcclChoice(0.0, "none", "none", 0.0, 0.0)
    t = term.time_s(c)
    latency = term.latency_s * c.latency_scale(term.algorithm) + term.wire_s
    return NcclChoice(t, term.algorithm, term.protocol, latency, term.bus_Bps * c.efficiency(term.bound), term.bound)
