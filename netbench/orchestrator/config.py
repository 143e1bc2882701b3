"""Everything one `netbench run` needs, validated before anything is created.

Validation here looks at the values only, so a stored run's config reads back the same on any host;
what depends on the host running it (its memory, a writable ``out_dir``) is checked by
:mod:`netbench.orchestrator.host_fit` when a run is prepared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from netbench.declarations.compression import compressible, compression_settings, parse_compression
from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec
from netbench.schedule.fits import check_fits
from netbench.schedule.model import Schedule
from netbench.worker.groups import Layout
from netbench.workloads.config import WorkloadConfig

DEFAULT_REPORTS = Path("reports/runs")
RENDEZVOUS_PORT = 29500
MIN_TIMEOUT_S = 1.0  # gloo's own connect and teardown take that long: less fails a healthy run
MAX_GPUS_PER_NODE = 16  # workers per node; every one is a process on this host
MAX_WORKERS = 64  # workers in all (nodes x gpus_per_node), as many as the largest flat cluster
BYTES_PER_PARAM = 16  # what a node holds per parameter: weights, gradient, and a replicator's or optimizer's state


class RunConfig(BaseModel):
    """A run: the cluster, what each node trains and how it replicates, and where results go."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    cluster: ClusterSpec
    replicator: ReplicatorConfig = Field(default_factory=ReplicatorConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    steps: int = Field(20, ge=1, le=100_000, description="Measured optimizer steps.")
    warmup_steps: int = Field(2, ge=0, le=1000, description="Warm-up steps left out of the summary.")
    # None: from the model's slowest collective on these links (orchestrator.timeouts)
    timeout_s: float | None = Field(
        None,
        ge=MIN_TIMEOUT_S,
        le=3600,
        description="Collective timeout in seconds (a dead peer fails the run "
        "within it); default: 4x the model's slowest collective on these links, at least 30 s.",
    )
    capture: bool = Field(True, description="Capture packet headers on every link.")  # on every switch port
    keep_pcap: bool = Field(False, description="Keep the pcap files in the run directory.")
    trace: bool = Field(
        True,
        description="Write trace.json: ranks, buckets, links and TCP on one timeline (Perfetto, chrome://tracing).",
    )
    out_dir: Path = Field(DEFAULT_REPORTS, description="Parent directory of the run directory.")
    threads: int = Field(1, ge=1, le=64, description="torch threads per worker.")
    gpus_per_node: int = Field(
        1,
        ge=1,
        le=MAX_GPUS_PER_NODE,
        description="Workers per node: they shard the model inside the node "
        "and replicate between nodes (FlexDeMo); 1: one worker per node.",
    )
    intra_bw_bps: float | None = Field(
        None,
        gt=0,
        description="Intra-node link rate of a node, shared by its G workers (one tbf on its "
        "loopback), tc units; default unshaped.",
    )  # in bit/s here; the option takes tc units
    shard_within: Literal["node", "site", "host"] = Field(
        "node",
        description="What shards the model (FlexDeMo): node, the "
        "--gpus-per-node workers of each node, replicating between nodes; site, "
        "every worker of a site, replicating between sites (needs a topology of "
        "two or more sites of equal size); host (netbench worker only), the local ranks of each torchrun host "
        "(--nproc-per-node G), replicating between hosts.",
    )
    shard: Literal["none", "zero3", "hsdp"] = Field(
        "none",
        description="Shard the parameters too (torch's fully_shard, each layer gathered before its forward and "
        "backward, its gradients reduce-scattered), one worker per node: zero3 or fsdp, over every node, nothing "
        "replicated between groups (--replicator full); hsdp, within each site (--shard-within site), the replicator "
        "between sites on the shards; none: FlexDeMo's step where the model is sharded.",
    )
    schedule: Schedule | None = Field(
        None,
        description="Change links and nodes while the run goes on: a schedule CSV "
        "(time_s,link,rate,delay,loss,state,jitter,compute_scale,member) or TOML, a Mahimahi trace or a "
        "time_s,rate[,delay] trace; times count from the first measured step.",
    )
    compression: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description=f"Fraction of each tensor's values sent per step, one rate for {'/'.join(compressible())} "
        "(each maps it onto its own setting): 1/16, 0.0625 or 6.25%; overrides --topk/--rate.",
    )  # applied to the replicator by orchestrator.resolve
    auto_bucket: bool = Field(
        False,
        description="Size the replicator's pipeline buckets from the link and the step's payload "
        "(--bucket-mb auto), in place of replicator.bucket_mb.",
    )  # applied to the replicator by orchestrator.resolve

    @field_validator("compression", mode="before")
    @classmethod
    def _compression_fraction(cls, v: object) -> object:
        """``1/16``, ``0.0625`` or ``6.25%`` as the fraction it names."""
        if isinstance(v, str):
            return parse_compression(v)
        return v

    @field_validator("compression")
    @classmethod
    def _compressible(cls, v: float | None, info: ValidationInfo) -> float | None:
        """A compression rate needs a replicator that sends a share of each tensor."""
        replicator = info.data.get("replicator")
        if v is not None and replicator is not None:
            compression_settings(replicator.name, v, replicator.chunk)
        return v

    @field_validator("shard", mode="before")
    @classmethod
    def _shard_alias(cls, v: object) -> object:
        return shard_name(v)

    @field_validator("schedule")
    @classmethod
    def _schedule_fits(cls, v: Schedule | None, info: ValidationInfo) -> Schedule | None:
        """Every target named in the schedule exists, and every change is one this cluster can make while running."""
        cluster = info.data.get("cluster")
        if v is not None and cluster is not None:
            check_fits(v, cluster)
        return v

    @field_validator("shard_within")
    @classmethod
    def _sites_shard_alike(cls, v: str, info: ValidationInfo) -> str:
        """Sharding by site needs sites to replicate between, and sites that cut the model into the same slices."""
        cluster = info.data.get("cluster")
        if v == "site" and cluster is not None:
            check_sites(cluster.topology.groups())
        return v

    def shard_layout(self) -> Layout | None:
        """The sharding groups of ``shard_within site``: each site's ranks (through the rank placement); of ``shard
        zero3``: every worker; None: G per node (a host's local ranks are its node's G).
        """
        if self.shard == "zero3":
            return Layout((tuple(range(self.cluster.nodes * self.gpus_per_node)),))
        if self.shard_within != "site":
            return None
        return Layout.per_site(self.cluster.topology.groups().values(), self.cluster.placement, self.gpus_per_node)

    @model_validator(mode="after")
    def _workers_fit(self) -> RunConfig:
        """Every worker of every node is a process on this host: at most MAX_WORKERS of them."""
        workers = self.cluster.nodes * self.gpus_per_node
        if workers > MAX_WORKERS:
            raise ValueError(
                f"gpus_per_node: {self.cluster.nodes} nodes x {self.gpus_per_node} = {workers} workers; "
                f"this host runs at most {MAX_WORKERS}"
            )
        return self

    @model_validator(mode="after")
    def _weights_shard(self) -> RunConfig:
        """``shard``: groups of more than one worker, a replicator that fits them and a workload whose forward
        gathers the layers."""
        if self.shard != "none":
            check_weight_sharding(self)
        return self


def shard_name(value: object) -> object:
    """``--shard``'s value as RunConfig keeps it: ``fsdp``, torch's FULL_SHARD, is ZeRO-3 (plan's word for it too)."""
    from netbench.model.parallelism import SHARD_ALIASES  # late: keeps the model off the config's import

    return SHARD_ALIASES.get(value, value) if isinstance(value, str) else value


def shard_choices() -> tuple[str, ...]:
    """What ``--shard`` takes: RunConfig's shardings and their aliases."""
    from netbench.model.parallelism import SHARD_ALIASES  # late: keeps the model off the config's import

    kept = get_args(RunConfig.model_fields["shard"].annotation)
    return (*kept, *(alias for alias, name in SHARD_ALIASES.items() if name in kept))


def check_weight_sharding(config: RunConfig) -> None:
    """ValueError (one line, naming the option) where ``--shard zero3|hsdp`` cannot run on this config."""
    if config.workload.kind == "shapes":
        raise ValueError(
            f"--shard {config.shard}: gathers each layer inside the workload's forward; the shapes workload has none "
            "(use mlp, transformer or python:)"
        )
    if config.gpus_per_node > 1:
        raise ValueError(
            f"--shard {config.shard}: shards across nodes of one worker each (--gpus-per-node 1, not "
            f"{config.gpus_per_node}); a node's workers shard inside it with --shard none (FlexDeMo, the weights whole)"
        )
    if config.shard == "zero3":
        if config.shard_within != "node":
            raise ValueError("--shard zero3: every worker is one sharding group; --shard-within sizes --shard hsdp's")
        if config.cluster.nodes < 2:
            raise ValueError("--shard zero3: needs two or more nodes to shard over")
        if config.replicator.name != "full":
            raise ValueError(
                f"--shard zero3: nothing is replicated between groups, so --replicator {config.replicator.name} has "
                "nothing to do; use --replicator full, or --shard hsdp to run it between sites"
            )
    elif config.shard_within != "site":
        raise ValueError("--shard hsdp: shards within each site and replicates between them (--shard-within site)")


def check_sites(sites: dict[str, list[int]]) -> None:
    """ValueError (one line) unless there are two or more sites, all with the same number of nodes.

    One site leaves nothing to replicate with: every slice's replication group would be the rank
    itself, and the run would measure sharding inside one LAN, not replication between sites.
    Sites of unequal size would cut the model into slices of different sizes, which no replication
    group can exchange; they are refused until slices can be matched across sites.
    """
    if len(sites) < 2:
        raise ValueError("needs a topology of two or more sites to replicate between; this cluster is one site")
    sizes = {name: len(nodes) for name, nodes in sites.items()}
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{name} {n}" for name, n in sizes.items())
        raise ValueError(f"needs sites of equal size, got nodes per site: {shown}")
