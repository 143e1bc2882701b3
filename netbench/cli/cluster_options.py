"""The network options of `probe`, `run`, `exec` and `plan` (one table), turned into a validated ClusterSpec."""

from __future__ import annotations

from typing import Any

import pydantic

from netbench.cli.errors import UserError
from netbench.cli.fields import FieldOption, table
from netbench.emulation.spec import MAX_EMULATED_NODES, ClusterSpec, emulation_problem
from netbench.emulation.tcpsettings import check_tcp_options
from netbench.units import UnitError, parse_fraction, parse_rate, parse_time
from netbench.validation import one_line


def _net(field: str, *decls: str, cli_type: Any, default: Any, help: str) -> FieldOption:
    return FieldOption(None, field, decls, cli_type, cli_default=default, help=help)


# The network options of `run`, `exec`, `probe` and `plan`: one declaration each, one meaning everywhere (a command
# adds only its range or a comma list, as a note: `CLUSTER["nodes"].option(note=...)`).
CLUSTER = table(
    _net(
        "nodes",
        "--nodes",
        "-n",
        cli_type=int,
        default=2,
        help="Nodes (machines) in the cluster; with --gpus-per-node G each runs G workers: workers = nodes x G.",
    ),
    _net("bw", "--bw", cli_type=str, default="100mbit", help="Link rate both ways, tc units."),
    _net("up", "--up", cli_type=str | None, default=None, help="Uplink (node egress) rate; overrides --bw."),
    _net(
        "down", "--down", cli_type=str | None, default=None, help="Downlink (switch-port egress) rate; overrides --bw."
    ),
    _net(
        "delay",
        "--delay",
        cli_type=str,
        default="0ms",
        help="One-way delay added on each node's uplink (e.g. 20ms): on the star, the one-way delay between two nodes.",
    ),
    _net(
        "jitter",
        "--jitter",
        cli_type=str,
        default="0ms",
        help="Std. deviation of the uplink delay (packets stay in order).",
    ),
    _net("loss", "--loss", cli_type=str, default="0%", help="Uplink packet loss (e.g. 0.1%)."),
    _net(
        "offload",
        "--offload",
        cli_type=str,
        default="auto",
        help="TSO/GSO/GRO on veths: auto (off up to 2.5gbit), on, off.",
    ),
    _net(
        "engine",
        "--engine",
        cli_type=str,
        default="auto",
        help="Delay/loss engine: auto (netem if present), netem, delayline.",
    ),
    _net(
        "tcp_cc",
        "--tcp-cc",
        cli_type=str | None,
        default=None,
        help="TCP congestion control of the nodes (e.g. cubic, bbr, reno) [default: the host's].",
    ),
    _net(
        "tcp_wmem_max",
        "--tcp-wmem-max",
        cli_type=int | None,
        default=None,
        help="Largest TCP send/receive buffer of the nodes in bytes (tcp_wmem/tcp_rmem max) [default 64 MiB].",
    ),
    _net(
        "no_slow_start_after_idle",
        "--no-slow-start-after-idle",
        cli_type=bool,
        default=False,
        help="Keep the congestion window over idle periods (tcp_slow_start_after_idle=0).",
    ),
    _net(
        "topology",
        "--topology",
        cli_type=str | None,
        default=None,
        help="The network: star (default), sites, racks, or a topology TOML file.",
    ),
    _net(
        "sites",
        "--sites",
        cli_type=int | None,
        default=None,
        help="--topology sites: how many sites share the nodes [default 2].",
    ),
    _net(
        "racks",
        "--racks",
        cli_type=int | None,
        default=None,
        help="--topology racks: how many racks share the nodes [default 2].",
    ),
    _net(
        "wan_bw",
        "--wan-bw",
        cli_type=str | None,
        default=None,
        help="--topology sites: rate of each WAN link, both ways (needed with sites, e.g. 100mbit).",
    ),
    _net(
        "wan_delay",
        "--wan-delay",
        cli_type=str | None,
        default=None,
        help="--topology sites: one-way delay of each WAN link [default 0ms].",
    ),
    _net(
        "oversubscription",
        "--oversubscription",
        cli_type=float | None,
        default=None,
        help="--topology racks: access capacity over each rack's uplink [default 1].",
    ),
    _net(
        "rank_order",
        "--rank-order",
        cli_type=str,
        default="topology",
        help="Which node each rank runs on: topology (site by site), interleaved, or 0,2,1,3.",
    ),
)
EMULATED_NODES = f" (2-{MAX_EMULATED_NODES})"  # run's, exec's and probe's range of --nodes
EMULATED_BW = " (10mbit-10gbit)"


def emulated(field: str) -> Any:
    """The typer option of the network field ``field`` as the emulating commands (`run`, `exec`, `probe`) take it."""
    return CLUSTER[field].option(note={"nodes": EMULATED_NODES, "bw": EMULATED_BW}.get(field))


# ClusterSpec field -> the option that sets it, so validation errors name what the user typed (the
# downlink takes only a rate: delay, jitter and loss sit on the uplink)
OPTION_NAMES: dict[str, str] = {
    "nodes": CLUSTER["nodes"].name,
    "up.rate_bps": f"{CLUSTER['up'].name}/{CLUSTER['bw'].name}",
    "down.rate_bps": f"{CLUSTER['down'].name}/{CLUSTER['bw'].name}",
    "up.delay_s": CLUSTER["delay"].name,
    "up.jitter_s": CLUSTER["jitter"].name,
    "up.loss": CLUSTER["loss"].name,
    "offload": CLUSTER["offload"].name,
    "engine": CLUSTER["engine"].name,
    "tcp.cc": CLUSTER["tcp_cc"].name,
    "tcp.wmem_max": CLUSTER["tcp_wmem_max"].name,
    "tcp.slow_start_after_idle": CLUSTER["no_slow_start_after_idle"].name,
}


def _parse(option: str, parser, text: str) -> float:
    try:
        return parser(text)
    except UnitError as exc:
        raise UserError(f"{option}: {exc}") from None


def build_cluster_spec(
    nodes: int,
    bw: str,
    up: str | None = None,
    down: str | None = None,
    delay: str = "0ms",
    jitter: str = "0ms",
    loss: str = "0%",
    offload: str = "auto",
    engine: str = "auto",
    tcp_cc: str | None = None,
    tcp_wmem_max: int | None = None,
    no_slow_start_after_idle: bool = False,
) -> ClusterSpec:
    """Parse tc-style units and validate ranges; any problem is one UserError line."""
    up_rate = _parse("--up" if up else "--bw", parse_rate, up or bw)
    down_rate = _parse("--down" if down else "--bw", parse_rate, down or bw)
    uplink = {
        "rate_bps": up_rate,
        "delay_s": _parse("--delay", parse_time, delay),
        "jitter_s": _parse("--jitter", parse_time, jitter),
        "loss": _parse("--loss", parse_fraction, loss),
    }
    tcp = {"cc": tcp_cc, "wmem_max": tcp_wmem_max, "slow_start_after_idle": False if no_slow_start_after_idle else None}
    try:
        spec = ClusterSpec(
            nodes=nodes, up=uplink, down={"rate_bps": down_rate}, offload=offload, engine=engine, tcp=tcp
        )
    except pydantic.ValidationError as exc:
        names = dict(OPTION_NAMES)
        names["up.rate_bps"] = "--up" if up else "--bw"
        names["down.rate_bps"] = "--down" if down else "--bw"
        raise UserError(one_line(exc, names, options=True)) from None
    problem = check_tcp_options(spec.tcp)
    if problem:
        raise UserError(problem)
    return spec


def check_engine(spec: ClusterSpec) -> None:
    """Refuse, before anything is built, impairments this host cannot emulate (call once privileged).

    The capability probe needs root (or the user namespace), so this runs after the privilege
    step rather than with the other checks; it builds and removes one throwaway namespace.
    """
    if not spec.impaired:
        return
    from netbench.emulation.capabilities import detect

    caps = detect()
    if spec.engine == "netem" and not caps.netem:
        raise UserError(
            "--engine: netem is not available here (this kernel has no sch_netem); use --engine auto or delayline"
        )
    if spec.engine == "delayline" and not caps.delay_line:
        raise UserError(f"--engine: the delay line does not work here ({caps.delay_line_reason})")
    if not (caps.netem or caps.delay_line):
        raise UserError(
            f"--delay/--jitter/--loss: need netem or the delay line, and neither works here ({caps.delay_line_reason})"
        )


def with_topology(
    spec: ClusterSpec,
    topology: str | None,
    sites: int | None = None,
    racks: int | None = None,
    wan_bw: str | None = None,
    wan_delay: str | None = None,
    oversubscription: float | None = None,
    rank_order: str = "topology",
) -> ClusterSpec:
    """``spec`` on the network the topology options describe (its node count from the topology), ranks placed as asked.

    Every problem (a bad file, a preset that does not divide the nodes, too many nodes for this host) is one UserError.
    """
    from netbench.topology.file import TopologyError
    from netbench.topology.options import topology_from_options
    from netbench.topology.placement import PlacementError, parse_rank_order

    try:
        graph = topology_from_options(
            topology or "star", spec.nodes, spec.up, spec.down, sites, racks, wan_bw, wan_delay, oversubscription
        )
        order = parse_rank_order(rank_order)
    except (TopologyError, PlacementError) as exc:
        raise UserError(str(exc)) from None
    problem = emulation_problem(graph)
    if problem:
        raise UserError(f"--topology: {problem}")
    try:
        return ClusterSpec.model_validate(
            {
                **spec.model_dump(),
                "nodes": graph.node_count,
                "topology": graph,
                "rank_order": order,
            }
        )
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, {"rank_order": "--rank-order", "nodes": "--topology"}, options=True)) from None
