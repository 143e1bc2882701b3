"""Per-run names and addresses, and the registry of live runs.

Every object a run creates lives in namespaces named ``netbench-<run_id>-...``, so two runs never
collide and `netbench clean` can find exactly netbench's own leftovers. Addresses come from
198.18.0.0/15, the range RFC 2544 reserves for network benchmarking; the namespaces have no route
out, so even a clash with a real network could not leak traffic.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import psutil

NETNS_PREFIX = "netbench-"
REGISTRY_DIR = Path(os.environ.get("NETBENCH_RUN_DIR", "/run/netbench"))
_BENCH_NET = ipaddress.ip_network("198.18.0.0/15")
_SLOTS = 2 ** (24 - _BENCH_NET.prefixlen)  # number of /24s in the benchmark range


@dataclass(frozen=True)
class RunNames:
    """The names and subnet of one run."""

    run_id: str

    @classmethod
    def new(cls) -> "RunNames":
        """A fresh run id whose namespaces and /24 no other run on this host uses.

        Runs are isolated by namespace, so a shared subnet could not leak traffic; a distinct one
        keeps captures, logs and run.json of concurrent runs unambiguous. Registration happens
        when the cluster is built, so two runs choosing at the same instant may still pick the
        same /24 (harmless, as said); they never pick the same id but with 2^-24 odds.
        """
        taken = set(registered_run_ids())
        taken.update(filter(None, (run_id_of(name) for name in _netns_names())))
        slots = {_slot(r) for r in taken}
        for _ in range(64):
            names = cls(secrets.token_hex(3))
            if names.run_id not in taken and (_slot(names.run_id) not in slots or len(slots) >= _SLOTS):
                return names
        return names

    @property
    def switch_netns(self) -> str:
        return f"{NETNS_PREFIX}{self.run_id}-sw"

    def node_netns(self, index: int) -> str:
        return f"{NETNS_PREFIX}{self.run_id}-n{index}"

    @staticmethod
    def port(index: int) -> str:
        """Switch-side veth of node ``index`` (lives in the switch namespace)."""
        return f"p{index}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        """A /24 from the benchmark range, chosen from the run id so concurrent runs differ."""
        return ipaddress.ip_network((int(_BENCH_NET.network_address) + _slot(self.run_id) * 256, 24))

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + index + 1)

    @property
    def switch_address(self) -> str:
        """The switch's own address: the /24's last host address, never a node's."""
        return str(self.subnet.broadcast_address - 1)

    def owns(self, netns: str) -> bool:
        return netns.startswith(f"{NETNS_PREFIX}{self.run_id}-")


def _slot(run_id: str) -> int:
    """Which /24 of the benchmark range a run id maps to (-1 for ids that are not hex)."""
    try:
        return int(run_id, 16) % _SLOTS
    except ValueError:
        return -1


def _netns_names() -> list[str]:
    """Names under /run/netns, where iproute2 and pyroute2 bind-mount named namespaces."""
    try:
        return os.listdir("/run/netns")
    except OSError:
        return []


def run_id_of(netns: str) -> str | None:
    """The run id encoded in a netbench namespace name, or None for foreign names."""
    if not netns.startswith(NETNS_PREFIX):
        return None
    rest = netns[len(NETNS_PREFIX):]
    run_id, sep, _ = rest.partition("-")
    return run_id if sep else None


def register(names: RunNames) -> Path:
    """Record that this process owns the run, so `clean` leaves live runs alone."""
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    path = REGISTRY_DIR / f"{names.run_id}.json"
    me = psutil.Process()
    path.write_text(json.dumps({"run_id": names.run_id, "pid": me.pid, "create_time": me.create_time()}))
    return path


def unregister(names: RunNames) -> None:
    (REGISTRY_DIR / f"{names.run_id}.json").unlink(missing_ok=True)


PROBE_PREFIX = "doctor"  # capabilities.detect() probes in ``netbench-doctor<pid>-x``, unregistered


def owner_alive(run_id: str) -> bool:
    """True while the process that registered ``run_id`` still runs (pid reuse is checked).

    A capability probe's namespace is owned by the pid in its name: `clean` must not pull it
    from under another run that is still probing the host.
    """
    if run_id.startswith(PROBE_PREFIX) and run_id[len(PROBE_PREFIX):].isdigit():
        return psutil.pid_exists(int(run_id[len(PROBE_PREFIX):]))
    path = REGISTRY_DIR / f"{run_id}.json"
    try:
        entry = json.loads(path.read_text())
        proc = psutil.Process(entry["pid"])
        return abs(proc.create_time() - entry["create_time"]) < 0.01
    except (OSError, ValueError, KeyError, psutil.Error):
        return False


def registered_run_ids() -> list[str]:
    if not REGISTRY_DIR.is_dir():
        return []
    return sorted(p.stem for p in REGISTRY_DIR.glob("*.json"))
