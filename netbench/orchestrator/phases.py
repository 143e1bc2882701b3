"""The phases every launcher on the emulated cluster shares (`netbench run`, `netbench exec`).

A launcher prepares (names the run, makes its RunDir), then hands its own phases -- start the
capture, spawn processes, watch them -- to :func:`hold_cluster`, which builds the cluster before
them and tears it down after them whatever happens. What the run learns goes into an
:class:`Outcome`, from which the launcher then writes the run directory: a run that failed or
was stopped still says how far it got and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.capture.switches import SwitchCaptures
from netbench.capture.tcpdump import Capture
from netbench.emulation.cleanup import find_leftovers
from netbench.emulation.cluster import Cluster
from netbench.emulation.naming import RunNames
from netbench.emulation.spec import ClusterSpec
from netbench.validation import error_text


@dataclass
class Outcome:
    """How a run went, filled in phase by phase; the run directory is written from it whatever happened."""

    status: str = "ok"
    reason: str | None = None
    cluster: dict[str, Any] = field(default_factory=dict)  # run.json's cluster: what was built
    pcaps: dict[int, Path] = field(default_factory=dict)  # each node's capture, by node index
    capture_drops: dict[str, int] = field(default_factory=dict)  # packets each switch port's capture dropped
    measured: bool = False  # every process ended (well or not) and the capture stopped: only teardown is left
    interrupted: BaseException | None = (
        None  # the Ctrl-C (KeyboardInterrupt) or SIGTERM/SIGHUP (SystemExit) that stopped it
    )
    error: Exception | None = None  # netbench's own failure (the cluster could not be built, ...)

    def fail(self, reason: str) -> None:
        self.status, self.reason = "failed", reason

    def stop(self, exc: BaseException, measured_note: str) -> None:
        """The user stopped the run. Once everything was measured the status stands and the reason only says so
        (``measured_note``); before that the run failed, and the capture is left unparsed (the user wants out).
        """
        self.interrupted = exc
        how = interrupted_reason(exc)
        if self.measured:
            self.reason = self.reason or f"{how} during teardown; {measured_note}"
        else:
            self.fail(how)
            self.pcaps = {}


def hold_cluster(
    spec: ClusterSpec, names: RunNames, outcome: Outcome, measured_note: str, phases: Callable[[Cluster], None]
) -> None:
    """Build the cluster, run ``phases`` on it, tear it down. Never raises: ``outcome`` records how it ended.

    The cluster is a context manager, so everything it created (namespaces, links, qdiscs, the
    delay line, every process in its namespaces) is removed on every exit; Ctrl-C and
    SIGTERM/SIGHUP arrive as exceptions (see Cluster).
    """
    cluster: Cluster | None = None
    try:
        cluster = Cluster(spec, names=names)
        with cluster:
            phases(cluster)
            cluster.down()  # here, not in __exit__: a signal from now on waits for the teardown (see Cluster)
    except (KeyboardInterrupt, SystemExit) as exc:
        if cluster is not None:
            cluster.down()  # a no-op, unless a second signal landed just as __exit__ began
        outcome.stop(exc, measured_note)
    except Exception as exc:  # noqa: BLE001 - recorded in run.json; the caller reports the failed status
        outcome.error = exc
        outcome.fail(error_text(exc))


def leftover_warnings() -> list[str]:
    """One warning line when earlier runs left namespaces behind (a new run still goes ahead)."""
    leftovers = find_leftovers()
    return (
        [
            f"found leftovers of {len(leftovers.run_ids)} earlier run(s) ({', '.join(leftovers.run_ids)}): "
            f"{len(leftovers.namespaces)} namespace(s), {len(leftovers.pids)} process(es); run `netbench clean`"
        ]
        if leftovers.namespaces
        else []
    )


def start_capture(cluster: Cluster, pcap_dir: Path, enabled: bool) -> SwitchCaptures | None:
    """tcpdump on every node's port, in its switch's namespace (None when disabled or tcpdump is missing)."""
    if not (enabled and Capture.available()):
        return None
    ports = {sw.netns: [n.port for n in cluster.nodes if cluster.switch_of(n) is sw] for sw in cluster.switches}
    capture = SwitchCaptures([Capture(sw, ports[sw.netns], pcap_dir) for sw in cluster.switches if ports[sw.netns]])
    capture.start()
    return capture


def stop_capture(capture: SwitchCaptures | None, cluster: Cluster, outcome: Outcome) -> None:
    """Stop the capture; each node's pcap (by node index) and the packets each port dropped go into ``outcome``."""
    if not capture:
        return
    paths, outcome.capture_drops = capture.stop()
    outcome.pcaps = {node.index: paths[node.port] for node in cluster.nodes}


def interrupted_reason(exc: BaseException) -> str:
    """How the user stopped a run: Ctrl-C, or SIGTERM/SIGHUP (SystemExit 128 + signal)."""
    return (
        "interrupted (Ctrl-C)"
        if isinstance(exc, KeyboardInterrupt)
        else f"terminated (exit {getattr(exc, 'code', '?')})"
    )
