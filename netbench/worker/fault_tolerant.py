"""A worker that trains on while nodes leave and join: ``full`` and ``diloco`` through torchft.

Each node is a replica group of its own (one worker, its own group store at the node's address). Its torchft
``Manager`` asks the run's lighthouse for a quorum (every step for ``full``, every outer sync for ``diloco``),
re-forms the gloo process group over the nodes present when the quorum changes, and, when this node is behind (it
has just joined), receives the weights and optimizer state from a live peer over that process group: over the
emulated links, counted in the step's ``heal_bytes``. A step whose exchange failed (a peer left during it) is not
committed: it is recorded with ``committed`` False and run again.

torchft retries a failed quorum or exchange for ever; here every wait is bounded: a quorum that does not form within
``quorum_lost_s`` ends the worker with one line that says the quorum was lost. A failed attempt alone never does,
however long its bounded waits took together: the node asks for the next quorum and is healed in it where the others
went on. The process group's configuration waits at most the exchange timeout on each member or store gone
(:class:`netbench.worker.bounded_gloo.BoundedGloo`).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

import torch
from torch.distributed import TCPStore
from torchft import Manager
from torchft.checkpointing.pg_transport import PGTransport
from torchft.local_sgd import DiLoCo

from netbench import pacing
from netbench.counters import IfaceCounters, read_counters
from netbench.replicators.flat import FlatLayout
from netbench.replicators.optim import build_optimizer
from netbench.rundir.records import RecordWriter
from netbench.rundir.steps_schema import Col, step_record, step_row
from netbench.worker.bounded_gloo import BoundedGloo
from netbench.worker.quorum_spec import QUORUM_REPLICATORS
from netbench.worker.quorum_watch import QuorumWatch
from netbench.worker.spec import ResolvedSpec
from netbench.worker.start import start_event, wait_for_gate
from netbench.workloads import Workload, build_workload

__all__ = ["QuorumLost", "FaultTolerantRun", "state_tensor_bytes"]

INNER_LR = 1e-3  # the inner optimizer's default lr, as the replicators' (AdamW)


def _compute(workload: Workload) -> float:
    """Forward and backward, paced as a straggler's or a dilated run's (netbench.pacing); returns the loss."""
    began, began_cpu = time.perf_counter(), time.thread_time()
    loss = workload.compute_step()
    pacing.pace(time.perf_counter() - began, time.thread_time() - began_cpu)
    return loss


class QuorumLost(RuntimeError):
    """No step was committed for the spec's ``quorum_lost_s``: too few nodes left, or the ones left cannot meet."""


def state_tensor_bytes(state: object) -> int:
    """The bytes of every tensor in a (nested) state dict: what a heal carries, headers aside."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(state_tensor_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(state_tensor_bytes(v) for v in state)
    return 0


class CountingTransport(PGTransport):
    """torchft's process-group checkpoint transport, counting what a heal receives and how long it takes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.received_bytes, self.received_s = 0, 0.0

    def recv_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        state = super().recv_checkpoint(*args, **kwargs)
        self.received_s += time.perf_counter() - began
        self.received_bytes += state_tensor_bytes(state)
        return state

    def take(self) -> tuple[int, float]:
        """What was received since the last call: (bytes, seconds)."""
        taken = (self.received_bytes, self.received_s)
        self.received_bytes, self.received_s = 0, 0.0
        return taken


class FaultTolerantRun:
    """One node's worker in a training that survives churn: setup, then attempts until the run's last step commits."""

    def __init__(self, resolved: ResolvedSpec, writer: RecordWriter) -> None:
        self.spec = resolved.spec
        if self.spec.quorum is None:
            raise ValueError("a fault-tolerant worker needs the spec's quorum")
        self.quorum = self.spec.quorum
        if self.spec.replicator.name not in QUORUM_REPLICATORS:
            raise ValueError(
                f"{self.spec.replicator.name} trains with every node throughout; "
                f"{' and '.join(QUORUM_REPLICATORS)} train through churn"
            )
        self.writer = writer
        self.step = -1  # the attempt in progress, for the error event
        self.measured: list[dict[str, Any]] = []
        self.healed_at: int | None = None  # the attempt a heal's sender was at: this node's steps take its numbers
        self.last_commit = time.monotonic() + self.spec.join_timeout_s  # the first quorum waits for its peers to start

    def run(self) -> None:
        workload = self._setup()
        wait_for_gate(self.spec.start_gate, self.spec.join_timeout_s)  # every node is heard: the first quorum waits
        self.last_commit = time.monotonic()
        before = read_counters(self.spec.iface)
        if self.spec.replicator.name == "diloco":
            self._run_diloco(workload, before)
        else:
            self._run_full(workload, before)
        self.writer.write(self._done_record())

    # ------------------------------------------------------------------------------------------------ setup

    def _setup(self) -> Workload:
        spec, quorum = self.spec, self.quorum
        torch.set_num_threads(spec.threads)
        pacing.set_factor(spec.cpu_dilation)
        pacing.set_compute_scale(spec.compute_scale)
        read_counters(spec.iface)  # a missing interface fails here
        os.environ["GLOO_SOCKET_IFNAME"] = spec.iface
        workload = build_workload(spec.workload, quorum.node, spec.world_size)
        self.model = workload.model
        config = spec.replicator
        self.inner = build_optimizer(workload.parameters(), config, "adamw", INNER_LR)
        timeout = timedelta(seconds=quorum.exchange_timeout_s)
        waiting = timedelta(seconds=quorum.quorum_lost_s)
        self.store = TCPStore(quorum.address, quorum.store_port, is_master=True, wait_for_workers=False)
        self.pg = BoundedGloo(timeout)
        self.transport = CountingTransport(self.pg, timeout=timeout, device=torch.device("cpu"))
        self.manager = Manager(
            pg=self.pg,
            load_state_dict=self._load_state,
            state_dict=self._state,
            min_replica_size=quorum.min_replicas,
            use_async_quorum=False,  # DiLoCo needs it; for full, the heal is done before the step computes
            timeout=timeout,
            quorum_timeout=waiting,
            connect_timeout=timeout,  # a heal's source that left refuses the connection: found out in one wait
            rank=0,
            world_size=1,
            store_addr=quorum.address,
            store_port=quorum.store_port,
            lighthouse_addr=quorum.lighthouse,
            replica_id=f"netbench_node_{quorum.node}",
            hostname=quorum.address,  # what peers connect to: the node's own address, not the host's name
            checkpoint_transport=self.transport,
            init_sync=False,  # every node builds the same weights from the workload's seed
        )
        self.watch = QuorumWatch(self.manager._client, quorum.joining)  # the lighthouse's answers, which torchft drops
        self.manager._client = self.watch
        self.outer: torch.optim.Optimizer | None = None
        if config.name == "diloco":
            momentum = config.outer_momentum
            self.outer = torch.optim.SGD(
                self.model.parameters(), lr=config.outer_lr, momentum=momentum, nesterov=momentum > 0
            )
        self.writer.write({**start_event(spec, workload, quorum.lighthouse, False), "quorum": quorum.model_dump()})
        return workload

    def _state(self) -> dict[str, Any]:
        """What a joining node receives: the weights and the inner optimizer's state (torchft's DiLoCo adds its
        global weights and the outer optimizer's state itself)."""
        return {"model": self.model.state_dict(), "inner": self.inner.state_dict(), "attempt": self.step}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.inner.load_state_dict(state["inner"])
        self.healed_at = int(state["attempt"])

    def _renumbered(self, attempt: int) -> int:
        """The number of the attempt in progress: after a heal, the sender's, so that every node's steps line up
        (a joining node's first attempt is the others' attempt whose quorum healed it); otherwise ``attempt``."""
        healed, self.healed_at = self.healed_at, None
        return attempt if healed is None else max(attempt, healed)  # never a number this node has recorded

    # ------------------------------------------------------------------------------------------------ the steps

    def _run_full(self, workload: Workload, before: IfaceCounters) -> None:
        """Every step: a quorum (a joining node is healed in it), the gradients' mean over the nodes present, the
        optimizer step if the manager commits it."""
        layout = FlatLayout(workload.parameters())
        flat = torch.zeros(layout.numel)
        attempt = self.spec_first_step()
        while self.manager.current_step() < self.spec.total_steps:
            self.step = attempt
            t_start, began = time.time(), time.perf_counter()
            self._start_quorum()
            attempt = self.step = self._renumbered(attempt)
            quorum_s = time.perf_counter() - began
            loss = _compute(workload)
            computed = time.perf_counter()
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in workload.parameters()]
            layout.gather(grads, flat)
            self.manager.allreduce(flat).wait()
            layout.scatter(flat, grads)
            communicated = time.perf_counter()
            committed = self.manager.should_commit()
            if committed:
                self.inner.step()
            else:
                self._release_peers()
            ended = time.perf_counter()
            values = {
                Col.COMPUTE_S: computed - began - quorum_s,
                Col.COMM_S: communicated - computed + quorum_s,
                Col.APPLY_S: ended - communicated,
                Col.PAYLOAD_BYTES: flat.numel() * flat.element_size(),
                Col.COLLECTIVES: 1,
                Col.LOSS: loss,
            }
            before = self._record(attempt, t_start, began, ended, values, committed, before)
            attempt += 1

    def _run_diloco(self, workload: Workload, before: IfaceCounters) -> None:
        """Inner steps with the local optimizer; every ``sync_every``-th ends in torchft's DiLoCo outer sync (a
        quorum, a heal where this node is behind, the pseudo-gradients' mean over the nodes present). The steps of a
        window are recorded once its sync says whether they count."""
        config = self.spec.replicator
        assert self.outer is not None
        window: list[tuple[int, float, float, float, dict[str, Any]]] = []
        attempt = self.spec_first_step()
        with DiLoCo(
            self.manager,
            [self.model],
            self.inner,
            self.outer,
            config.sync_every,
            pin_memory=False,
            use_bucketization=True,  # one flat all-reduce per sync, not one latency-bound call per tensor
        ) as diloco:
            if self.quorum.joining:  # its first step ends a window: it asks for the quorum the others sync in next
                diloco._local_step = config.sync_every - 1  # torchft counts the window's steps here
            while self.manager.current_step() * config.sync_every < self.spec.total_steps:
                self.step = attempt
                t_start, began = time.time(), time.perf_counter()
                loss = _compute(workload)
                computed = time.perf_counter()
                synced_before = self.manager.current_step()
                syncing = diloco._local_step + 1 == config.sync_every
                try:
                    self.inner.step()  # DiLoCo's hook runs the outer sync on the window's last step
                except Exception as exc:  # a quorum that did not form within quorum_lost_s times out in torchft
                    if syncing and time.monotonic() - self.last_commit >= self.quorum.quorum_lost_s:
                        raise self._lost(f"no quorum formed ({type(exc).__name__})") from None
                    raise
                ended = time.perf_counter()
                values = {
                    Col.COMPUTE_S: computed - began,
                    Col.COMM_S: ended - computed if syncing else 0.0,
                    Col.APPLY_S: 0.0 if syncing else ended - computed,
                    Col.PAYLOAD_BYTES: 4 * workload.num_params() if syncing else 0,
                    Col.COLLECTIVES: 1 if syncing else 0,
                    Col.LOSS: loss,
                }
                window.append((attempt, t_start, began, ended, values))
                attempt += 1
                if not syncing:
                    continue
                healed = self._renumbered(attempt - 1)
                if healed > attempt - 1:  # the window's steps end at the sender's sync attempt
                    shift = healed - (attempt - 1)
                    window = [(step + shift, *rest) for step, *rest in window]
                    attempt = healed + 1
                committed = self.manager.current_step() > synced_before
                if committed:
                    self.last_commit = time.monotonic()
                else:
                    self._release_peers()
                for step, t0, b0, e0, vals in window:
                    before = self._record(step, t0, b0, e0, vals, committed, before)
                window.clear()

    def _release_peers(self) -> None:
        """Close this node's side of the failed exchange: a peer still waiting in it (its ring neighbour, not the node
        that left) fails at once instead of at the collective timeout, and so reaches the next quorum with the rest.
        The next quorum configures a fresh process group."""
        try:
            self.pg.abort()
        except Exception:  # noqa: BLE001 - a group already torn down has nothing left to close
            pass

    def spec_first_step(self) -> int:
        """The number of this node's first attempt: after the attempts its earlier workers recorded (a join)."""
        return self.quorum.first_step

    def _start_quorum(self) -> None:
        """A quorum (the heal included), bounded: a quorum that does not form in time is a lost quorum."""
        try:
            self.manager.start_quorum()
        except Exception as exc:  # torchft's timeouts arrive as RuntimeError or TimeoutError from its Rust client
            raise self._lost(f"no quorum formed ({type(exc).__name__})") from None

    def _lost(self, why: str) -> QuorumLost:
        said = f": {why}" if why else ""
        return QuorumLost(
            f"quorum lost: no committed step for {self.quorum.quorum_lost_s:.0f} s (at least "
            f"{self.quorum.min_replicas} nodes must take part){said}"
        )

    def _record(
        self,
        step: int,
        t_start: float,
        began: float,
        ended: float,
        values: dict[str, Any],
        committed: bool,
        before: IfaceCounters,
    ) -> IfaceCounters:
        """Write one attempt's record (the counters read now close it); returns that reading."""
        if committed and self.spec.replicator.name == "full":
            self.last_commit = time.monotonic()
        after = read_counters(self.spec.iface)
        heal_bytes, heal_s = self.transport.take()
        # the quorum belongs to the step that exchanged (every step for full, a window's outer sync for diloco)
        restart = self.watch.take_restart() if values[Col.COLLECTIVES] else None
        row = {
            Col.RANK: self.quorum.node,
            Col.STEP: step,
            Col.WARMUP: step < self.spec.warmup_steps,
            Col.T_START: t_start,
            Col.T_END: t_start + (ended - began),
            Col.COMPRESS_S: 0.0,
            Col.DECODE_S: 0.0,
            Col.STEP_S: ended - began,
            Col.COMPUTE_SCALE: pacing.compute_scale(),
            **values,
            **(after - before).as_dict(),
        }
        record = step_record("worker", row)
        record.update(
            step_row(
                "quorum",
                {
                    Col.QUORUM_REPLICAS: self.manager.num_participants(),
                    Col.COMMITTED: committed,
                    Col.HEAL_BYTES: heal_bytes,
                    Col.HEAL_S: heal_s,
                    Col.RESTART_QUORUM: restart,
                },
            )
        )
        self.writer.write(record)
        if not record[Col.WARMUP]:
            self.measured.append(record)
        return after

    def _done_record(self) -> dict[str, Any]:
        steps = self.measured
        committed = [r for r in steps if r[Col.COMMITTED]]
        return {
            "event": "done",
            "rank": self.quorum.node,
            "steps": len(steps),
            "committed_steps": len(committed),
            "heal_bytes": sum(r[Col.HEAL_BYTES] for r in steps),
            "warmup_steps": self.spec.warmup_steps,
            "t_start": steps[0][Col.T_START] if steps else None,
            "t_end": steps[-1][Col.T_END] if steps else None,
            "final_loss": steps[-1][Col.LOSS] if steps else None,
        }

    def close(self) -> None:
        """Leave the quorum (the manager's server and heartbeats)."""
        self.manager.shutdown(wait=False)
