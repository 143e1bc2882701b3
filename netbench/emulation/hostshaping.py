"""Shaping a real host's interface for `netbench worker`: egress only, the emulator's own qdiscs, always undone.

On a real host netbench owns nothing but the qdisc it adds, and only while the interface's root qdisc is still the
kernel's default (handle ``0:``), so deleting ours restores exactly what was there. Two shapings fill in the same steps
(check, install, undo): :class:`TbfShaping` shapes all egress exactly as an emulated node's uplink
(:func:`netbench.emulation.shaping.apply`: tbf sized from the rate, netem above it for delay/jitter/loss where the
kernel has ``sch_netem``); :class:`~netbench.emulation.htb.HtbShaping` (``--topology``) shapes only the traffic to the
run's peers, a class per peer by its address, and leaves everything else unshaped. Both serve pure ACKs ahead of queued
data (:mod:`netbench.emulation.acksfirst`; beneath tbf, and beneath each peer class without netem) where `netbench
doctor`'s probe finds the kernel takes the tree (:func:`~netbench.emulation.capabilities.detect`), else a FIFO: the
qdisc replaces the host's default (fq_codel, which serves a flow of ACKs ahead of bulk flows), and with a FIFO there
each direction's ACKs would wait behind the host's own data. Ingress is not shaped: that needs an IFB device and a
redirect filter, more host state to leave behind, and when every host shapes its egress to the same rate its ingress is
already held to that rate by its peers' egress (a ring collective receives from one peer at a time).

The userspace delay line cannot stand in for netem here: it must sit in a forwarding path (a bridge the frames
cross), and delaying in the sender's own stack collapses TCP: the held packets still belong to the sending socket,
and TCP Small Queues throttles it.

The qdisc's lifetime belongs to a guard process (:mod:`netbench.emulation.shapeguard`) that adds it and removes it
when the worker exits or asks it to: on normal exit, exceptions, signals and SIGKILL alike (torchrun SIGKILLs a
worker 30 s after SIGTERM, and a worker's signal handler may be stuck waiting on a collective). The guard watches the
worker itself (a pidfd), not only a pipe a forked child of the workload could keep open. One run per interface: the
guard checks and installs under a host-wide lock and refuses an interface another live run shapes. Should the guard
itself be killed (it shares the job's cgroup), its record stays (:mod:`netbench.emulation.hostrecords`) and `netbench
clean --host-qdiscs` removes exactly the qdisc it names.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pyroute2 import IPRoute

from netbench.child import netbench_module_argv
from netbench.emulation import capabilities, offload, shaping
from netbench.emulation.htb import HtbShaping
from netbench.emulation.shaping import root_qdisc  # noqa: F401 - re-exported (tests, guard)
from netbench.emulation.spec import DirectionSpec
from netbench.signals import STOP_SIGNALS, exit_on, signals_held

CAP_NET_ADMIN = 12
_GSO_FEATURES = ("tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-generic-segmentation")


class HostShapingError(RuntimeError):
    """Shaping was asked for but cannot be done safely here; one line, nothing changed on the host."""


class TbfShaping(BaseModel):
    """All egress of the interface at one rate (tbf), with netem above it for delay, jitter and loss."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tbf"] = "tbf"
    direction: DirectionSpec

    @property
    def impaired(self) -> bool:
        return self.direction.impaired

    @property
    def root_kinds(self) -> tuple[str, ...]:
        return shaping.OUR_KINDS

    def netem_missing(self) -> str:
        return (
            "--delay/--jitter/--loss need the netem qdisc, which this kernel lacks "
            "(sch_netem); netbench's delay line works only inside an emulated cluster"
        )

    def install(self, ipr: Any, index: int, offload: bool, acks_first: bool) -> dict[str, Any]:
        return shaping.apply(
            ipr, index, self.direction, offload, use_netem=self.direction.impaired, acks_first=acks_first
        )


HostShaping = Annotated[TbfShaping | HtbShaping, Field(discriminator="kind")]
_SHAPING = TypeAdapter(HostShaping)


def parse_shaping(data: dict[str, Any]) -> TbfShaping | HtbShaping:
    """A shaping as the guard receives it (JSON), validated."""
    return _SHAPING.validate_python(data)


def foreign_root_message(iface: str, kind: str, handle: int) -> str:
    """Why an interface whose root qdisc is not the kernel's default is not shaped: one line."""
    return (
        f"{iface} already has a configured root qdisc ({kind} {handle >> 16:x}:), not the kernel default; "
        f"netbench shapes only from the default so it can restore it (one left by a killed netbench worker: "
        f"`netbench clean --host-qdiscs`; any other: `tc qdisc del dev {iface} root`)"
    )


def has_net_admin(status_path: str = "/proc/self/status") -> bool:
    """Whether this process holds CAP_NET_ADMIN (root, or a capability granted to it)."""
    with open(status_path, encoding="ascii") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    return False


def offload_on(iface: str) -> bool:
    """TSO/GSO on: skbs up to 64 KiB reach the shaper, so its burst must hold one (TbfParams.for_rate)."""
    try:
        state = offload.segmentation_state(iface)
    except Exception:  # noqa: BLE001 - unknown: size the burst for GSO, which is safe either way
        return True
    return any(state.get(name, False) for name in _GSO_FEATURES)


def preflight(iface: str, options: str) -> int:
    """Root (or CAP_NET_ADMIN), the interface, and the kernel's default root qdisc on it; its index, else
    HostShapingError.
    """
    if not has_net_admin():
        raise HostShapingError(
            f"shaping {iface} ({options}) needs root or CAP_NET_ADMIN; run without it to measure unshaped"
        )
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=iface)
        if not found:
            raise HostShapingError(f"--iface: no interface {iface!r} in this network namespace")
        root = root_qdisc(ipr, found[0])
    if root is not None and root[1] != 0:
        raise HostShapingError(foreign_root_message(iface, root[0], root[1]))
    return found[0]


@dataclass
class HostShaper:
    """Egress shaping of one interface for the lifetime of a ``with`` block (a DirectionSpec: tbf for all of it)."""

    iface: str
    shaping: TbfShaping | HtbShaping | DirectionSpec
    run_id: str = ""  # names the run in the host's shaping record (`netbench clean --host-qdiscs`)
    installed: dict[str, Any] = field(default_factory=dict)
    _index: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.shaping, DirectionSpec):
            self.shaping = TbfShaping(direction=self.shaping)

    def check(self) -> None:
        """Everything that can be known before touching the host; HostShapingError with one line otherwise."""
        self._index = preflight(self.iface, "--topology" if self.shaping.kind == "htb" else "--bw/--up/--delay")

    def __enter__(self) -> HostShaper:
        self.check()
        self._stack = ExitStack()
        self._stack.enter_context(exit_on(STOP_SIGNALS))  # a kill still unwinds through the caller's finally blocks
        self._stack.callback(self._release)
        try:
            answer = self._start_guard()
        except BaseException:
            self._close()
            raise
        if "error" in answer:
            self._close()
            if answer.get("refused"):
                raise HostShapingError(answer["error"])
            if self.shaping.impaired and answer.get("errno") == errno.ENOENT:
                raise HostShapingError(self.shaping.netem_missing())
            raise HostShapingError(f"could not shape {self.iface}: {answer['error']}")
        self.installed = {**answer["installed"], "iface": self.iface}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close()

    def _close(self) -> None:
        with signals_held():
            self._stack.close()

    def _start_guard(self) -> dict[str, Any]:
        """Start the guard in a session of its own, hand it the shaping, wait for its one-line answer.

        The pipes' ends here are close-on-exec (no program the workload runs inherits them), and
        the guard watches this process's pid, so a forked child still holding them changes nothing.
        """
        self._guard = subprocess.Popen(
            netbench_module_argv("netbench.emulation.shapeguard"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
            close_fds=True,
        )
        request = {
            "iface": self.iface,
            "shaping": self.shaping.model_dump(),
            "offload": offload_on(self.iface),
            "acks_first": capabilities.detect().acks_first,  # doctor's probe; none without root, so a FIFO
            "run_id": self.run_id,
            "worker_pid": os.getpid(),
        }
        self._guard.stdin.write(json.dumps(request) + "\n")
        self._guard.stdin.flush()
        line = self._guard.stdout.readline()
        self._guard.stdout.close()
        if not line:
            return {"error": f"the shaping guard exited with {self._guard.wait()} before answering"}
        return json.loads(line)

    def _release(self) -> None:
        """Ask the guard to release (a line, then end-of-file) and wait until it has removed the qdisc."""
        guard = getattr(self, "_guard", None)
        if guard is None:
            return
        for step in (lambda: guard.stdin.write("release\n"), guard.stdin.close):
            try:
                step()
            except OSError:  # the guard is gone already
                pass
        try:
            guard.wait(timeout=10)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()
