"""What a plan is asked: :class:`PlanRequest`, every value checked before anything is computed or measured.

``netbench plan`` reads its options into one (:data:`OPTION_NAMES` names the option a field comes from, so a bad value
is one line naming it); a library caller builds one directly. Rates are bits per second, times seconds; ``nodes`` counts
machines, each running ``gpus_per_node`` workers. Checks that need the shapes, the graph or the replicators' payload
formulas are :func:`netbench.planning.inputs.plan_inputs`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netbench import untrusted
from netbench.declarations.config import ReplicatorConfig
from netbench.model.accelerators import Accelerator, accelerator, accelerators
from netbench.model.backends import BACKEND_SETTINGS
from netbench.model.collectives import ALGORITHM, ALGORITHMS
from netbench.model.compute import COMPUTE_SETTINGS
from netbench.model.framing import FRAMING_SETTINGS
from netbench.model.goodput import CHURN_SETTINGS, MAX_RUN_CHANGES, MIN_RUN_DRAWS, run_draws
from netbench.model.nccl import SOCKET_VENDOR_DEFAULTS
from netbench.model.nccl_tests import NcclFit
from netbench.model.parallelism import PARALLEL_SETTINGS, SHARD_ALIASES, SHARDINGS, Layout
from netbench.model.planner import BW_RANGE_BPS
from netbench.model.schemes import Scheme, SchemeSettings, build_scheme
from netbench.model.steptime import MAX_PLANNED_WORKERS, Scenario
from netbench.model.utilization import DEFAULT_TARGETS, UTILIZATION_SETTINGS
from netbench.safe_files import UnsafeOutput, check_folder
from netbench.settings import Setting, SettingError
from netbench.tcp import STOCK_LINUX, TcpSettings
from netbench.topology.graph import MIN_NODES
from netbench.topology.presets import NODES, TOPOLOGY
from netbench.units import format_rate, parse_rate, parse_time

__all__ = ["PlanRequest", "GpuPlanOptions", "OPTION_NAMES", "MAX_PLANNED_DELAY_S", "KNOWN_CC", "BACKENDS"]

MAX_PLANNED_DELAY_S = 10.0  # plan's --delay bound (an emulated link's is emulation.spec.MAX_EMULATED_DELAY_S)
KNOWN_CC = ("cubic", "reno", "bbr")  # what the model distinguishes: bbr paces, the others are window-based
BACKENDS = ("gloo", "nccl", "ideal")
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
MAX_TOKENS = 1e16
MAX_TOKENS_PER_STEP = 1e9
MAX_BUCKET_MB = 4096

# field -> its declaration, where the model declares the option (its range bounds the request's field too)
DECLARED: dict[str, Setting] = {
    s.field: s
    for table in (
        COMPUTE_SETTINGS,
        BACKEND_SETTINGS,
        UTILIZATION_SETTINGS,
        FRAMING_SETTINGS,
        TOPOLOGY,
        PARALLEL_SETTINGS,
        CHURN_SETTINGS,
    )
    for s in table.values()
}


# field -> the option it comes from: the model's and the topology's settings name their own, the rest are plan's
OPTION_NAMES: dict[str, str] = {field: s.name for field, s in DECLARED.items()} | {
    ALGORITHM.field: ALGORITHM.name,
    NODES.field: NODES.name,
    "bw": "--bw",
    "up": "--up",
    "down": "--down",
    "delay": "--delay",
    "compute_ms": "--compute-ms",
    "gpus_per_node": "--gpus-per-node",
    "intra_bw": "--intra-bw",
    "bucket_mb": "--bucket-mb",
    "tcp_cc": "--tcp-cc",
    "tcp_wmem_max": "--tcp-wmem-max",
    "shapes": "--shapes",
    "params": "--params",
    "schemes": "--replicator",
}


def _default(table: Any, field: str) -> Any:
    return table[field].default_for("plan")


def _rate(value: Any) -> float:
    """A rate in bits/s (text in any of :func:`parse_rate`'s units), within the planner's range."""
    bps = parse_rate(value) if isinstance(value, str) else float(value)
    lo, hi = BW_RANGE_BPS
    if not lo <= bps <= hi:
        raise ValueError(f"must be between {format_rate(lo)} and {format_rate(hi)}, got {str(value)!r}")
    return bps


class PlanRequest(BaseModel):
    """One plan: the model (shapes or a parameter count), the cluster, the replicators and the questions asked."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    schemes: tuple[Scheme, ...] = Field(
        default_factory=lambda: (build_scheme(ReplicatorConfig.model_fields["name"].default, SchemeSettings()),)
    )
    shapes: str | None = None  # a preset or a shapes file [default gpt2-small:blocks=2]
    params: str | None = None  # a parameter count instead of shapes (synthetic square matrices)
    nodes: tuple[int, ...] | None = None  # machines; None: 2, or what a topology file holds
    bw: float = Scenario.model_fields["up_bps"].default  # the model's default link
    up: float | None = None
    down: float | None = None
    delay: float = 0.0  # one-way, between two nodes
    compute_ms: float = 0.0
    gpus_per_node: int = 1
    intra_bw: float | None = None  # the node's intra-node link, bits/s, shared by its workers
    bucket_mb: float | None = None  # None: auto, sized from the link
    algorithm: str = ALGORITHM.default_for("plan")
    mtu: int = _default(FRAMING_SETTINGS, "mtu")
    acks_per_segment: float | None = None
    tcp_cc: str = STOCK_LINUX.cc
    tcp_wmem_max: int = STOCK_LINUX.tcp_wmem_max
    no_slow_start_after_idle: bool = not STOCK_LINUX.slow_start_after_idle
    topology: str | None = None
    sites: int | None = None
    racks: int | None = None
    wan_bw: str | None = None
    wan_delay: str | None = None
    oversubscription: float | None = None
    rank_order: str = _default(TOPOLOGY, "rank_order")
    backend: str = _default(BACKEND_SETTINGS, "backend")
    accelerator_name: str | None = None
    mfu: float = _default(COMPUTE_SETTINGS, "mfu")
    batch: int | None = None
    seq_len: int = _default(COMPUTE_SETTINGS, "seq_len")
    tokens_per_step: str | None = None
    layers: int | None = None
    target_utilization: str | None = None
    tokens: str | None = None
    figure: Path | None = None
    transport: str = _default(BACKEND_SETTINGS, "transport")
    channels: int | None = None
    socket_threads: int = _default(BACKEND_SETTINGS, "socket_threads")
    socks_per_thread: int = _default(BACKEND_SETTINGS, "socks_per_thread")
    # the nodes' NICs: how many, each at --bw (None: one, or as many as a fit at NCCL's picks describes), and whose
    # (where --socket-threads and --socks-per-thread are left at NCCL's generic 0 and 1, NCCL's own for the vendor)
    nics: int | None = None
    nic_vendor: str = _default(BACKEND_SETTINGS, "nic_vendor")
    nccl_calibration: Path | None = None  # where nccl_fit was read from, as the document names it
    nccl_fit: NcclFit | None = None  # collective costs fitted to nccl-tests logs (:func:`read_nccl_fit`)
    # how the GPUs split the model (netbench.model.parallelism): plain data parallelism by default
    tp: int = _default(PARALLEL_SETTINGS, "tp")
    pp: int = _default(PARALLEL_SETTINGS, "pp")
    microbatches: int | None = None
    virtual_stages: int = _default(PARALLEL_SETTINGS, "virtual_stages")
    shard: str = _default(PARALLEL_SETTINGS, "shard")
    shard_nodes: int | None = None
    # churn: the mean time between failures per node and the time a node stays away (seconds; None: no churn)
    mtbf: float | None = None
    away: float | None = None
    # a run of churn_for seconds from its first measured step (None: the long run), drawn with churn_seed (None: its
    # spread over seeds)
    churn_for: float | None = None
    churn_seed: int | None = None
    # the run's steps (None: it ends at churn_for): it trains on after churn_for, every node present, until they commit
    churn_steps: int | None = None
    # a GPU backend prices each replicator's encode and decode (False: collectives and compute alone, what published
    # utilisation simulators assume; the command always prices it)
    codec: bool = True

    @model_validator(mode="before")
    @classmethod
    def _declared_bounds(cls, values: Any) -> Any:
        """Each field an option declares is held to that declaration's range, as the command line holds it."""
        if isinstance(values, dict):
            for name, value in values.items():
                if name in DECLARED and value is not None and not isinstance(value, str):
                    DECLARED[name].check_typed(value)
        return values

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> Any:
        if value is None:
            return None
        items = [value] if isinstance(value, int) else value
        items = [t.strip() for t in items.split(",")] if isinstance(items, str) else list(items)
        counts = []
        for item in filter(lambda t: t != "", items):
            try:
                count = float(item)
            except (TypeError, ValueError):
                raise ValueError(
                    f"expected whole numbers between 1 and {MAX_PLANNED_WORKERS} (e.g. 2,4,8), got {item!r}"
                ) from None
            if count != int(count) or not 1 <= count <= MAX_PLANNED_WORKERS:
                raise ValueError(f"must be whole numbers between 1 and {MAX_PLANNED_WORKERS}, got {str(item)!r}")
            counts.append(int(count))
        if not counts:
            raise ValueError(f"expected whole numbers between 1 and {MAX_PLANNED_WORKERS}, got {value!r}")
        return tuple(dict.fromkeys(counts))

    @field_validator("bw", "up", "down", "intra_bw", mode="before")
    @classmethod
    def _rates(cls, value: Any) -> Any:
        return None if value is None else _rate(value)

    @field_validator("delay", mode="before")
    @classmethod
    def _delay(cls, value: Any) -> float:
        seconds = parse_time(value) if isinstance(value, str) else float(value)
        if not 0 <= seconds <= MAX_PLANNED_DELAY_S:
            raise ValueError(f"must be between 0ms and {MAX_PLANNED_DELAY_S:g}s, got {str(value)!r}")
        return seconds

    @field_validator("mtbf", "away", "churn_for", "churn_seed", "churn_steps", mode="before")
    @classmethod
    def _churn(cls, value: Any, info: Any) -> Any:
        if value is None:
            return None
        setting = CHURN_SETTINGS[info.field_name]
        try:
            return setting.parse(value)
        except SettingError as exc:
            raise ValueError(str(exc).removeprefix(f"{setting.name}: ")) from None

    @field_validator("compute_ms")
    @classmethod
    def _compute(cls, value: float) -> float:
        if not (math.isfinite(value) and 0 <= value <= 1e7):
            raise ValueError(f"must be between 0 and 1e7, got {value:g}")
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus(cls, value: int) -> int:
        if not 1 <= value <= MAX_PLANNED_WORKERS // 2:
            raise ValueError(f"must be between 1 and {MAX_PLANNED_WORKERS // 2}, got {value}")
        return value

    @field_validator("bucket_mb")
    @classmethod
    def _bucket(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_BUCKET_MB):
            raise ValueError(f"must be between 0 and {MAX_BUCKET_MB}, got {value:g}")
        return value

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, value: str) -> str:
        algo = value.strip().lower().replace("-", "_")
        if algo not in ALGORITHMS:
            raise ValueError(f"choose from ring, tree, halving-doubling, got {value!r}")
        return algo

    @field_validator("tcp_cc")
    @classmethod
    def _cc(cls, value: str) -> str:
        if value.strip().lower() not in KNOWN_CC:
            raise ValueError(f"choose from {', '.join(KNOWN_CC)}, got {value!r}")
        return value.strip().lower()

    @field_validator("tcp_wmem_max")
    @classmethod
    def _wmem(cls, value: int) -> int:
        if not 65536 <= value <= 1 << 30:
            raise ValueError(f"must be between 65536 and {1 << 30} bytes, got {value}")
        return value

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        if value.strip().lower() not in BACKENDS:
            raise ValueError(f"choose from {', '.join(BACKENDS)}, got {value!r}")
        return value.strip().lower()

    @field_validator("accelerator_name")
    @classmethod
    def _accelerator(cls, value: str | None) -> str | None:
        return None if value is None else accelerator(value).name

    @field_validator("tokens_per_step", "tokens")
    @classmethod
    def _counts(cls, value: str | None, info: Any) -> str | None:
        hi = MAX_TOKENS_PER_STEP if info.field_name == "tokens_per_step" else MAX_TOKENS
        _positive(value, hi)
        return value

    @field_validator("target_utilization")
    @classmethod
    def _targets(cls, value: str | None) -> str | None:
        _targets(value)
        return value

    @field_validator("transport")
    @classmethod
    def _transport(cls, value: str) -> str:
        if value.strip().lower() not in ("socket", "rdma"):
            raise ValueError(f"choose from socket, rdma, got {value!r}")
        return value.strip().lower()

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: str) -> str:
        name = value.strip().lower()
        name = SHARD_ALIASES.get(name, name)
        if name not in SHARDINGS:
            raise ValueError(f"choose from {', '.join(SHARDINGS)} or fsdp, got {value!r}")
        return name

    @field_validator("figure")
    @classmethod
    def _figure(cls, path: Path | None) -> Path | None:
        if path is None:
            return None
        if path.suffix.lower() not in FIGURE_SUFFIXES:
            raise ValueError(f"name a {', '.join(FIGURE_SUFFIXES)} file, got {str(path)!r}")
        if path.exists() and path.is_dir():
            raise ValueError(f"{str(path)!r} is a directory")
        try:
            check_folder(path.parent if str(path.parent) else Path("."))
        except UnsafeOutput as exc:
            raise ValueError(str(exc)) from None
        return path

    @field_validator("nic_vendor")
    @classmethod
    def _nic_vendor(cls, value: str) -> str:
        if value.strip().lower() not in SOCKET_VENDOR_DEFAULTS:
            raise ValueError(f"choose from {', '.join(SOCKET_VENDOR_DEFAULTS)}, got {value!r}")
        return value.strip().lower()

    def socket_streams(self) -> tuple[int, int]:
        """NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD: as given, else (at NCCL's generic 0 and 1) NCCL's own for
        the NICs' vendor."""
        if (self.socket_threads, self.socks_per_thread) == SOCKET_VENDOR_DEFAULTS["other"]:
            return SOCKET_VENDOR_DEFAULTS[self.nic_vendor]
        return self.socket_threads, self.socks_per_thread

    @model_validator(mode="after")
    def _together(self) -> PlanRequest:
        """Checks across options, each one line naming the option."""
        if self.backend == "nccl" and self.accelerator_name is None:
            raise ValueError(f"--backend nccl: name the GPUs with --accelerator ({', '.join(accelerators())})")
        if self.batch is not None and self.tokens_per_step is not None:
            raise ValueError("--batch and --tokens-per-step are exclusive: give sequences per step or tokens per step")
        if self.tokens is not None and self.batch is None and self.tokens_per_step is None:
            raise ValueError("--tokens: needs the batch (--batch or --tokens-per-step) to count the steps")
        if (self.nccl_calibration is not None or self.nccl_fit is not None) and self.backend != "nccl":
            raise ValueError("--nccl-calibration: fitted NCCL costs are for --backend nccl")
        if self.shapes and self.params:
            raise ValueError("--shapes and --params are exclusive: give a shapes preset/file or a parameter count")
        if self.gpus_per_node > 1 and self.intra_bw is None and self.backend == "gloo":
            raise ValueError(
                "--intra-bw: needed with --gpus-per-node > 1 (the node's fast intra-node link, e.g. 800gbit)"
            )
        if self.away is not None and self.mtbf is None:
            raise ValueError("--away: the time away of a churn: give --mtbf too")
        if self.churn_for is not None and self.mtbf is None:
            raise ValueError("--for: the length of a run through churn: give --mtbf too")
        if self.churn_seed is not None and self.churn_for is None:
            raise ValueError("--seed: the draw of a run of --for's length: give --for too")
        if self.churn_steps is not None and self.churn_for is None:
            raise ValueError("--steps: the steps of a run whose churn lasts --for: give --for too")
        if self.churn_for is not None and self.mtbf is not None:
            for n in self.node_counts:
                if run_draws(n, self.mtbf, self.away_s, self.churn_for) == 0:
                    raise ValueError(
                        f"--for: a run of {self.churn_for:g} s on {n} nodes draws more than "
                        f"{MAX_RUN_CHANGES // MIN_RUN_DRAWS} leaves and joins; a run that long is plan's long-run "
                        "figure (leave --for out)"
                    )
        if self.mtbf is not None and self.backend != "gloo":
            raise ValueError("--mtbf: churn is priced over gloo (the replicators that train through it run on gloo)")
        self._check_layout()
        for n in self.node_counts:
            if n < MIN_NODES and self.backend == "gloo":
                raise ValueError(
                    f"--nodes: gloo plans {MIN_NODES} nodes or more (--backend nccl or ideal plans one node of "
                    "--gpus-per-node GPUs)"
                )
            if n * self.gpus_per_node < MIN_NODES:
                raise ValueError(f"--nodes: {n} node of {self.gpus_per_node} GPU has no peer to synchronise with")
            if n * self.gpus_per_node > MAX_PLANNED_WORKERS:
                raise ValueError(
                    f"--gpus-per-node: {n} nodes x {self.gpus_per_node} = {n * self.gpus_per_node} workers; "
                    f"the model plans at most {MAX_PLANNED_WORKERS}"
                )
        return self

    @property
    def layout(self) -> Layout:
        """How the GPUs split the model."""
        sites = None
        if self.topology == "sites" and self.shard == "hsdp" and self.backend != "gloo":
            sites = self.sites or TOPOLOGY["sites"].default_for("plan")
        return Layout(self.tp, self.pp, self.microbatches, self.virtual_stages, self.shard, self.shard_nodes, sites)

    @property
    def wan(self) -> tuple[float, float] | None:
        """Each WAN link between sites (bits/s, one-way seconds) where a GPU layout shards within sites."""
        if self.layout.sites is None:
            return None
        rate, delay = self.wan_bw or TOPOLOGY["wan_bw"].default_for("plan"), self.wan_delay
        delay = delay or TOPOLOGY["wan_delay"].default_for("plan")
        return _rate(rate), parse_time(delay) if isinstance(delay, str) else float(delay)

    def _check_layout(self) -> None:
        """The layout against the backend, the replicators, the batch and every planned cluster."""
        layout = self.layout
        if layout.plain and layout.microbatches is None and self.shard_nodes is None and self.virtual_stages == 1:
            return
        if self.backend == "gloo":
            raise ValueError("--tp, --pp, --shard: a parallel layout is planned on GPUs (--backend nccl or ideal)")
        if self.shard_nodes is not None and self.shard != "hsdp":
            raise ValueError("--shard-nodes: sizes the shard groups of --shard hsdp")
        if self.shard_nodes is not None and layout.sites:
            raise ValueError("--shard-nodes: with --topology sites a shard group is a site's nodes; leave it out")
        if self.virtual_stages > 1 and self.pp == 1:
            raise ValueError("--virtual-stages: interleaves the stages of a pipeline (give --pp)")
        if (self.tp > 1 or self.pp > 1) and self.batch is None and self.tokens_per_step is None:
            raise ValueError("--tp, --pp: the activations they move need the batch (--batch or --tokens-per-step)")
        for n in self.node_counts:
            layout.groups(n * self.gpus_per_node, self.gpus_per_node)

    @property
    def node_counts(self) -> list[int]:
        """Machines per planned cluster (each runs ``gpus_per_node`` workers)."""
        return list(self.nodes or (NODES.default,))

    @property
    def away_s(self) -> float:
        """The time away a churn prices: ``--away``, else the default ``--churn`` draws with."""
        return self.away if self.away is not None else CHURN_SETTINGS["away"].default

    @property
    def up_bps(self) -> float:
        return self.up if self.up is not None else self.bw

    @property
    def down_bps(self) -> float:
        return self.down if self.down is not None else self.bw

    @property
    def intra_bits_per_s(self) -> float | None:
        """One worker's share of the node's intra-node link, as a run's model takes it."""
        return self.intra_bw / self.gpus_per_node if self.intra_bw else None

    @property
    def tcp(self) -> TcpSettings:
        """The TCP settings plan assumes for the nodes (``--tcp-wmem-max`` sets both buffers, as ``run``'s)."""
        wmem = self.tcp_wmem_max
        buffers = {} if wmem == STOCK_LINUX.tcp_wmem_max else {"tcp_wmem_max": wmem, "tcp_rmem_max": wmem}
        return STOCK_LINUX.model_copy(
            update={"cc": self.tcp_cc, "slow_start_after_idle": not self.no_slow_start_after_idle, **buffers}
        )

    def gpu(self) -> GpuPlanOptions:
        """The accelerator, backend and utilisation options, resolved (the nccl-tests fit read)."""
        per_step = _positive(self.tokens_per_step, MAX_TOKENS_PER_STEP)
        if self.batch is not None:
            per_step = float(self.batch * self.seq_len)
        return GpuPlanOptions(
            backend=self.backend,
            accelerator=accelerator(self.accelerator_name) if self.accelerator_name else None,
            mfu=self.mfu,
            tokens_per_step=per_step,
            seq_len=self.seq_len,
            layers=self.layers,
            targets=_targets(self.target_utilization),
            tokens=_positive(self.tokens, MAX_TOKENS),
            figure=self.figure,
            transport=self.transport,
            channels=self.channels,
            socket_threads=self.socket_streams()[0],
            socks_per_thread=self.socket_streams()[1],
            nics=self.nics,
            nccl_fit=self.nccl_fit,
            nccl_fit_path=str(self.nccl_calibration) if self.nccl_calibration else None,
            codec=self.codec,
            layout=self.layout,
            wan=self.wan,
        )


@dataclass(frozen=True)
class GpuPlanOptions:
    """What the GPU options ask for, resolved."""

    backend: str
    accelerator: Accelerator | None
    mfu: float
    tokens_per_step: float | None
    seq_len: int
    layers: int | None
    targets: tuple[float, ...]
    tokens: float | None
    figure: Path | None
    transport: str
    channels: int | None
    socket_threads: int
    socks_per_thread: int
    nics: int | None
    nccl_fit: NcclFit | None
    nccl_fit_path: str | None
    codec: bool = True
    layout: Layout = Layout()
    wan: tuple[float, float] | None = None  # (bits/s, one-way s) between sites, where the layout shards within them

    @property
    def asked(self) -> bool:
        """Whether any of these options was used (else plan's output is exactly gloo's)."""
        return (
            self.backend != "gloo"
            or self.accelerator is not None
            or bool(self.targets)
            or self.tokens is not None
            or self.figure is not None
        )


def _positive(text: str | None, hi: float) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number such as 1e12, got {text!r}") from None
    if not (math.isfinite(value) and 1 <= value <= hi):
        raise ValueError(f"must be between 1 and {hi:.0e}, got {text!r}")
    return value


def _targets(text: str | None) -> tuple[float, ...]:
    if text is None:
        return ()
    if text.strip().lower() == "default":
        return DEFAULT_TARGETS
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        try:
            value = float(item)
        except ValueError:
            raise ValueError(f"expected fractions such as 0.5,0.9,0.99, got {item!r}") from None
        if not 0 < value < 1:
            raise ValueError(f"each must be between 0 and 1 (exclusive), got {item!r}")
        out.append(value)
    if not out or len(out) > 20:
        raise ValueError(f"one to 20 fractions, got {text!r}")
    return tuple(dict.fromkeys(out))


def read_nccl_fit(path: Path | None) -> NcclFit | None:
    """A fit of nccl-tests logs (``netbench calibrate --from-nccl-tests``); :class:`untrusted.BadInput` or a
    validation error where the file is not one."""
    if path is None:
        return None
    return NcclFit.model_validate(untrusted.read_json(path, untrusted.CALIBRATION))
