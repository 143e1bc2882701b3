"""`netbench worker`: this host's rank of a run on real machines, launched by torchrun on every host.

The same workload and replicator options as `netbench run`; the network is whatever joins the
hosts, measured on ``--iface`` and shaped there only when ``--bw``/``--up`` (and ``--delay``...)
ask for it, or as ``--topology FILE``'s paths between the hosts' nodes (one shaper where every path is the
host's uplink, else a class per peer). Rank 0 writes the run directory `netbench run` would (see
orchestrator/multihost/torchrun.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from netbench.cli import cluster_options as copt
from netbench.cli import run_options as ropt
from netbench.cli import sharding_options
from netbench.cli.errors import UserError
from netbench.cli.fields import (
    FROM_FIELDS,
    REPLICATOR,
    RUN,
    TRAINING_REPLICATOR_FIELDS,
    WORKLOAD,
    Settings,
    expand,
    group,
)
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.privileges import require_torch
from netbench.cli.run_config import build_run_config
from netbench.emulation.hostshaping import HostShapingError
from netbench.emulation.spec import NETWORK, DirectionSpec
from netbench.orchestrator.multihost.host_topology import HostTopology, HostTopologyError
from netbench.reports.terminal import for_terminal, make_console, print_summary
from netbench.topology import PlacementError, TopologyError, load_topology, parse_rank_order
from netbench.topology.presets import TOPOLOGY
from netbench.worker.hard_exit import exit_without_teardown
from netbench.worker.spec import SpecError

if TYPE_CHECKING:
    from netbench.orchestrator.multihost.host_topology import HostTopology

console = make_console(stderr=True)


def _host_topology(
    file: Path | None,
    rank_order: str,
    world_size: int,
    rank: int,
    g: int,
    iface: str,
    shaping: DirectionSpec | None,
    shaped: bool,
) -> HostTopology:
    """This host's node of ``--topology FILE`` and its paths, checked against torchrun's world; without it, the
    hosts' star (shaped as ``shaping`` asks, or as they are)."""

    from netbench.orchestrator.multihost.torchrun import (  # late: keeps pandas, scapy off this module's import
        star_of_hosts,
    )  # late: keeps pandas, scapy off this module's import

    if file is None:
        if rank_order != "topology":
            raise UserError(f"{TOPOLOGY['rank_order'].name}: needs {TOPOLOGY['topology'].name}")
        return star_of_hosts(world_size // g, g, rank, iface, shaping)
    if shaped:
        raise UserError("--topology: sets every path's rate and delay; drop --bw/--up/--delay/--jitter/--loss")
    try:
        host = HostTopology.for_rank(load_topology(file), parse_rank_order(rank_order), world_size, g, rank)
        host.paths()
    except (TopologyError, PlacementError, HostTopologyError) as exc:
        raise UserError(str(exc)) from None
    local = sharding_options.local_ranks()
    if local != g:
        raise UserError(
            f"--topology: torchrun runs {local} ranks on this host, each its own node; a topology needs one node "
            "per host: --nproc-per-node 1, or --shard-within host"
        )
    return host


def _shaping(
    bw: str | None, up: str | None, delay: str | None, jitter: str | None, loss: str | None
) -> DirectionSpec | None:
    """The egress shaping asked for, or None: without --bw/--up nothing on the host is touched."""
    if not (bw or up):
        if delay or jitter or loss:
            raise UserError("--delay/--jitter/--loss need --bw (netem sits above the rate shaper)")
        return None
    rate = up or bw
    given = {"nodes": 2, "bw": rate, "up": up, "delay": delay, "jitter": jitter, "loss": loss}
    return copt.cluster_spec({field: value for field, value in given.items() if value is not None}).up


@expand(
    rep_settings=group(REPLICATOR, *TRAINING_REPLICATOR_FIELDS),
    work_settings=group(WORKLOAD, "kind", "shapes", "compute_ms"),
)
def worker(
    iface: str = typer.Option(
        ...,
        "--iface",
        envvar="GLOO_SOCKET_IFNAME",
        show_envvar=True,
        help="Interface between the hosts: gloo's sockets, the byte counters, and shaping.",
    ),
    replicator: str = REPLICATOR["name"].option(),
    bw: str | None = option(NETWORK["bw"], "worker"),
    up: str | None = option(NETWORK["up"], "worker"),
    delay: str | None = option(NETWORK["delay"], "worker"),
    jitter: str | None = option(NETWORK["jitter"], "worker"),
    loss: str | None = option(NETWORK["loss"], "worker"),
    topology_file: Path | None = option(TOPOLOGY["topology"], "worker"),
    rank_order: str = option(TOPOLOGY["rank_order"], "worker"),
    steps: int = RUN["steps"].option(),
    warmup: int = RUN["warmup_steps"].option(),
    rep_settings: Settings = FROM_FIELDS,
    work_settings: Settings = FROM_FIELDS,
    timeout: float | None = RUN["timeout_s"].option(),
    out: Path = RUN["out_dir"].option(),
    run_id: str | None = typer.Option(None, "--run-id", help="Names the run directory; unset: torchrun's --rdzv-id."),
    threads: int = RUN["threads"].option(),
    compression: str | None = RUN["compression"].option(),
    as_json: bool = option(JSON, "worker"),
    shard_within: str = RUN["shard_within"].option(),
) -> None:
    """One host's rank of a multi-host run; start it with torchrun on every host (docs/how-to/multi-host.md)."""
    from netbench.orchestrator.multihost import torchrun as hosts  # late: keeps pandas, scapy off this module's import
    from netbench.orchestrator.run.timeouts import collective_timeout_s  # late: keeps pandas off this module's import

    shaping = None if topology_file else _shaping(bw, up, delay, jitter, loss)
    rep, auto_bucket = ropt.replicator_from_options(replicator, rep_settings)
    work = ropt.build_workload_config(**work_settings)
    ropt.name_for_run(work)  # this command trains it
    try:
        rendezvous = hosts.rendezvous(iface)
        run = hosts.run_id_from(run_id)
    except SpecError as exc:
        raise UserError(str(exc)) from None
    g = sharding_options.local_world_size(shard_within, rendezvous.spec.world_size)
    shaped = any(v is not None for v in (bw, up, delay, jitter, loss))
    world, rank = rendezvous.spec.world_size, rendezvous.spec.rank
    placed = _host_topology(topology_file, rank_order, world, rank, g, iface, shaping, shaped)
    cluster = hosts.cluster_spec(world // g, iface, placed)
    config = build_run_config(
        cluster=cluster,
        replicator=rep,
        compression=compression,
        auto_bucket=auto_bucket,
        workload=work,
        steps=steps,
        warmup_steps=warmup,
        timeout_s=timeout,
        capture=False,
        out_dir=out,
        threads=threads,
        **({"gpus_per_node": g, "shard_within": shard_within} if g > 1 else {}),
    )
    require_torch("worker")
    plan = hosts.plan(config, rendezvous, run, placed, collective_timeout_s(config))
    try:
        outcome = hosts.run_host(plan)
    except HostShapingError as exc:
        raise UserError(str(exc)) from None
    if outcome.run_dir is not None:
        if as_json:
            print(json.dumps(outcome.summary, default=str))
        else:
            print_summary(outcome.summary, "netbench worker")
            console.print(f"results: {outcome.run_dir}")
        if outcome.summary.get("status") != "ok":
            console.print(f"[red]run failed:[/] {for_terminal(outcome.summary.get('reason'))}")
    exit_without_teardown(outcome.code)  # skip torch's teardown at interpreter exit (see netbench.worker.hard_exit)
