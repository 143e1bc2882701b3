"""`netbench worker`: one host's rank of a run on real machines under torchrun, and rank 0's run directory.

torchrun starts the worker on every host (c10d rendezvous) and sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT. Each rank runs the emulated nodes' loop (:mod:`netbench.worker`),
recording every step to a file on its own host as it goes, so a failure keeps what was measured.
After the last step, while the gloo group is still up, every rank sends its records to rank 0
as JSON (:mod:`netbench.orchestrator.multihost.rank_payload`: never pickles, which rank 0 would run as root
on a peer's say), and rank 0 writes the same run directory as `netbench run`, through the same
writer (:func:`netbench.orchestrator.run.results.write_run`). There is no packet capture here: wire
bytes come from the interface counters, and the capture columns of steps.csv stay empty.

Every run has a network: ``--topology``'s graph, or the hosts' star (shaped by ``--bw``, or left as it is). Where
every path from a host is its own uplink (the star, a one-switch graph of equal links) local rank 0 shapes the
whole egress with one tbf. Otherwise each node's leader rank first learns the other nodes' addresses over the
rendezvous store (:mod:`netbench.orchestrator.multihost.peer_addresses`), then shapes its egress per peer
(:mod:`netbench.orchestrator.multihost.host_topology`, :mod:`netbench.emulation.htb`) before the group forms.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
import time
from collections import Counter
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2.ethtool import Ethtool

from netbench import environment, safe_files
from netbench.calibrate.host import host_cpus
from netbench.calibrate.hostcache import host_calibration
from netbench.counters import CounterError, read_counters
from netbench.emulation.capabilities import detect
from netbench.emulation.hostshaping import HostShaper, HostShapingError, offload_on, preflight
from netbench.emulation.htb import HtbShaping, netem_missing
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import MAX_WORKERS, RunConfig
from netbench.orchestrator.multihost import peer_addresses
from netbench.orchestrator.multihost.host_topology import HostTopology, HostTopologyError
from netbench.orchestrator.multihost.rank_payload import PayloadError, broadcast_flags, check_payload, gather_json
from netbench.orchestrator.run import results
from netbench.rundir.layout import RunDir, finished, partial_records, read_records, record_files
from netbench.rundir.records import RecordWriter, set_aside
from netbench.topology.presets import star_as_given
from netbench.worker.spec import ResolvedSpec, SpecError, WorkerSpec, resolve

NO_CAPTURE = "worker mode (torchrun on real hosts) captures no packets: wire bytes come from the interface counters"
_RUN_ID = re.compile(safe_files.NAME_PATTERN)
MAX_RESTARTS = 1_000_000  # the restarts torchrun makes of one job: a count, never a name
RUN_ID_FORM = "1-64 letters, digits, '.', '_' or '-'"


@dataclass(frozen=True)
class HostPlan:
    """Everything this rank needs, known before the host is touched."""

    config: RunConfig  # the run as `netbench run` records it; its cluster describes the real links
    spec: ResolvedSpec  # this rank's worker, records to ``partial``
    run_id: str
    shaping: DirectionSpec | None  # one egress shaper this rank applies (local rank 0, where every path is its uplink)
    partial: Path  # this host's record file while the run is in progress
    topology: HostTopology  # this host's node of the network (a star of the hosts without --topology)
    # paths differ: the node's leader rank shapes a class per peer, once it knows their addresses
    per_peer: bool = False


@dataclass
class HostOutcome:
    """What run_host leaves: the exit code and, on rank 0, the run directory and its summary."""

    code: int
    rank: int
    run_dir: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    kept: Path | None = None  # records left on this host because they never reached rank 0


def rendezvous(iface: str, environ: dict[str, str] | None = None) -> ResolvedSpec:
    """Rank and world from torchrun's environment, and a check that ``iface`` exists; SpecError otherwise."""
    env = os.environ if environ is None else environ
    missing = [var for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if var not in env]
    if missing:
        raise SpecError(
            f"{', '.join(missing)} not set: start `netbench worker` with torchrun on every host "
            "(docs/how-to/multi-host.md)"
        )
    try:
        read_counters(iface)
    except CounterError as exc:
        raise SpecError(f"--iface: {exc}") from None
    local_rank(env)  # checked with the rest of torchrun's variables, before anything is made
    return resolve(WorkerSpec(iface=iface, out_path="-"), env)


def run_id_from(given: str | None, environ: dict[str, str] | None = None) -> str:
    """--run-id, else torchrun's --rdzv-id (TORCHELASTIC_RUN_ID), else a fresh one; safe as a file name."""
    if given:
        if not _RUN_ID.fullmatch(given):
            raise SpecError(f"--run-id: {given!r} must be {RUN_ID_FORM}")
        return given
    try:
        run_id = environment.matching("TORCHELASTIC_RUN_ID", _RUN_ID, RUN_ID_FORM, env=environ)
    except environment.BadEnvironment as exc:
        raise SpecError(str(exc)) from None
    if run_id in (None, "none"):  # torchrun's default rdzv id is the literal "none"
        return secrets.token_hex(3)
    return run_id


def local_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank on its host (torchrun's ``$LOCAL_RANK``, 0 where unset); a bad value is a SpecError."""
    try:
        return int(environment.whole_number("LOCAL_RANK", low=0, high=MAX_WORKERS - 1, default=0, env=environ))
    except environment.BadEnvironment as exc:
        raise SpecError(str(exc)) from None


def link_speed_bps(iface: str) -> float | None:
    """The NIC's reported line rate (ethtool), or None where it reports none (many virtual NICs)."""
    tool = Ethtool()
    try:
        speed = tool.get_link_mode(iface).speed
    except Exception:  # noqa: BLE001 - no ethtool support: unknown
        return None
    finally:
        tool.close()
    return float(speed) * 1e6 if isinstance(speed, int) and 0 < speed < 0xFFFF_FFFF else None


def star_of_hosts(
    nodes: int, gpus_per_node: int, rank: int, iface: str, shaping: DirectionSpec | None, rate_bps: float | None = None
) -> HostTopology:
    """The hosts without ``--topology``: a star of ``nodes``, every egress at the shaped rate (``shaping``) or,
    unshaped, the NIC's (``rate_bps``, else this host's ``iface``'s), no down shaper.

    Built without validation: real clusters may have one node or NICs beyond the emulator's 10gbit,
    and an unknown rate stays None (the run then has no prediction).
    """
    up = shaping or DirectionSpec.model_construct(
        rate_bps=rate_bps or link_speed_bps(iface), delay_s=0.0, jitter_s=0.0, loss=0.0
    )
    down = DirectionSpec.model_construct(rate_bps=up.rate_bps, delay_s=0.0, jitter_s=0.0, loss=0.0)
    return HostTopology(
        star_as_given(nodes, up, down), tuple(range(nodes)), gpus_per_node, rank // gpus_per_node, shaping is not None
    )


def cluster_spec(nodes: int, iface: str, topology: HostTopology) -> ClusterSpec:
    """The real cluster as the model sees it: the hosts' graph and placement (up and down: node 0's access link, as
    `netbench run --topology` has them). Built without validation, as :func:`star_of_hosts` explains.
    """
    graph, access = topology.topology, topology.topology.access_link(0)
    order = topology.placement if topology.placement != tuple(range(graph.node_count)) else "topology"
    return ClusterSpec.model_construct(
        nodes=nodes,
        up=access.forward,
        down=access.reverse,
        offload="on" if offload_on(iface) else "off",
        engine="netem" if graph.impaired else "auto",
        topology=graph,
        rank_order=order,
    )


def plan(
    config: RunConfig,
    rendezvous_spec: ResolvedSpec,
    run_id: str,
    topology: HostTopology,
    timeout_s: float,
    environ: dict[str, str] | None = None,
) -> HostPlan:
    """This rank's worker spec; only local rank 0 shapes, since every local rank shares the host's interface: one
    egress shaper where every path is its uplink, else a class per peer (:func:`_peer_shaping`).
    """
    rendezvous_fields = rendezvous_spec.spec
    partial = partial_records(config.out_dir, run_id, rendezvous_fields.rank)
    spec = rendezvous_fields.model_copy(
        update={
            "steps": config.steps,
            "warmup_steps": config.warmup_steps,
            "replicator": config.replicator,
            "workload": config.workload,
            "out_path": str(partial),
            "timeout_s": timeout_s,
            "threads": config.threads,
            **(
                {"gpus_per_node": config.gpus_per_node, "intra_iface": "lo"} if config.gpus_per_node > 1 else {}
            ),  # local ranks talk over lo
        }
    )
    egress = topology.uniform_egress() if topology.shaped else None
    return HostPlan(
        config=config,
        spec=ResolvedSpec(spec=spec, init_method=rendezvous_spec.init_method),
        run_id=run_id,
        shaping=egress if local_rank(environ) == 0 else None,
        partial=partial,
        topology=topology,
        per_peer=topology.shaped and egress is None,
    )


def _node_info(plan: HostPlan, shaper: HostShaper | None) -> dict[str, Any]:
    """This host as run.json lists it."""
    spec = plan.spec.spec
    return {
        "rank": spec.rank,
        "host": socket.gethostname(),
        "iface": spec.iface,
        "addresses": peer_addresses.interface_addresses(spec.iface),
        "link_speed_bps": link_speed_bps(spec.iface),
        "shaping": shaper.installed if shaper else None,
        "local_rank": local_rank(),
    }


def _gather(plan: HostPlan, node: dict[str, Any]) -> dict[int, dict[str, Any]] | None:
    """Every rank's records and node facts, at rank 0 (None elsewhere); runs inside the gloo group.

    A rank whose payload fails the check counts as one that sent nothing (``refused``): rank 0
    does not tell it its records were saved, so they stay on its host.
    """
    spec = plan.spec.spec
    received = gather_json({"records": read_records(plan.partial), "node": node}, spec.rank, spec.world_size)
    if received is None:
        return None
    gathered: dict[int, dict[str, Any]] = {}
    for rank, raw in received.items():
        try:
            gathered[rank] = check_payload(raw if raw is not None else b"", rank)
        except PayloadError as exc:
            print(f"netbench worker: {exc}", file=sys.stderr)
            gathered[rank] = {"records": [], "node": {"rank": rank}, "refused": True}
    return gathered


def _gather_and_save(plan: HostPlan, node: dict[str, Any], started: float, state: dict[str, Any]) -> None:
    """Gather at rank 0, which saves every rank's records in the run directory, then tells the others.

    Runs inside the gloo group, after the last step. Only once rank 0 says the records are on its
    disk does another rank drop its own copy: a rank 0 that dies before that leaves them where they were.
    """
    spec = plan.spec.spec
    gathered = _gather(plan, node)
    saved: list[bool] = []
    if gathered is not None:
        state.update(gathered=gathered, run_dir=_save_records(plan, gathered, started).path)
        saved = [not gathered[rank].get("refused") for rank in range(spec.world_size)]
    state["saved"] = broadcast_flags(saved, spec.world_size, src=0)[spec.rank]


def run_host(plan: HostPlan) -> HostOutcome:
    """Shape (if asked), run this rank, gather at rank 0, write the run directory there; shaping is undone on every
    exit.
    """
    from netbench.worker import run_worker  # late: the package loads its names on first use

    started = time.time()
    rank = plan.spec.spec.rank
    earlier = set_aside(plan.partial)
    if earlier is not None:
        print(f"netbench worker: an earlier attempt's records moved to {earlier}", file=sys.stderr)
    store, shaping = _peer_shaping(plan) if plan.per_peer else (None, plan.shaping)
    shaper = HostShaper(plan.spec.spec.iface, shaping, run_id=plan.run_id) if shaping else None
    with shaper or nullcontext():
        node = _node_info(plan, shaper)
        state: dict[str, Any] = {}
        code = run_worker(plan.spec, after_steps=lambda: _gather_and_save(plan, node, started, state))
        if rank != 0:
            return _leave(plan, code, sent=bool(state.get("saved")))
        gathered = state.get("gathered") or {
            0: {"records": read_records(plan.partial), "node": node},
            **_left_here(plan),
        }
        outcome = _write(plan, code, gathered, started, state.get("run_dir"))
    del store  # rank 0's rendezvous store outlives the group that reused it
    return outcome


def _peer_shaping(plan: HostPlan, environ: dict[str, str] | None = None) -> tuple[Any, HtbShaping | None]:
    """A node's leader rank: check it may shape, tell the others its addresses, learn theirs, build its per-peer tree.

    Returns the rendezvous store (rank 0 may host it: keep it until the group has formed) and the
    shaping; (None, None) on the other local ranks of a node. Every problem is one HostShapingError line.
    """
    env = os.environ if environ is None else environ
    host, spec = plan.topology, plan.spec.spec
    if spec.rank % host.gpus_per_node:
        return None, None
    preflight(spec.iface, "--topology")
    paths = host.paths()
    impaired = [node for node, path in paths.items() if path.impaired]
    if impaired:
        if not detect().netem:
            worst = max(impaired, key=lambda n: paths[n].delay_s)
            raise HostShapingError(netem_missing(host.name(host.node), host.name(worst), paths[worst]))
    own = peer_addresses.interface_addresses(spec.iface)
    if not own:
        raise HostShapingError(
            f"--topology: {spec.iface} has no IPv4 address; peers are shaped by their IPv4 addresses"
        )
    try:
        attempt = environment.whole_number("TORCHELASTIC_RESTART_COUNT", low=0, high=MAX_RESTARTS, default=0, env=env)
    except environment.BadEnvironment as exc:
        raise HostShapingError(str(exc)) from None
    try:
        store = peer_addresses.open_store(env, spec.timeout_s)
        found = peer_addresses.exchange(
            store,
            spec.rank,
            own,
            [r for r in host.leaders() if r != spec.rank],
            spec.timeout_s,
            attempt=str(attempt),
        )
        return store, host.shaping(found, set(own))
    except (peer_addresses.PeerAddressError, HostTopologyError) as exc:
        raise HostShapingError(str(exc)) from None


def _left_here(plan: HostPlan) -> dict[int, dict[str, Any]]:
    """Other ranks' record files on this host (one machine, or a shared --out): a failed run keeps them too."""
    return {
        rank: {"records": read_records(path), "node": {"rank": rank}}
        for rank, path in record_files(plan.partial.parent).items()
        if rank != 0
    }


def _discard(partial: Path) -> None:
    partial.unlink(missing_ok=True)
    try:
        partial.parent.rmdir()  # the last rank to leave a shared --out removes the folder
    except OSError:
        pass


def _leave(plan: HostPlan, code: int, sent: bool) -> HostOutcome:
    """A rank other than 0: its records reached rank 0 (drop the local copy) or stay here, and say where."""
    if sent:
        _discard(plan.partial)
        return HostOutcome(code, plan.spec.spec.rank)
    print(f"netbench worker: rank {plan.spec.spec.rank} records kept in {plan.partial}", file=sys.stderr)
    return HostOutcome(code, plan.spec.spec.rank, kept=plan.partial)


def _failure(records: dict[int, list[dict]], code: int) -> str:
    errors = [
        f"rank {rank}: {r['error']}"
        for rank, recs in sorted(records.items())
        for r in recs
        if r.get("event") == "error"
    ]
    if errors:
        return errors[0]
    missing = [rank for rank, recs in sorted(records.items()) if not finished(recs)]
    return f"rank {missing[0]} did not finish" if missing else f"rank 0 exited with code {code}"


def _model_view(plan: HostPlan, nodes: list[dict[str, Any]]) -> tuple[RunConfig, int, list[str]]:
    """The config as measured (unshaped links at the slowest NIC), the cores the model may assume, and warnings.

    Nodes on one machine (namespaces, or several local ranks) share its cores as emulated nodes
    do; nodes on separate hosts do not, so the model gets N times the cores divided by the most
    nodes any one host carried.
    """
    config, warnings = plan.config, []
    cluster = config.cluster
    if not plan.topology.shaped:
        speeds = [n["link_speed_bps"] for n in nodes if n.get("link_speed_bps")]
        iface = plan.spec.spec.iface
        hosts = star_of_hosts(cluster.nodes, config.gpus_per_node, 0, iface, None, min(speeds) if speeds else None)
        cluster = cluster_spec(cluster.nodes, iface, hosts)
    unshaped_host = any(n.get("shaping") is None and n.get("local_rank", 0) == 0 for n in nodes)
    if any("htb" in n["shaping"] for n in nodes if n.get("shaping")):
        # every host has classes of its own: only a host left unshaped breaks the model
        if unshaped_host:
            warnings.append("a host was not shaped; the model assumes every path of the topology")
    else:
        shaped = {str(n.get("shaping", {}).get("tbf")) for n in nodes if n.get("shaping")}
        if len(shaped) > 1 or (shaped and unshaped_host):
            warnings.append("hosts were shaped differently; the model assumes rank 0's settings on every host")
    per_host = Counter(n.get("host") for n in nodes)
    cpus = host_cpus() * cluster.nodes * config.gpus_per_node // max(per_host.values(), default=1)
    return config.model_copy(update={"cluster": cluster}), max(1, cpus), warnings


def _save_records(plan: HostPlan, gathered: dict[int, dict[str, Any]], started: float) -> RunDir:
    """Rank 0: a new run directory holding every rank's records (workers/rankN.jsonl), before anything else."""
    run_dir = RunDir.create(plan.config.out_dir, plan.config.replicator.name, plan.run_id, started)
    for rank, part in sorted(gathered.items()):
        with RecordWriter(run_dir.records_path(rank)) as writer:
            for record in part["records"]:
                writer.write(record)
    return run_dir


def _write(
    plan: HostPlan, code: int, gathered: dict[int, dict[str, Any]], started: float, run_dir: Path | None = None
) -> HostOutcome:
    """Rank 0: the run directory, exactly as `netbench run` lays it out, from every rank's records."""
    config = plan.config
    folder = RunDir(run_dir) if run_dir is not None else _save_records(plan, gathered, started)
    records = {rank: part["records"] for rank, part in sorted(gathered.items())}
    complete = len(records) == config.cluster.nodes * config.gpus_per_node and all(
        finished(recs) for recs in records.values()
    )
    status, reason = ("ok", None) if code == 0 and complete else ("failed", _failure(records, code))
    nodes = [part["node"] for _, part in sorted(gathered.items())]
    model_config, cpus, warnings = _model_view(plan, nodes)
    # this host's calibration, measured after training when the cache has none; a failure only costs the prediction
    try:
        calibration = host_calibration(replicators=(model_config.replicator,)) if status == "ok" else None
    except Exception:  # noqa: BLE001
        calibration = None
    summary, _ = results.write_run(
        folder,
        results.RunOutput(
            config=model_config,
            records=records,
            run_id=plan.run_id,
            status=status,
            reason=reason,
            started=started,
            warnings=warnings,
            cluster=_cluster_info(plan, model_config, nodes),
            extra={"collective_timeout_s": plan.spec.spec.timeout_s, "launcher": "torchrun", "dilation": 1.0},
            capture={"reason": NO_CAPTURE},
            cpus=cpus,
            calibration=calibration,
            fidelity={"ok": True, "reasons": [], "observed": None, "note": "real hosts: nothing emulated"},
        ),
    )
    _discard(plan.partial)
    return HostOutcome(code if status == "ok" else max(code, 1), 0, folder.path, summary)


def _impaired(cluster: ClusterSpec) -> bool:
    """Delay, jitter or loss anywhere: on the topology's paths, or on every host's egress."""
    return cluster.topology.impaired


def _uplink(config: RunConfig, rank: int) -> str:
    """The label of the link direction a rank's host shapes: its node's uplink (``n0:fwd``), as `netbench run` names
    it."""
    cluster = config.cluster
    return f"{cluster.topology.access_link(cluster.placement[rank // config.gpus_per_node]).name}:fwd"


def _cluster_info(plan: HostPlan, model_config: RunConfig, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json's cluster for real hosts: each node's facts, the links as the model sees them, torchrun's rendezvous."""
    return {
        "mode": "torchrun",
        "run_id": plan.run_id,
        "nodes": nodes,
        "delay_engine": "netem" if _impaired(model_config.cluster) else "none",
        "offload": model_config.cluster.offload == "on",
        "spec": model_config.cluster.model_dump(),
        "shaping": {_uplink(model_config, n["rank"]): n["shaping"] for n in nodes if n.get("shaping")},
        "rendezvous": {
            k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "GLOO_SOCKET_IFNAME")
        },
    }
