"""Time dilation (DieCast, Gupta et al., NSDI'08): emulate a cluster of N machines on C < N cores.

Slow everything by a factor k, run, and divide every measured duration by k: every link (rate / k,
delay and jitter x k), every emulated compute (the ``shapes`` workload's stand-in forward and
backward, x k), and the CPU work the nodes really do (encode, decode, the optimizer's update, a real
model's forward and backward): each worker pads those phases to k times their CPU time
(:mod:`netbench.pacing`). Every node then asks for 1/k of a core and 1/k of the packet work per
second, and a pipeline that overlaps its codec with its collectives sees both slowed alike, so the
undilated step is the dilated one divided by k. ``auto`` picks k = workers / cores (nodes x
``--gpus-per-node``), so that each worker gets a core's worth of CPU per dilated second and the
prediction for a dilated run gives each worker a core of its own, and more where the workers' CPU work runs beside
their traffic (:func:`overlapped_cpu_share`); with G workers per node their
intra-node link (the loopback's tbf, ``--intra-bw``) is slowed by k like the others. Where the host is
short of cores even so, the workers wait for one beyond their
pacing: the fidelity check reports it, and ``cpu_stretch`` ((on a core + waiting) / on a core, from
``/proc/PID/schedstat``) says by how much.

The run directory keeps the real (dilated) timings in ``workers/rank*.jsonl`` and the divided
ones in ``steps.csv`` and the summary; ``run.json`` records k and the dilated cluster.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from netbench.orchestrator.config import RunConfig
from netbench.rundir.steps_schema import dilated_columns, numbers_of, numbers_text
from netbench.settings import Override, Setting

if TYPE_CHECKING:
    from netbench.model.calibration import Calibration
    from netbench.topology.graph import Topology
    from netbench.topology.link import DirectionSpec

__all__ = [
    "TIMED_FIELDS",
    "HOST_SHARE",
    "WORKER_SHARE",
    "factor_for_busy",
    "auto_factor",
    "overlapped_cpu_share",
    "parse_dilation",
    "resolve",
    "dilate",
    "cpu_stretch",
    "undilate_records",
]

# How much slower than real time a run is emulated.
DILATION = Setting(
    "--dilation",
    "dilation",
    "text",
    "Time dilation k (DieCast): links, delays, compute and each node's CPU work k times slower, times reported divided "
    "by k; auto: workers (nodes x --gpus-per-node) / cores, more where the workers' pipelined codecs (or, with "
    "--shard, their compute between the sharding group's calls) would crowd the host's cores; 1: none.",
    "auto",
    overrides={
        "sweep": Override(
            "each point of a sweep takes its own factor",
            help="Time dilation k for every point (auto: each point's own, from its workers, cores and predicted CPU "
            "work; 1: none); see `netbench run --dilation`.",
        )
    },
)

# step record durations (seconds) that are divided by k; t_start/t_end stay real (the capture's step windows use them)
TIMED_FIELDS = tuple(c.value for c in dilated_columns())
MAX_FACTOR = 1000.0


def parse_dilation(text: str) -> float | None:
    """``--dilation``: ``auto`` (None: resolved once the run's prediction is known, :func:`resolve`) or a
    number in [1, 1000]; raises ValueError with the reason."""
    if text.strip().lower() == "auto":
        return None
    try:
        k = float(text)
    except ValueError:
        raise ValueError(f"expected a number >= 1 or auto, got {text!r}") from None
    if not math.isfinite(k) or not 1.0 <= k <= MAX_FACTOR:
        raise ValueError(f"must be between 1 and {MAX_FACTOR:g} (or auto), got {text!r}")
    return k


def resolve(dilation: float | None, config: RunConfig, calibration: Calibration, cpus: int) -> float:
    """The factor a run uses: ``dilation`` as given, or for ``auto`` (None) :func:`auto_factor` of its prediction."""
    if dilation is not None:
        return dilation
    workers = config.cluster.nodes * config.gpus_per_node  # every worker, not every node, needs its core
    return auto_factor(workers, cpus, overlapped_cpu_share(config, calibration))


HOST_SHARE = 0.6  # a host busier than this (all its work, measured) is short of cores for the emulation's timing
# (2-node pipelined top-k all-gather, 100mbit + 20 ms: faithful at 46-59 % busy, codec CPU time within 1.09x;
# flagged at 66-77 %, 1.12-1.13x)
EMULATION_SHARE = (
    0.2  # what the emulation itself took beside the workers in that job (delay line, packets, gloo's threads)
)
WORKER_SHARE = HOST_SHARE - EMULATION_SHARE  # what auto lets the workers' predicted, overlapped CPU work take


def factor_for_busy(busy: float, share: float = HOST_SHARE) -> float:
    """The dilation, in half steps, that brings ``busy`` (a share of the host's cores, undilated) down to ``share``."""
    return math.ceil(2 * busy / share) / 2


def auto_factor(workers: int, cpus: int, cpu_share: float = 0.0) -> float:
    """k = workers / cores (each worker a core's worth of CPU per dilated second), raised in half steps until
    the workers' CPU work that overlaps their traffic (``cpu_share``: a worker's CPU seconds per step second,
    predicted) keeps at most WORKER_SHARE of the cores busy: with the emulation's own work the host then
    stays within HOST_SHARE."""
    by_cores = workers / max(1, cpus)
    return max(1.0, by_cores, factor_for_busy(workers * cpu_share / max(1, cpus), WORKER_SHARE))


def overlapped_cpu_share(config: RunConfig, calibration: Calibration) -> float:
    """A worker's encode + decode per second of its predicted step, where its pipeline overlaps them with the
    wire (several buckets); 0 where they take turns (the emulation then has the cores while the codecs wait).

    With the weights sharded (``--shard``), the whole step: the sharding group's gathers and reduce-scatters run
    between the pieces of a real model's forward and backward, so one rank's collectives wait on gloo's threads
    while the other ranks (and, with HSDP, the other sites, whose steps run apart between syncs) compute. The
    dilation's pacing pads a compute phase once, at its end, so each worker computes on a whole core while it can;
    at k = workers / cores every core is then taken, and each call's wake-ups wait for one."""
    from netbench.orchestrator.prediction import predict, workload_shapes  # late: keeps pandas off this module's import

    if config.shard != "none":
        return 1.0
    nodes, g = config.cluster.nodes, config.gpus_per_node
    if config.replicator.bucket_mb <= 0:
        return 0.0
    shapes = workload_shapes(config.workload, nodes)
    local = config.workload.compute_ms / 1e3 if config.workload.kind == "shapes" else 0.0
    est = predict(config, shapes, local, calibration, cpus=nodes * g)  # every worker a core: the cluster it stands for
    one = config.model_copy(update={"replicator": config.replicator.model_copy(update={"bucket_mb": 0.0})})
    if est.step_time_s >= predict(one, shapes, local, calibration, cpus=nodes * g).step_time_s - 1e-9:
        return 0.0
    return min(1.0, est.compression_time_s / max(est.step_time_s, 1e-9))


def dilate(config: RunConfig, k: float) -> RunConfig:
    """The configuration the emulator actually runs: links k times slower and longer (a shaped intra-node link
    too), compute k times longer."""
    if k == 1.0:
        return config
    cluster = config.cluster
    slowed: dict[str, Any] = {side: _slowed(getattr(cluster, side), k) for side in ("up", "down")}
    slowed["topology"] = _slowed_topology(cluster.topology, k)  # every direction of every link, trunks included
    workload = config.workload.model_copy(update={"compute_ms": config.workload.compute_ms * k})
    timeout = config.timeout_s * k if config.timeout_s else None
    intra = config.intra_bw_bps / k if config.intra_bw_bps else None
    return config.model_copy(
        update={
            "cluster": cluster.model_copy(update=slowed),
            "workload": workload,
            "timeout_s": timeout,
            "intra_bw_bps": intra,
        }
    )


def _slowed(direction: DirectionSpec, k: float) -> DirectionSpec:
    """One link direction k times slower and longer."""
    return direction.model_copy(
        update={
            "rate_bps": direction.rate_bps / k,
            "delay_s": direction.delay_s * k,
            "jitter_s": direction.jitter_s * k,
        }
    )


def _slowed_topology(topology: Topology, k: float) -> Topology:
    """The topology with every link direction slowed (a new object: the graph caches its paths and links)."""
    links = tuple(
        link.model_copy(update={"forward": _slowed(link.forward, k), "reverse": _slowed(link.reverse, k)})
        for link in topology.links
    )
    return type(topology)(kind=topology.kind, nodes=topology.nodes, switches=topology.switches, links=links)


def cpu_stretch(observed: dict[str, Any] | None, k: float) -> float:
    """How much longer the workers' CPU work took than their CPU time: (on a core + waiting) / on a core, in [1, k].

    ``k`` when the run was too short to observe.
    """
    if not observed or not observed.get("worker_cpu_mean") or observed.get("worker_wait_mean") is None:
        return k
    return min(k, max(1.0, 1.0 + observed["worker_wait_mean"] / observed["worker_cpu_mean"]))


def undilate_records(records: dict[int, list[dict[str, Any]]], k: float) -> dict[int, list[dict[str, Any]]]:
    """Step records as the undilated cluster would have measured them: every duration divided by ``k``.

    The links, the emulated compute and (paced by the workers) their CPU phases all ran k times slower.
    """
    if k == 1.0:
        return records

    def one(r: dict[str, Any]) -> dict[str, Any]:
        if r.get("event") != "step":
            return r
        times = {f: r[f] / k for f in TIMED_FIELDS if isinstance(r.get(f), (int, float))}
        pieces = {f: numbers_text(v / k for v in numbers_of(r[f])) for f in TIMED_FIELDS if isinstance(r.get(f), str)}
        return {**r, **times, **pieces}

    return {rank: [one(r) for r in recs] for rank, recs in records.items()}
