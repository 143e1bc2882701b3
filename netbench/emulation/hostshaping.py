"""Shaping a real host's interface for `netbench worker`: egress only, the emulator's own qdiscs, always undone.

On a real host netbench owns nothing but the qdisc it adds. It shapes the named interface's
egress exactly as an emulated node's uplink (:func:`netbench.emulation.shaping.apply`: tbf sized
from the rate, netem beneath it for delay/jitter/loss where the kernel has ``sch_netem``), and only
while the interface's root qdisc is still the kernel's default (handle ``0:``), so deleting ours
restores exactly what was there. Ingress is not shaped: that needs an IFB device and a redirect
filter, more host state to leave behind, and when every host shapes its egress to the same rate
its ingress is already held to that rate by its peers' egress (a ring collective receives from
one peer at a time).

The userspace delay line cannot stand in for netem here: it must sit in a forwarding path (a
bridge the frames cross), and delaying in the sender's own stack collapses TCP (shared/NOTES.md).

Removal runs on normal exit, exceptions, SIGTERM, SIGINT and SIGHUP; only SIGKILL leaves the
qdisc in place, and the next worker then refuses to start and prints the command that removes it.
"""

from __future__ import annotations

import errno
import signal
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from netbench.emulation import offload, shaping
from netbench.emulation.signals import exit_on, signals_held
from netbench.emulation.spec import DirectionSpec

CAP_NET_ADMIN = 12
TC_H_ROOT = 0xFFFFFFFF
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_GSO_FEATURES = ("tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-generic-segmentation")


class HostShapingError(RuntimeError):
    """Shaping was asked for but cannot be done safely here; one line, nothing changed on the host."""


def has_net_admin(status_path: str = "/proc/self/status") -> bool:
    """Whether this process holds CAP_NET_ADMIN (root, or a capability granted to it)."""
    with open(status_path, encoding="ascii") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    return False


def root_qdisc(ipr: IPRoute, index: int) -> tuple[str, int] | None:
    """(kind, handle) of the interface's root qdisc; handle 0 means the kernel's default."""
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == TC_H_ROOT:
            return str(msg.get_attr("TCA_KIND")), int(msg["handle"])
    return None


def offload_on(iface: str) -> bool:
    """TSO/GSO on: skbs up to 64 KiB reach the shaper, so its burst must hold one (TbfParams.for_rate)."""
    try:
        state = offload.segmentation_state(iface)
    except Exception:  # noqa: BLE001 - unknown: size the burst for GSO, which is safe either way
        return True
    return any(state.get(name, False) for name in _GSO_FEATURES)


@dataclass
class HostShaper:
    """Egress shaping of one interface for the lifetime of a ``with`` block."""

    iface: str
    direction: DirectionSpec
    installed: dict[str, Any] = field(default_factory=dict)
    _index: int | None = field(default=None, repr=False)

    def check(self) -> None:
        """Everything that can be known before touching the host; HostShapingError with one line otherwise."""
        if not has_net_admin():
            raise HostShapingError(f"shaping {self.iface} (--bw/--up/--delay) needs root or CAP_NET_ADMIN; "
                                   "run without them to measure unshaped")
        with IPRoute() as ipr:
            found = ipr.link_lookup(ifname=self.iface)
            if not found:
                raise HostShapingError(f"--iface: no interface {self.iface!r} in this network namespace")
            self._index = found[0]
            root = root_qdisc(ipr, self._index)
        if root is not None and root[1] != 0:
            major = root[1] >> 16
            raise HostShapingError(
                f"{self.iface} already has a configured root qdisc ({root[0]} {major:x}:), not the kernel default; "
                f"netbench shapes only from the default so it can restore it (left by a killed worker? "
                f"`tc qdisc del dev {self.iface} root` removes it)")

    def __enter__(self) -> "HostShaper":
        self.check()
        self._stack = ExitStack()
        self._stack.enter_context(exit_on(_EXIT_SIGNALS))  # from here on a kill unwinds through __exit__
        self._stack.callback(self._clear)  # runs before the handlers are given back
        try:
            with IPRoute() as ipr:
                self.installed = shaping.apply(ipr, self._index, self.direction, offload_on(self.iface),
                                               use_netem=self.direction.impaired)
            self.installed["iface"] = self.iface
        except BaseException as exc:
            self._close()
            if isinstance(exc, NetlinkError) and self.direction.impaired and exc.code == errno.ENOENT:
                raise HostShapingError("--delay/--jitter/--loss need the netem qdisc, which this kernel lacks "
                                       "(sch_netem); netbench's delay line works only inside an emulated cluster") from None
            if isinstance(exc, NetlinkError):
                raise HostShapingError(f"could not shape {self.iface}: {exc}") from None
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._close()

    def _close(self) -> None:
        with signals_held():
            self._stack.close()

    def _clear(self) -> None:
        """Delete our root qdisc: the kernel puts its default back."""
        with IPRoute() as ipr:
            shaping.clear(ipr, self._index)
