"""What one worker process runs: the JSON spec the orchestrator (or a user with torchrun) hands it.

Rank and rendezvous fields may be left out of the spec; they are then read from the environment
torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so one spec file serves every rank.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from netbench import environment, untrusted
from netbench.declarations.config import ReplicatorConfig
from netbench.validation import one_line
from netbench.worker.groups import Layout
from netbench.worker.quorum_spec import QuorumSpec
from netbench.workloads.config import WorkloadConfig

MAX_RANKS = 1 << 20  # ranks of one torchrun job: far past any cluster a run spans
MAX_PORT = 65535
_HOST = re.compile(r"[A-Za-z0-9:\[][A-Za-z0-9._:\[\]-]{0,252}")  # a host name, IPv4 or IPv6 address


def _rank(var: str, env: Mapping[str, str]) -> int | None:
    return environment.whole_number(var, low=0, high=MAX_RANKS - 1, env=env)


def _world_size(var: str, env: Mapping[str, str]) -> int | None:
    return environment.whole_number(var, low=1, high=MAX_RANKS, env=env)


def _port(var: str, env: Mapping[str, str]) -> int | None:
    return environment.whole_number(var, low=1, high=MAX_PORT, env=env)


def _host(var: str, env: Mapping[str, str]) -> str | None:
    return environment.matching(var, _HOST, "a host name or an IP address", env=env)


# the rendezvous fields torchrun's environment fills, each with its variable and how it is read
_ENV_FIELDS: dict[str, tuple[str, Callable[[str, Mapping[str, str]], int | str | None]]] = {
    "rank": ("RANK", _rank),
    "world_size": ("WORLD_SIZE", _world_size),
    "master_addr": ("MASTER_ADDR", _host),
    "master_port": ("MASTER_PORT", _port),
}


class SpecError(ValueError):
    """The spec file or the environment it relies on cannot be used; shown as one line."""


class WorkerSpec(BaseModel):
    """Everything one node's worker needs; serialised as JSON by whoever launches it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int | None = Field(
        None, ge=0, description="this node's rank; None: read RANK (and the rest) from the environment"
    )
    world_size: int | None = Field(None, ge=1, description="number of nodes; None: WORLD_SIZE")
    master_addr: str | None = Field(None, min_length=1, description="rank 0's address; None: MASTER_ADDR")
    master_port: int | None = Field(
        None, ge=1, le=MAX_PORT, description="rendezvous port on master_addr; None: MASTER_PORT"
    )
    iface: str = Field(
        ..., min_length=1, description="interface for GLOO_SOCKET_IFNAME and the byte counters ('lo' in tests)"
    )
    steps: int = Field(10, ge=1, description="measured steps (after the warmup steps)")
    warmup_steps: int = Field(0, ge=0, description="steps run and recorded first, flagged warmup")
    replicator: ReplicatorConfig = Field(default_factory=ReplicatorConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    out_path: str = Field(
        ..., min_length=1, description="JSONL file appended to; '{rank}' in it is replaced by the rank"
    )
    timeout_s: float = Field(30.0, gt=0.0, description="collective timeout: a dead peer fails the run, never hangs it")
    setup_timeout_s: float | None = Field(
        None,
        gt=0.0,
        description="how long joining the process group (the rendezvous, gloo's connections to every peer) and the "
        "start gate may take; None: timeout_s",
    )
    threads: int = Field(1, ge=1, description="torch.set_num_threads for the workload and the replicator")
    cpu_dilation: float = Field(
        1.0, ge=1.0, description="time dilation k: CPU phases padded to k times their CPU time (netbench.pacing)"
    )
    gpus_per_node: int = Field(
        1,
        ge=1,
        description="G workers per node: shard inside it, replicate between nodes (rank = node * G + local rank)",
    )
    intra_iface: str | None = Field(
        None, min_length=1, description="interface of the intra-node link, for its counters ('lo'); None: not read"
    )
    shard_groups: tuple[tuple[int, ...], ...] | None = Field(
        None,
        min_length=1,
        description="the sharding groups as rank lists of one size, every rank once (a site's ranks with "
        "--shard-within site); None: the gpus_per_node workers of each node",
    )
    shard_weights: bool = Field(
        False,
        description="ZeRO-3 (FSDP): the sharding group's parameters rest sharded and are gathered per layer inside "
        "forward and backward (torch's fully_shard); False: every worker holds the whole model (FlexDeMo's step)",
    )
    compute_scale: float = Field(
        1.0, ge=1.0, le=100.0, description="a straggler: its compute and codec phases take this many times as long"
    )
    compute_phases: tuple[tuple[float, float], ...] = Field(
        (),
        description="a schedule's straggler phases: (seconds from the first measured step, compute scale), in "
        "time order",
    )
    rendezvous_file: str | None = Field(
        None,
        min_length=1,
        description="a file store every worker reaches (the emulated nodes share one host): the process group meets "
        "there, so joining pays no emulated round trips and puts no store traffic on the emulated links; gloo's "
        "connections between the workers still cross them. None: the TCP store on master_addr",
    )
    start_gate: str | None = Field(
        None,
        min_length=1,
        description="a file the worker waits for between joining the group and its first step: the orchestrator "
        "creates it once every worker has joined and it has read the trunks' counters, so the rendezvous's traffic "
        "is not booked on the steps; None: step at once",
    )

    quorum: QuorumSpec | None = Field(
        None, description="train through churn: a quorum per step or per outer sync (torchft); None: a fixed group"
    )

    @model_validator(mode="after")
    def _rank_in_world(self) -> WorkerSpec:
        if self.rank is not None and self.world_size is not None and self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is outside world size {self.world_size}")
        if self.world_size is not None and self.world_size % self.gpus_per_node:
            raise ValueError(f"world size {self.world_size} is not a multiple of gpus_per_node {self.gpus_per_node}")
        if self.shard_weights and not self.sharded:
            raise ValueError("shard_weights needs sharding groups of two or more ranks (shard_groups)")
        if self.shard_groups is not None:
            layout = Layout(self.shard_groups)  # unequal or overlapping groups: a ValueError, one line
            if self.world_size is not None and layout.world_size != self.world_size:
                raise ValueError(f"shard_groups hold {layout.world_size} ranks, the world has {self.world_size}")
        return self

    def layout(self) -> Layout:
        """Who shards with whom (needs a resolved world size): the spec's groups, else G consecutive ranks per node."""
        if self.shard_groups is not None:
            return Layout(self.shard_groups)
        return Layout.per_node(self.world_size // self.gpus_per_node, self.gpus_per_node)

    @property
    def sharded(self) -> bool:
        """Whether the sharded step runs: sharding groups of more than one rank."""
        return len(self.shard_groups[0]) > 1 if self.shard_groups is not None else self.gpus_per_node > 1

    @property
    def join_timeout_s(self) -> float:
        """The limit on joining the group and on the start gate."""
        return self.setup_timeout_s if self.setup_timeout_s is not None else self.timeout_s

    @property
    def total_steps(self) -> int:
        """Warmup plus measured steps."""
        return self.warmup_steps + self.steps

    def output_file(self) -> Path:
        """``out_path`` with ``{rank}`` filled in (needs a resolved rank)."""
        return Path(self.out_path.replace("{rank}", str(self.rank)))


class ResolvedSpec(BaseModel):
    """A spec with every rendezvous field known, and how they were obtained."""

    model_config = ConfigDict(frozen=True)

    spec: WorkerSpec
    init_method: Literal["tcp", "env"]

    @property
    def store_file(self) -> Path | None:
        """The rendezvous file, absolute (the worker opens it as a FileStore itself: no URL to misread), or None
        under torchrun (its store) or without one (the TCP store)."""
        if self.init_method == "env" or self.spec.rendezvous_file is None:
            return None
        return Path(self.spec.rendezvous_file).absolute()

    @property
    def url(self) -> str:
        """The ``init_method`` URL for ``init_process_group``.

        ``env://`` when the rank came from the environment: under torchrun the elastic agent
        already hosts the store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE), and only the env
        rendezvous knows to join it rather than start a second server on the same port. Otherwise
        ``file://`` where the spec names a rendezvous file (workers on one host), else ``tcp://``.
        """
        if self.init_method == "env":
            return "env://"
        if self.store_file is not None:
            return f"file://{self.store_file}"
        return f"tcp://{self.spec.master_addr}:{self.spec.master_port}"


def load_spec(path: str | Path) -> WorkerSpec:
    """Parse and validate a spec file; SpecError with a one-line message on any problem."""
    try:
        text = untrusted.read_text(path, untrusted.RUN_JSON)
    except untrusted.BadInput as exc:
        raise SpecError(f"cannot read spec: {exc}") from None
    try:
        return WorkerSpec.model_validate_json(text)
    except ValidationError as exc:
        raise SpecError(one_line(exc, prefix=f"spec {str(path)!r}: ")) from None


def resolve(spec: WorkerSpec, environ: Mapping[str, str] | None = None) -> ResolvedSpec:
    """Fill the rendezvous fields the spec leaves out from the environment (torchrun's variables)."""
    env = os.environ if environ is None else environ
    updates: dict[str, object] = {}
    # no store address to know: the group meets at a file, or each node is a group of its own (a quorum)
    meets_at_file = (spec.rendezvous_file is not None or spec.quorum is not None) and spec.rank is not None
    for field, (var, read) in _ENV_FIELDS.items():
        if meets_at_file and field in ("master_addr", "master_port"):
            continue
        if getattr(spec, field) is None:
            if not env.get(var):
                raise SpecError(
                    f"spec leaves {field} out and {var} is not set (launch with torchrun or set it in the spec)"
                )
            try:
                updates[field] = read(var, env)
            except environment.BadEnvironment as exc:
                raise SpecError(str(exc)) from None
    try:
        full = WorkerSpec.model_validate({**spec.model_dump(), **updates})
    except ValidationError as exc:
        raise SpecError(one_line(exc, prefix="environment: ", echo=False)) from None
    return ResolvedSpec(spec=full, init_method="env" if "rank" in updates else "tcp")
