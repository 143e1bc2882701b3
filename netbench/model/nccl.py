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
NET_OVERHEAD_US = 1.0  # getNetOverhead: 1 us on Intel x86 (2 on AMD), tripled for Simple
BUFFSIZE = 4 << 20  # NCCL_BUFFSIZE: bytes a channel's connection keeps in flight (Simple)
# One socket stream's ceiling through NCCL's socket transport (a proxy or helper thread copying through the host):
# github.com/NVIDIA/nccl/issues/450 measured 4.5-5.2 GB/s bus bandwidth (8-16 MB all-reduce, 4 x 8 V100, 100 GbE)
# with NCCL_MIN_NCHANNELS=4 and NCCL_SOCKET_NTHREADS=2 (one socket a thread): 8 streams, 0.56-0.65 GB/s each.
# With NCCL's defaults (2 channels, one socket each) that gives the 0.7-1.4 GB/s published socket runs show on
# 10-100 GbE; `netbench calibrate --from-nccl-tests` replaces it with the user's own.
SOCKET_STREAM_BPS = 0.6e9
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
    nic_bps: float = Field(100e9, gt=0, description="each node's NIC line rate, bits/s")
    one_way_s: float = Field(0.0, ge=0, description="one-way delay between two nodes")
    channels: int = Field(2, ge=1, le=64, description="NCCL channels crossing the network per node")
    threads: int = Field(0, ge=0, le=16, description="NCCL_SOCKET_NTHREADS (0: the proxy thread itself)")
    socks_per_thread: int = Field(1, ge=1, le=64, description="NCCL_NSOCKS_PERTHREAD")
    stream_Bps: float = Field(SOCKET_STREAM_BPS, gt=0, description="one socket stream's ceiling, bytes/s")
    tcp: TcpSettings = STOCK_LINUX

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
    rtt = net.rtt_s
    trip = f"over the {1e3 * rtt:.3g} ms round trip"
    caps = {"the NIC's payload rate": net.nic_bps / 8 * WIRE_EFFICIENCY}
    if rtt > 0:
        caps[f"NCCL's {BUFFSIZE >> 20} MiB buffer per channel {trip}"] = net.channels * BUFFSIZE / rtt
    if net.transport == "socket":
        streams = net.channels * socket_streams(net)
        if rtt > 0:
            caps[f"the TCP windows {trip}"] = streams * tcp_window_bytes(net.tcp) / rtt
        caps["the socket streams' CPU ceiling"] = streams * net.stream_Bps
    return caps


def net_bus_Bps(net: NetProfile) -> float:
    """Bus bandwidth the network gives a ring across nodes (bytes/s): the smallest of :func:`net_limits`."""
    return min(net_limits(net).values())


def net_limit(net: NetProfile) -> tuple[float, str]:
    """The bus bandwidth across nodes and what sets it."""
    name, value = min(net_limits(net).items(), key=lambda item: item[1])
    return value, name


@dataclass(frozen=True)
class NcclCluster:
    """Ranks (workers), nodes (machines) and links of one NCCL communicator."""

    ranks: int
    nodes: int
    intra_bytes_per_s: float  # bus bandwidth inside a node (the accelerator's intra-node link, one direction)
    intra_link: Literal["nvlink", "pci"]
    generation: int  # NCCL's per-generation table row (accelerators.NCCL_GENERATIONS)
    net: NetProfile
    intra_channels: int = 16  # channels inside a node (NCCL opens up to 32 on NVLink systems)

    @property
    def gpus_per_node(self) -> int:
        """Ranks per node (NCCL's tuning model calls it ppn)."""
        return self.ranks // self.nodes


@dataclass(frozen=True)
class NcclChoice:
    """The algorithm and protocol NCCL's model picks for a call, and its predicted time."""

    time_s: float
    algorithm: str
    protocol: str
    latency_s: float
    bus_Bps: float


def _bus_Bps(c: NcclCluster) -> float:
    """The communicator's bus bandwidth before protocol refinements: the slower of the node's link and the network."""
    if c.nodes == 1:
        return c.intra_bytes_per_s
    return min(c.intra_bytes_per_s, net_bus_Bps(c.net))


def _channels(c: NcclCluster) -> int:
    return c.intra_channels if c.nodes == 1 else c.net.channels


def _algo_bw_GBps(kind: CollectiveName, algo: str, proto: int, c: NcclCluster) -> float:
    """NCCL's algorithm bandwidth (GB/s) of one algorithm and protocol (0 when NCCL would not use it)."""
    gen, nodes, ch = c.generation, c.nodes, _channels(c)
    index2 = min(nodes, 3) - 1
    bus = _bus_Bps(c) / 1e9
    if algo == "tree":
        if kind != "all_reduce" or nodes == 1:
            return 0.0
        bus = min(bus * 0.92, ch * PER_CH_MAX_TREE[gen][index2])
        if proto == 0:
            bus = min(bus / 3.8, LL_MAX_BW[0 if nodes > 1 else gen][index2])
        elif proto == 1:
            bus = min(bus * 120.0 / 128.0, ch * PER_CH_MAX_TREE_LL128[gen][index2])
        return bus * 0.5
    if proto == 0:
        bus = min(LL_MAX_BW[0 if nodes > 1 else gen][index2], bus * 0.5)
    elif proto == 1:
        bus = min(bus * 0.92, ch * PER_CH_MAX_RING_LL128[gen])
    return bus * c.ranks / steps_of(kind, c.ranks)


def _latency_us(kind: CollectiveName, algo: str, proto: int, c: NcclCluster, nbytes: float) -> float:
    """NCCL's latency of one call (us), with the plateau factor, before the network's own delay."""
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
        if proto == 2 and kind == "all_reduce" and c.nodes > 1 and nbytes / (_channels(c) * c.ranks) >= 64:
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


def _protocols(c: NcclCluster) -> tuple[int, ...]:
    """Protocols NCCL enables: LL128 only where the network path is GPU-direct (not over sockets)."""
    if c.nodes > 1 and c.net.transport == "socket":
        return (0, 2)
    return (0, 1, 2)


def nccl_time(kind: CollectiveName, nbytes: float, c: NcclCluster) -> NcclChoice:
    """Time of one ``kind`` call on ``nbytes`` (all-reduce: the buffer; all-gather: the gathered result, as
    nccl-tests sizes it; reduce-scatter: the input), NCCL's pick among ring and tree and its protocols."""
    if c.ranks < 2 or nbytes <= 0:
        return NcclChoice(0.0, "none", "none", 0.0, 0.0)
    best: NcclChoice | None = None
    for algo in ("ring", "tree"):
        for proto in _protocols(c):
            bw = _algo_bw_GBps(kind, algo, proto, c)
            if bw <= 0:
                continue
            if algo == "tree":
                log_size = int(math.log2(max(1.0, nbytes / 64)))
                if 0 <= log_size < 23:
                    bw *= TREE_CORRECTION[proto][log_size]
            lat_s = _latency_us(kind, algo, proto, c, nbytes) * 1e-6 + _wire_delay_s(kind, algo, c)
            t = lat_s + nbytes / (bw * 1e9)
            if best is None or t < best.time_s:
                best = NcclChoice(t, algo, PROTOCOLS[proto], lat_s, bw * 1e9 * bus_factor(kind, c.ranks))
    assert best is not None
    return best
