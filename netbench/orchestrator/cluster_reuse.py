"""Runs of a sweep that share a network run on one cluster; every worker is forked from one server.

Starting a worker (an interpreter, torch's import) takes seconds a node on a busy host, far more
than a point's steps at high rates; building a cluster takes a fraction of a second. So a sweep
starts one fork server (:mod:`netbench.orchestrator.forkserver`) that imports torch once, and every
point's workers are fresh children of it, each entering its node's namespace, with a fresh gloo
process group on a rendezvous port no earlier point used. And the sweep keeps a cluster up while
consecutive points share its *network key* -- everything of the cluster spec but the star's link
rates -- re-shaping its links in place for each point's rates (:meth:`Cluster.reshape`).

Nothing of one point reaches the next:

* queues: every egress gets a new root qdisc (what was queued is dropped, statistics start at zero);
  before that, the delay line (if any) is given twice the longest one-way delay to release what it holds;
* TCP: new connections, and the nodes of a shared cluster never cache TCP metrics
  (``tcp_no_metrics_save``), so no connection starts from a window, ssthresh or RTT an earlier point's
  connections left for the same peer. (Flushing the cache instead needs the host's root: a rootless
  sweep's user namespace is refused. Within one run it makes no difference: gloo opens its connections
  once, and the cache is written only when they close.)
* counters: workers read interface counters as per-step deltas anyway; the delay line's cumulative
  counters are reported as the difference from the point's start.
* processes: a point's run ends once every worker has recorded its end; the workers leave their process group and
  exit while the run's results are written, and the next point waits for them to be gone (or kills them after
  ``_LEAVE_S``) before it re-shapes the links.
* CPU: a point's results are written (by the sweep, in a thread) while the next point re-shapes, starts its workers
  and joins them; its steps begin only once the results are written (:meth:`ClusterReuse.await_writing`).

A point that fails, or is stopped, takes the cluster and the fork server down with it (every process in
the cluster's namespaces is killed, as after any run); the next point starts both afresh.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from netbench.emulation import netns
from netbench.emulation.capabilities import Capabilities, detect
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.forked_workers import Launcher
from netbench.orchestrator.phases import Outcome
from netbench.validation import error_text

T = TypeVar("T")
_RATE_FIELDS = ("rate_bps",)
NO_TCP_METRICS = {"net.ipv4.tcp_no_metrics_save": "1"}  # a closing connection leaves no window, ssthresh or RTT behind
_SETTLE_S = 0.05  # beyond twice the longest delay: the last ACKs and FINs of the previous point's connections
_LEAVE_S = 10.0  # how long the previous point's workers may take to leave their process group and exit


class Exiting(Protocol):
    """A worker on its way out (a ForkedWorker or a Popen)."""

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def network_key(spec: ClusterSpec) -> str:
    """What must match for a run to use a cluster built for another: the spec without the star's link rates."""
    doc = spec.model_dump(mode="json")
    if spec.on_star:
        for direction in ("up", "down"):
            for name in _RATE_FIELDS:
                doc[direction].pop(name, None)
    return json.dumps({"spec": doc, "offload": spec.offload_enabled}, sort_keys=True)


def reusable(config: RunConfig) -> bool:
    """Whether a run can share a cluster: one worker per node (several need intra-node links built per run), and no
    link schedule (it changes links, the delay line's delays and nodes' state while it runs: its cluster is its own)."""
    return config.gpus_per_node == 1 and config.schedule is None


def order_by_network(items: Sequence[T], config_of: Callable[[T], RunConfig]) -> list[T]:
    """``items`` grouped by network key, groups in order of first appearance, each group in its own order."""
    groups: dict[str, list[T]] = {}
    for item in items:
        config = config_of(item)
        groups.setdefault(network_key(config.cluster), []).append(item)
    return [item for group in groups.values() for item in group]


def counters_since(now: dict[str, Any] | None, base: dict[str, Any] | None) -> dict[str, Any] | None:
    """Cumulative counters as the difference from ``base``; maxima (``*_max*``) and non-numbers as they are."""
    if now is None or base is None:
        return now
    return {
        k: v - base.get(k, 0) if isinstance(v, (int, float)) and not isinstance(v, bool) and "max" not in k else v
        for k, v in now.items()
    }


class ClusterReuse:
    """Holds one cluster across the runs of a sweep, and the fork server of their workers; a context manager."""

    def __init__(self, capabilities: Capabilities | None = None, launcher: Launcher | None = None) -> None:
        self._capabilities = capabilities
        self._stack: contextlib.ExitStack | None = None
        self.cluster: Cluster | None = None
        self.key: str | None = None
        self.launcher = launcher or Launcher()  # a sweep's: it may have forked the calibration already
        self._last_end = 0.0
        self._leaving: list[Exiting] = []  # the last point's workers, done measuring, still exiting
        self._writing: Future[Any] | None = None  # the last point's results, being written
        self.built = 0  # clusters built (for the sweep's figures and the tests)

    def __enter__(self) -> ClusterReuse:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(exc_info[1] if isinstance(exc_info[1], BaseException) else None)

    @property
    def capabilities(self) -> Capabilities:
        """What this host supports, probed once for the whole sweep."""
        if self._capabilities is None:
            self._capabilities = detect()
        return self._capabilities

    def names_for(self, spec: ClusterSpec) -> RunNames:
        """The names a run with ``spec`` will have: the held cluster's where the run can share it, else new ones."""
        if self.cluster is not None and self.key == network_key(spec):
            return self.cluster.names
        return RunNames.new()

    def hold(
        self,
        spec: ClusterSpec,
        names: RunNames,
        outcome: Outcome,
        measured_note: str,
        phases: Callable[[Cluster], None],
    ) -> None:
        """As :func:`~netbench.orchestrator.phases.hold_cluster`, on the held cluster where ``names`` are its own.
        Never raises: ``outcome`` records how it ended; a run that did not end well takes the cluster and the fork
        server down (the next run starts both afresh)."""
        try:
            self._drop_if_stopped()
            cluster = self._cluster_for(spec, names)
            phases(cluster)
            self._last_end = time.monotonic()
        except (KeyboardInterrupt, SystemExit) as exc:
            self.close(exc)
            outcome.stop(exc, measured_note)
        except Exception as exc:  # noqa: BLE001 - recorded in run.json; the caller reports the failed status
            self.close(exc)
            outcome.error = exc
            outcome.fail(error_text(exc))
        if outcome.status != "ok":  # a worker failed or hung: nothing of this point's processes serves the next
            self.close()

    def leaving(self, workers: Sequence[Exiting]) -> None:
        """``workers`` have recorded their end and are exiting: the next run on this cluster waits for them."""
        self._leaving = list(workers)

    def writing(self, results: Future[Any]) -> None:
        """The last point's results are being written (``results``): the next point's steps wait for them."""
        self._writing = results

    def await_writing(self) -> None:
        """Until the last point's results are written (what writing them raised is its caller's)."""
        if self._writing is not None:
            futures.wait([self._writing])
        self._writing = None

    def _await_leaving(self) -> None:
        """Until the last point's workers have exited; any still there after ``_LEAVE_S`` is killed."""
        deadline = time.monotonic() + _LEAVE_S
        for worker in self._leaving:
            try:
                worker.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self._leaving = []

    def _cluster_for(self, spec: ClusterSpec, names: RunNames) -> Cluster:
        """The held cluster reset and re-shaped for ``spec``, or, where it cannot serve, a new one."""
        key = network_key(spec)
        if self.cluster is not None and self.key == key and self.cluster.names == names:
            self._reset(self.cluster, spec)
            return self.cluster
        self.drop_cluster()
        self._stack = contextlib.ExitStack()
        self.cluster = self._stack.enter_context(Cluster(spec, names=names, capabilities=self.capabilities))
        self.key, self.built = key, self.built + 1
        for node in self.cluster.nodes:
            netns.set_sysctls(node.netns, NO_TCP_METRICS)
        self._mark_counters(self.cluster)
        return self.cluster

    def _reset(self, cluster: Cluster, spec: ClusterSpec) -> None:
        """Nothing of the last point stays: the delay line drained, new qdiscs, no cached TCP metrics, counters from
        zero.
        """
        self._await_leaving()
        held = (
            2 * max(cluster.spec.one_way_delay_s(), spec.one_way_delay_s()) + _SETTLE_S if cluster.helper_pids else 0.0
        )
        wait = held - (time.monotonic() - self._last_end)
        if wait > 0:
            time.sleep(wait)
        cluster.reshape(spec)
        cluster.raise_if_interrupted()
        self._mark_counters(cluster)

    def _mark_counters(self, cluster: Cluster) -> None:
        """From here on the delay line's counters read as differences from now (see :func:`counters_since`)."""
        engine = cluster.impairment
        read = type(engine).stats.__get__(engine)
        base = read()
        engine.stats = lambda: counters_since(read(), base)  # type: ignore[method-assign]

    def _drop_if_stopped(self) -> None:
        """A stop signal that raised while the cluster sat between runs was the caller's to handle (it was raised once,
        as KeyboardInterrupt or SystemExit); the cluster goes down without raising it again."""
        if self.cluster is not None and self.cluster.stop_signal_raised:
            self.drop_cluster(KeyboardInterrupt())

    def drop_cluster(self, unwinding: BaseException | None = None) -> None:
        """Take the held cluster down: every process in its namespaces (its workers too), every namespace."""
        stack, self._stack, self.cluster, self.key = self._stack, None, None, None
        self._leaving = []  # the teardown ends every process in the cluster's namespaces
        if stack is not None:
            stack.__exit__(type(unwinding) if unwinding else None, unwinding, None)

    def close(self, unwinding: BaseException | None = None) -> None:
        """Take the cluster down, then stop the fork server."""
        try:
            if unwinding is None:
                self._drop_if_stopped()
            self.drop_cluster(unwinding)
        finally:
            self.launcher.close()
