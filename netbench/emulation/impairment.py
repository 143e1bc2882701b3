"""Impairment engines: what adds delay, jitter and loss to a cluster's links, one small class each.

An engine answers three questions with the same interface (tcconfig's shapers are the model):
which qdiscs go on a port's or node's egress (:meth:`ImpairmentEngine.shape`), which helper
process runs beside the cluster (:meth:`~ImpairmentEngine.start`, :meth:`~ImpairmentEngine.check`,
:meth:`~ImpairmentEngine.stop`, :attr:`~ImpairmentEngine.pid`), and what it counted
(:meth:`~ImpairmentEngine.stats`). :func:`choose` picks one, once, from the spec and the host's
capabilities:

- :class:`NoImpairment` (``none``): no delay, jitter or loss asked for; tbf alone.
- :class:`Netem` (``netem``): netem above tbf on every impaired direction, all in the kernel.
- :class:`DelayLine` (``delayline``): tbf alone on the links; a switch's FORWARD chain queues
  impaired ports' frames to netbench's userspace delay line (:mod:`netbench.emulation.delayline`), one line per
  switch with delayed ports (:class:`netbench.emulation.delaylines.DelayLines` starts them).
"""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from pyroute2 import IPRoute

from netbench.emulation import delaycontrol, delayline, delayline_native, delaystats, shaping, tmpfolders
from netbench.emulation.capabilities import Capabilities
from netbench.emulation.errors import ClusterError, DelayLineDied
from netbench.emulation.node import Switch
from netbench.emulation.spec import ClusterSpec, DirectionSpec

READY_TIMEOUT_S = 10.0  # how long the delay line may take to bind its queue


class ImpairmentEngine:
    """The interface, and its defaults: rate shaping alone, nothing beside the cluster, nothing counted."""

    name: ClassVar[str]
    kernel_netem: ClassVar[bool] = False  # whether shape() puts netem above tbf on impaired directions

    def __init__(self, spec: ClusterSpec, run_id: str, acks_first: bool = True) -> None:
        self.spec = spec
        self.run_id = run_id
        self.acks_first = acks_first  # whether each tbf serves pure ACKs first (the kernel has htb and u32)

    def shape(self, ipr: IPRoute, ifindex: int, direction: DirectionSpec, offload: bool) -> dict:
        """Install the qdiscs of one egress (runs inside its namespace); what was installed, for run.json."""
        return shaping.apply(ipr, ifindex, direction, offload, use_netem=self.kernel_netem, acks_first=self.acks_first)

    def start(self) -> None:
        """Start the helper process, once every link is built and shaped."""

    def check(self) -> None:
        """Raise if the helper has died while the cluster is up."""

    def stop(self) -> None:
        """Forget the helper and remove its files, once every process in the cluster has been stopped."""

    @property
    def pid(self) -> int | None:
        """The helper's process id (the fidelity monitor watches its CPU), or None."""
        return None

    def helper_pids(self) -> dict[str, int]:
        """Every helper process by name (``delay_line``, ``delay_line_sw1``, ...): the fidelity monitor watches each
        one's CPU and wait, and the workers yield to them (:func:`netbench.orchestrator.run.runner.worker_nice`)."""
        return {"delay_line": self.pid} if self.pid is not None else {}

    def stats(self) -> dict[str, Any] | None:
        """What the helper counted (packets passed, dropped, released late), or None."""
        return None

    def describe(self) -> dict[str, str]:
        """What run.json records about the helper beyond the engine's name (nothing by default)."""
        return {}


class NoImpairment(ImpairmentEngine):
    """No delay, jitter or loss asked for: tbf alone on every link."""

    name = "none"


class Netem(ImpairmentEngine):
    """The kernel's netem, above tbf on every impaired direction: no helper, nothing to count."""

    name = "netem"
    kernel_netem = True


class DelayLine(ImpairmentEngine):
    """netbench's userspace delay line in one switch namespace, fed by NFQUEUE rules on its impaired ports."""

    name = "delayline"

    def __init__(self, spec: ClusterSpec, run_id: str, acks_first: bool = True) -> None:
        super().__init__(spec, run_id, acks_first)
        self.proc: subprocess.Popen | None = None
        self.switch_netns = ""
        self.build = ""  # which delay line runs: 'native' (delayline.c) or 'python' (delayline.py)
        self.build_note = ""  # why not native, where it could not be built
        self.stats_folder: Path | None = None  # made fresh by start(), removed by stop() (delaystats)

    @property
    def stats_path(self) -> Path | None:
        """Where the delay line keeps its counters, once started (removed by stop() and by ``netbench clean``)."""
        return delaystats.stats_file(self.stats_folder) if self.stats_folder is not None else None

    @property
    def control_path(self) -> Path | None:
        """The file the delay line re-reads on SIGHUP (:mod:`netbench.emulation.delaycontrol`), once started."""
        return delaycontrol.control_file(self.stats_folder) if self.stats_folder is not None else None

    def start_ports(self, switch: Switch, up: dict[str, DirectionSpec], down: dict[str, DirectionSpec]) -> None:
        """Start the delay line in ``switch``, wait for its ``ready``, then send the impaired ports' frames to its
        queue: a packet routed in from port p waits ``up[p]``, one routed out to p ``down[p]``.
        """
        program = self._native_program()
        self.stats_folder = delaystats.make_folder(self.run_id)
        config = {
            "up": {switch.ifindex[port]: _impairment(d) for port, d in up.items()},
            "down": {switch.ifindex[port]: _impairment(d) for port, d in down.items()},
            "seed": int(self.run_id, 16),
            "stats_path": str(self.stats_path),
            "control_path": str(self.control_path),
        }
        if program is not None:
            proc = switch.popen(delayline_native.argv(program, config), stdout=-1, stderr=-1, text=True)
        else:
            proc = switch.python("netbench.emulation.delayline", json.dumps(config), stdout=-1, stderr=-1, text=True)
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline().strip() if ready else ""
        if line != "ready":
            err = proc.stderr.read() if proc.poll() is not None else f"no answer within {READY_TIMEOUT_S:g} s"
            raise ClusterError(f"delay line did not start: {err.strip().splitlines()[-1] if err.strip() else line}")
        self.proc, self.switch_netns = proc, switch.netns
        delayline.install_rules(switch.netns, up_ports=list(up), down_ports=list(down))

    def _native_program(self) -> Path | None:
        """The native delay line where it builds (or ``$NETBENCH_DELAY_LINE`` asks for it), else None for the Python
        one.
        """
        try:
            chosen = delayline_native.choose()
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        except delayline_native.NativeUnavailable as exc:
            raise ClusterError(f"the native delay line cannot be built: {exc}") from None
        self.build, self.build_note = chosen.build, chosen.note
        return chosen.program

    def check(self) -> None:
        """DelayLineDied if it has exited: its links drop every packet, and a run would otherwise wait for a timeout."""
        proc = self.proc
        if proc is None or proc.poll() is None:
            return
        err = (proc.stderr.read() or "").strip().splitlines() if proc.stderr else []
        how = (
            f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with code {proc.returncode}"
        )
        raise DelayLineDied(
            f"the delay line (switch namespace {self.switch_netns}) {how}" + (f": {err[-1]}" if err else "")
        )

    def stop(self) -> None:
        tmpfolders.remove(self.stats_folder)
        self.stats_folder, self.proc = None, None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def describe(self) -> dict[str, str]:
        """Which delay line ran, and why not the native one where it did not (run.json)."""
        return {"delay_line": self.build, **({"delay_line_note": self.build_note} if self.build_note else {})}

    def stats(self) -> dict[str, Any] | None:
        return delaystats.read(self.stats_path)


def choose(spec: ClusterSpec, capabilities: Capabilities, run_id: str) -> ImpairmentEngine:
    """None without impairments; else netem where the kernel has it (or ``--engine`` asks), else the delay line."""
    acks_first = capabilities.acks_first
    if not spec.impaired:
        return NoImpairment(spec, run_id, acks_first)
    wanted = spec.engine
    if wanted in ("auto", "netem") and capabilities.netem:
        return Netem(spec, run_id, acks_first)
    if wanted == "netem":
        raise ClusterError("--engine netem: this kernel has no sch_netem (try --engine delayline)")
    if not capabilities.delay_line:
        raise ClusterError(
            f"delay, jitter and loss need netem or the delay line; neither works here: {capabilities.delay_line_reason}"
        )
    return DelayLine(spec, run_id, acks_first)


def _impairment(direction: DirectionSpec) -> dict[str, float]:
    return {"delay_s": direction.delay_s, "jitter_s": direction.jitter_s, "loss": direction.loss}
