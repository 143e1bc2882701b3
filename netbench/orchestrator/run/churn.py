"""`netbench run` through nodes that leave and join: the run's lighthouse, each worker's quorum, the leaves and joins.

Under a schedule whose nodes leave and join (``member`` rows, ``--churn``) the replicators that train on with the
nodes present (:data:`~netbench.worker.quorum_spec.QUORUM_REPLICATORS`) run as torchft replica groups, one per node
(:mod:`netbench.worker.fault_tolerant`). This module is what the runner adds for them: a lighthouse in the switch's
namespace, listening on the switch's own address (every node reaches it over its uplink, nothing outside netbench's
namespaces can); each worker's :class:`~netbench.worker.quorum_spec.QuorumSpec`; and the live schedule's
``on_member`` (:class:`~netbench.orchestrator.membership.Membership`): a leave kills the node's worker (SIGKILL to its
process group), a join forks a fresh one on the same node that asks for the next quorum at once and is healed in it,
its steps numbered after the ones the node recorded.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench import safe_files
from netbench.model.goodput import MIN_QUORUM, QUORUM_WAIT_S
from netbench.model.heal import largest_message_s
from netbench.model.waits import EXCHANGE_FLOOR_S
from netbench.model.waits import exchange_timeout_s as exchange_wait_s
from netbench.orchestrator.membership import Membership
from netbench.orchestrator.prediction import workload_shapes
from netbench.orchestrator.run.timeouts import CEILING_S, FALLBACK_S, crowding, slowest_call_s
from netbench.torch_presence import TORCHFT_INSTALL, installed
from netbench.worker.quorum_spec import QUORUM_REPLICATORS, QuorumSpec
from netbench.worker.spec import WorkerSpec

if TYPE_CHECKING:
    from netbench.emulation.cluster import Cluster
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.forked_workers import ForkedWorker, ForkServer
    from netbench.rundir.layout import RunDir

__all__ = [
    "trains_through_churn",
    "check_churn",
    "Lighthouse",
    "quorum_for",
    "worker_membership",
    "LIGHTHOUSE_PORT",
]

LIGHTHOUSE_PORT = 29_410  # in the switch's namespace, on its own address
STORE_PORT = 29_420  # each node's group store: run's in the node's namespace, + how often the node has joined again;
# exec --torchft's with the lighthouse, + the node's rank
MIN_REPLICAS = MIN_QUORUM  # the fewest nodes a quorum holds: one node alone has no one to train with
JOIN_TIMEOUT_S = 60.0  # a user's programs (exec): the first quorum waits this long for every program heard to start
QUORUM_TICK_MS = 20  # how often the lighthouse looks for a quorum
KILL_WAIT_S = 10.0  # a killed worker's exit, as the fork server reports it
LOST_AFTER_EXCHANGES = 6  # a quorum that has not formed after this many exchange timeouts is lost (see quorum_for)
READY_S = 60.0  # the lighthouse's start (torch's import) on a crowded host


def trains_through_churn(config: RunConfig) -> bool:
    """Whether nodes leave and join during the run (its schedule's member rows, ``--churn``'s draws)."""
    return config.schedule is not None and config.schedule.changes_members


def check_churn(config: RunConfig) -> None:
    """ValueError (one line) where nodes leave and join but the run cannot train through it."""
    if not trains_through_churn(config):
        return
    name = config.replicator.name
    if name not in QUORUM_REPLICATORS:
        raise ValueError(
            f"nodes leave and join (member rows or --churn): -r {name} trains with every node throughout; "
            f"{' and '.join(QUORUM_REPLICATORS)} train through churn (netbench exec applies churn to any program)"
        )
    if not installed("torchft"):
        raise ValueError(
            f"nodes leave and join (member rows or --churn): training through it needs torchft ({TORCHFT_INSTALL})"
        )
    if config.gpus_per_node > 1:
        raise ValueError("nodes leave and join (member rows or --churn): one worker per node (--gpus-per-node 1)")
    if len(config.cluster.topology.switches) > 1:
        raise ValueError("nodes leave and join (member rows or --churn): supported on a network of one switch")


class Lighthouse:
    """The run's torchft lighthouse (:mod:`netbench.worker.lighthouse`), in the switch's namespace."""

    def __init__(
        self,
        cluster: Cluster,
        dilation: float,
        log: Path,
        store_ports: Sequence[int] = (),
        join_timeout_s: float = JOIN_TIMEOUT_S,
        min_replicas: int = MIN_REPLICAS,
    ) -> None:
        """``store_ports``: group stores it also holds, on its own address (`netbench exec --torchft`'s nodes');
        ``join_timeout_s``: the longest a quorum waits for a node that is heard but has not asked (undilated);
        ``min_replicas``: the fewest nodes a quorum holds."""
        address = cluster.names.fabric_switch_address(0)
        self.exchange_timeout_s = join_timeout_s
        self.address, self.url = address, f"http://{address}:{LIGHTHOUSE_PORT}"
        ms = lambda s: str(round(s * dilation * 1000))  # noqa: E731 - the run's waits, dilated
        with open(log, "ab") as out:  # noqa: PTH123 - the child holds it
            self.proc = cluster.switches[0].python(
                "netbench.worker.lighthouse",
                "--bind",
                f"{address}:{LIGHTHOUSE_PORT}",
                "--min-replicas",
                str(min_replicas),
                "--join-timeout-ms",
                ms(join_timeout_s),
                "--heartbeat-timeout-ms",
                ms(QUORUM_WAIT_S),  # a node unheard for this long has left: the quorum forms without it
                "--quorum-tick-ms",
                str(QUORUM_TICK_MS),
                *(arg for port in store_ports for arg in ("--store-port", str(port))),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=out,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            if select.select([self.proc.stdout], [], [], 0.1)[0]:
                if self.proc.stdout.readline().strip() == b"ready":
                    return
                break
        self.stop()
        raise RuntimeError("the quorum's lighthouse did not start (workers/lighthouse.log says why)")

    def stop(self) -> None:
        """Stop it (the cluster's teardown would; a failed start must not wait for that)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def exchange_timeout_s(config: RunConfig, dilated: RunConfig, dilation: float, cpus: int | None) -> float:
    """How long one of torchft's waits on peers may take in a run through churn: ``--timeout`` where given, else
    :func:`netbench.model.waits.exchange_timeout_s` of the longer of the model's slowest collective call and a
    heal's largest message (never below EXCHANGE_FLOOR_S: a peer finishing its step before it reaches the quorum's
    process group), the floor stretched as the run is crowded.

    A peer that leaves resets its connections, so most waits on it fail at once; the waits that only this bound
    ends are the process group's configuration (the store waits for the address a killed peer never wrote) and a
    heal's receive from a source that hangs. The run's collective timeout (30 s and more) would make each of them
    cost the survivors that long."""
    if dilated.timeout_s is not None:
        return dilated.timeout_s
    floor = EXCHANGE_FLOOR_S * crowding(dilated, dilation, cpus)
    try:
        shapes = workload_shapes(config.workload, config.cluster.nodes)
        access = config.cluster.access
        rate = min(access.forward.rate_bps, access.reverse.rate_bps)
        # torchft bounds each of a heal's messages, not the whole heal: the largest tensor is the longest wait
        largest = largest_message_s(config.replicator, shapes, rate, config.cluster.one_way_delay_s())
        slowest = max(largest, slowest_call_s(config)) * dilation
    except Exception:  # noqa: BLE001 - the model never fails a run: the collective timeout's fallback
        return max(FALLBACK_S, floor)
    return min(CEILING_S, exchange_wait_s(slowest, floor))


def quorum_for(url: str, node: int, address: str, exchange_s: float) -> QuorumSpec:
    """Node ``node``'s place in the quorum as the run starts (a join copies it with its first step): a wait on peers
    bounded by ``exchange_s``, and the quorum lost when it has not formed after LOST_AFTER_EXCHANGES of them.
    torchft's quorum holds the process group's configuration and the heal, each of whose waits on a peer or store gone
    is bounded by ``exchange_s`` (:class:`netbench.worker.bounded_gloo.BoundedGloo`)."""
    return QuorumSpec(
        lighthouse=url,
        node=node,
        address=address,
        store_port=STORE_PORT,
        min_replicas=MIN_REPLICAS,
        exchange_timeout_s=exchange_s,
        quorum_lost_s=LOST_AFTER_EXCHANGES * exchange_s,
    )


def worker_membership(
    run_dir: RunDir,
    cluster: Cluster,
    procs: list[ForkedWorker],
    server: Callable[[], ForkServer],
    nice: int,
) -> Membership:
    """The live schedule's ``on_member`` for the run's workers (``procs`` by rank, filled once spawned): a leave kills
    the node's worker, a join forks a fresh one from the node's spec, its steps after the ones recorded. A join once
    some worker has finished is not made: the run is ending, and there is no quorum left to join."""
    placement = cluster.spec.placement

    def leave(rank: int) -> None:
        procs[rank].kill()  # SIGKILL to its process group
        with contextlib.suppress(subprocess.TimeoutExpired):  # the fork server reports the exit; never wait on it long
            procs[rank].wait(timeout=KILL_WAIT_S)

    def join(rank: int, first_step: int) -> None:
        if any(run_dir.finished(r) for r in range(len(procs))):
            return
        spec = WorkerSpec.model_validate_json(run_dir.spec_path(rank).read_text())
        assert spec.quorum is not None
        joins = members.leaves.get(rank, 0)
        quorum = spec.quorum.model_copy(
            update={"first_step": first_step, "joining": True, "store_port": STORE_PORT + joins}
        )
        path = run_dir.spec_path(rank).with_suffix(f".join{joins}.json")
        safe_files.write_text(path, spec.model_copy(update={"quorum": quorum}).model_dump_json(indent=2))
        procs[rank] = server().start(cluster.nodes[placement[rank]].netns, path, run_dir.log_path(rank), nice)

    members = Membership(run_dir, placement.index, leave, join)
    return members


def describe(members: Membership | None, lighthouse: Lighthouse | None) -> dict[str, Any]:
    """run.json's record of the quorum: the lighthouse, how often each rank's node left, and the waits' bound (in
    the cluster's seconds: what a member gone while it asked for a quorum costs the others)."""
    if members is None or lighthouse is None:
        return {}
    return {
        "quorum": {
            "lighthouse": lighthouse.url,
            "leaves": {str(r): n for r, n in sorted(members.leaves.items())},
            "exchange_timeout_s": lighthouse.exchange_timeout_s,
        }
    }
