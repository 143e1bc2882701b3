"""TCP settings of the emulated nodes: chosen per run, applied per namespace, read back for run.json.

Why: over links with delay, the congestion control, the socket buffer limits and whether TCP
restarts slow start after an idle period decide how fast gloo's bursts go (docs/concepts/model.md), and a real
WAN cluster's settings differ from this host's. Everything here is per network namespace:

* congestion control: the node's subnet route gets ``congctl NAME`` (a route metric; the
  namespace-wide sysctl only accepts the host's *allowed* list, the route takes any *available*
  one), and the namespace default is set too where the kernel lets it;
* ``net.ipv4.tcp_wmem`` / ``tcp_rmem`` maxima: what autotuned sockets may grow to (gloo's
  unbound-buffer sends, which ProcessGroupGloo uses, never set SO_SNDBUF, so these bind, not
  ``net.core.wmem_max`` -- which is host-wide and read-only inside a namespace anyway);
* ``net.ipv4.tcp_slow_start_after_idle``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from netbench.settings import Override, Setting, table
from netbench.tcp import STOCK_LINUX, TcpSettings

__all__ = [
    "TcpOptions",
    "NODE_TCP_BUFFER_MAX",
    "expected_tcp_settings",
    "available_congestion_controls",
    "check_tcp_options",
    "apply_tcp_settings",
    "read_tcp_settings",
]

MIN_BUF, MAX_BUF = 65536, 1 << 30
NODE_TCP_BUFFER_MAX = 67108864  # netbench's nodes: tcp_wmem/tcp_rmem maxima for 1gbit x 400 ms round trips (BDP 50 MB)
_STOCK = "plan models stock Linux hosts, not netbench's emulated nodes: it assumes their defaults"

# The nodes' TCP settings: options of run, exec, probe, sweep and (with stock Linux defaults) plan.
TCP = table(
    [
        Setting(
            "--tcp-cc",
            "tcp_cc",
            "text",
            "TCP congestion control of the nodes (e.g. cubic, bbr, reno) [default: the host's].",
            overrides={
                "plan": Override(
                    _STOCK,
                    default=STOCK_LINUX.cc,
                    help="assumed TCP congestion control of the nodes (cubic: most distributions; bbr; reno)",
                )
            },
        ),
        Setting(
            "--tcp-wmem-max",
            "tcp_wmem_max",
            "bytes",
            "Largest TCP send/receive buffer of the nodes in bytes (tcp_wmem/tcp_rmem max) [default 64 MiB].",
            overrides={
                "plan": Override(
                    _STOCK,
                    default=STOCK_LINUX.tcp_wmem_max,
                    help="assumed largest TCP send/receive buffer, bytes (tcp_wmem/tcp_rmem max) [stock Linux: 4 MiB]",
                )
            },
        ),
        Setting(
            "--no-slow-start-after-idle",
            "no_slow_start_after_idle",
            "flag",
            "Keep the congestion window over idle periods (tcp_slow_start_after_idle=0).",
            False,
            overrides={
                "plan": Override(
                    "plan assumes what the nodes do rather than setting it",
                    help="assume tcp_slow_start_after_idle=0 (window kept over idle periods)",
                )
            },
        ),
    ]
)
_AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class TcpOptions(BaseModel):
    """What the user asked for; None keeps what the nodes inherit (netbench's node defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cc: str | None = Field(None, description="congestion control of the nodes' connections")
    wmem_max: int | None = Field(None, ge=MIN_BUF, le=MAX_BUF, description="largest TCP send buffer (tcp_wmem max)")
    slow_start_after_idle: bool | None = Field(None, description="restart slow start after an idle RTO")


def available_congestion_controls() -> list[str]:
    """Congestion controls this kernel has loaded or can load (the /proc list)."""
    try:
        return _AVAILABLE.read_text().split()
    except OSError:
        return []


def check_tcp_options(options: TcpOptions) -> str | None:
    """Why these options cannot be applied here, or None (called before anything is built)."""
    if options.cc is not None:
        have = available_congestion_controls()
        if options.cc not in have:
            return (
                f"--tcp-cc: {options.cc!r} is not available on this kernel (available: "
                f"{', '.join(have) or 'none listed'})"
            )
    return None


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def _apply_in_namespace(iface: str, options: dict) -> None:
    """Runs inside one node's namespace (forked child)."""

    if options.get("cc"):
        cc = options["cc"]
        try:  # the namespace default: allowed only for the host's tcp_allowed_congestion_control
            _sysctl_path("net.ipv4.tcp_congestion_control").write_text(cc)
        except OSError:
            pass
        routes = subprocess.run(["ip", "-o", "route", "show"], capture_output=True, text=True, check=True)
        for line in routes.stdout.splitlines():
            words = line.split()
            if f"dev {iface}" not in line:
                continue
            if "congctl" in words:
                at = words.index("congctl")
                del words[at : at + 2]
            subprocess.run(
                ["ip", "route", "replace", *words, "congctl", cc], capture_output=True, text=True, check=True
            )
    if options.get("wmem_max"):
        for key in ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem"):
            lo, default, _ = _sysctl_path(key).read_text().split()
            top = int(options["wmem_max"])
            _sysctl_path(key).write_text(f"{lo} {min(int(default), top)} {top}")
    if options.get("slow_start_after_idle") is not None:
        _sysctl_path("net.ipv4.tcp_slow_start_after_idle").write_text("1" if options["slow_start_after_idle"] else "0")


def apply_tcp_settings(nodes: Sequence, options: TcpOptions) -> None:
    """Apply ``options`` in every node's namespace (nodes: emulation.node.Node)."""
    if options == TcpOptions():
        return
    from netbench.emulation import netns  # late: keeps psutil, pyroute2 off this module's import (plan reads it)

    netns.call_each([(node.netns, _apply_in_namespace, (node.iface, options.model_dump())) for node in nodes])


def _read_in_namespace(iface: str) -> dict:

    def value(key: str) -> str:
        return _sysctl_path(key).read_text().strip()

    cc = value("net.ipv4.tcp_congestion_control")
    initcwnd = 10
    routes = subprocess.run(["ip", "-o", "route", "show", "dev", iface], capture_output=True, text=True).stdout.split()
    if "congctl" in routes:
        cc = routes[routes.index("congctl") + 1]
    if "initcwnd" in routes:
        initcwnd = int(routes[routes.index("initcwnd") + 1])
    return {
        "cc": cc,
        "wmem_max": int(value("net.core.wmem_max")),
        "tcp_wmem_max": int(value("net.ipv4.tcp_wmem").split()[2]),
        "tcp_rmem_max": int(value("net.ipv4.tcp_rmem").split()[2]),
        "slow_start_after_idle": value("net.ipv4.tcp_slow_start_after_idle") == "1",
        "initcwnd": initcwnd,
        "source": "measured",
    }


def read_tcp_settings(node) -> dict:
    """The TCP settings in force in ``node``'s namespace, as run.json records them."""
    return TcpSettings.model_validate(node.call(_read_in_namespace, node.iface)).model_dump()


def _host_value(key: str, default: str) -> str:
    try:
        return _sysctl_path(key).read_text().strip()
    except OSError:
        return default


def expected_tcp_settings(options: TcpOptions) -> TcpSettings:
    """The settings a cluster built with ``options`` will have in its nodes, without building one.

    New namespaces inherit the host's default congestion control and its (host-wide)
    ``net.core.wmem_max``; netbench sets the nodes' tcp_wmem/tcp_rmem maxima; a new namespace
    starts with tcp_slow_start_after_idle = 1 and an initial window of 10. The model reads this
    for a run's prediction; run.json records what was read back from the built nodes.
    """
    top = options.wmem_max or NODE_TCP_BUFFER_MAX
    return TcpSettings(
        cc=options.cc or _host_value("net.ipv4.tcp_congestion_control", "cubic"),
        wmem_max=int(_host_value("net.core.wmem_max", "212992")),
        tcp_wmem_max=top,
        tcp_rmem_max=top,
        slow_start_after_idle=True if options.slow_start_after_idle is None else options.slow_start_after_idle,
        initcwnd=10,
        source="measured",
    )
