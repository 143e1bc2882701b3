"""Per-run names and addresses, and the registry of live runs.

Every object a run creates lives in namespaces named ``netbench-<run_id>-...``, so two runs never
collide and `netbench clean` can find exactly netbench's own leftovers. Addresses come from
198.18.0.0/15, the range RFC 2544 reserves for network benchmarking; the namespaces have no route
out, so even a clash with a real network could not leak traffic.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from netbench import safe_files

NETNS_PREFIX = "netbench-"
PROBE_PREFIX = "doctor"  # capabilities.detect() probes in ``netbench-doctor<pid>-x``, unregistered
# Fixed, never read from the environment: a run registered anywhere else would look dead to `clean`.
REGISTRY_DIR = Path("/run/netbench")
_BENCH_NET = ipaddress.ip_network("198.18.0.0/15")
_SLOTS = 2 ** (24 - _BENCH_NET.prefixlen)  # number of /24s in the benchmark range


@dataclass(frozen=True)
class RunNames:
    """The names and subnet of one run."""

    run_id: str

    @classmethod
    def new(cls) -> RunNames:
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

    def fabric_switch_netns(self, index: int) -> str:
        """Namespace of switch ``index`` of a topology: the first is the star's switch, the others ``-sw1``,
        ``-sw2``...
        """
        return self.switch_netns if index == 0 else f"{self.switch_netns}{index}"

    def node_netns(self, index: int) -> str:
        return f"{NETNS_PREFIX}{self.run_id}-n{index}"

    @staticmethod
    def port(index: int) -> str:
        """Switch-side veth of node ``index`` (lives in the switch namespace)."""
        return f"p{index}"

    @staticmethod
    def trunk_port(index: int) -> str:
        """Both ends of trunk ``index`` (each in its own switch's namespace)."""
        return f"t{index}"

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

    def fabric_switch_address(self, index: int) -> str:
        """Switch ``index``'s own address (the source of its ARP requests): counting down from the star switch's."""
        return str(self.subnet.broadcast_address - 1 - index)

    def owns(self, netns: str) -> bool:
        return run_id_of(netns) == self.run_id


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


RUN_ID = re.compile(r"[0-9a-f]{6}")  # what RunNames.new() makes: secrets.token_hex(3)
# Exactly the names netbench gives namespaces: a run's switches (at most MAX_SWITCHES) and nodes (at most 64), and
# doctor's probe.
MAX_SWITCHES = 100
_NETNS_NAME = re.compile(
    rf"{NETNS_PREFIX}(?:(?P<run>[0-9a-f]{{6}})-(?:sw(?:[1-9][0-9]?)?|n(?:[0-9]|[1-5][0-9]|6[0-3]))|(?P<probe>{PROBE_PREFIX}[1-9][0-9]{{0,9}})-x)"
)


def run_id_of(netns: str) -> str | None:
    """The run id in a namespace name netbench makes, or None for any other name (however netbench-like)."""
    match = _NETNS_NAME.fullmatch(netns)
    return (match["run"] or match["probe"]) if match else None


def _entry(run_id: str) -> Path:
    return REGISTRY_DIR / f"{run_id}.json"


def _lock(run_id: str) -> Path:
    return REGISTRY_DIR / f"{run_id}.lock"


_HELD: dict[
    str, int
] = {}  # run id -> descriptor of its lock file, flock'ed exclusively while this process owns the run


class RegistryError(RuntimeError):
    """The registry folder cannot be trusted (another owner, a link, open to others) or the run id is taken."""


def private_folder(path: Path) -> Path:
    """Create ``path`` (and missing parents) for root's state, then check it is a real folder only we may write.

    Checked with lstat after creating, so a folder or link someone else planted under that name is
    refused rather than used.
    """
    for part in [*reversed(path.parents), path]:
        try:
            os.mkdir(part, 0o755)
        except FileExistsError:
            pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RegistryError(
            f"{path} is not a folder owned by uid {os.geteuid()} and closed to others: refusing to use it"
        )
    return path


def open_lock(path: Path) -> int:
    """Open (creating if need be) the lock file ``path``, never through a link; the descriptor is not inherited."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def _lock_still_named(fd: int, path: Path) -> bool:
    """True while ``path`` still names the file ``fd`` locked (an unregister may have unlinked it meanwhile)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def register(names: RunNames) -> Path:
    """Take the run's lock, held until :func:`unregister` or this process's death, so `clean` leaves live runs alone.

    Liveness is the lock (fcntl.flock on REGISTRY_DIR/<run_id>.lock), which the kernel releases when
    the owner dies however it dies: no pid to be reused, no file whose absence could mean anything.
    The lock is exclusive: a run id a live run holds raises RegistryError and changes nothing. A
    lock taken on a file that was unlinked meanwhile (its owner unregistering) is retried on the
    new file, so two runs can never both hold one id. The JSON entry beside it only says who owns it.
    """
    private_folder(REGISTRY_DIR)
    path = _lock(names.run_id)
    for _ in range(8):
        fd = open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RegistryError(f"run id {names.run_id} is already held by a live run") from None
        if _lock_still_named(fd, path):
            break
        os.close(fd)
    else:
        raise RegistryError(f"run id {names.run_id}: its lock file keeps changing under us")
    _HELD[names.run_id] = fd
    import psutil  # late: only a run registering; plan never loads it

    me = psutil.Process()
    entry = _entry(names.run_id)
    safe_files.write_text(entry, json.dumps({"run_id": names.run_id, "pid": me.pid, "create_time": me.create_time()}))
    return entry


def unregister(names: RunNames) -> None:
    """Remove the run's registry entry and lock file, then release the lock.

    The owner holds the lock already; anyone else (`clean`) first takes it, so a run that has
    just registered the same id again is never unregistered behind its back.
    """
    fd = _HELD.pop(names.run_id, None)
    if fd is None:
        fd = _take_if_free(names.run_id)
        if fd is None:
            return  # a live run holds it
    try:
        _entry(names.run_id).unlink(missing_ok=True)
        _lock(names.run_id).unlink(missing_ok=True)
    finally:
        if fd >= 0:
            os.close(fd)


def _take_if_free(run_id: str) -> int | None:
    """The run's lock, taken exclusively if no one holds it (-1: there is no lock file); None while someone does."""
    try:
        fd = os.open(_lock(run_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def owner_alive(run_id: str) -> bool:
    """True while the process that registered ``run_id`` holds its lock.

    A capability probe's namespace is owned by the pid in its name: `clean` must not pull it
    from under another run that is still probing the host. An entry without its lock file belongs to
    no live run (the lock is taken before the entry is written and removed after it).
    """
    if run_id.startswith(PROBE_PREFIX) and run_id[len(PROBE_PREFIX) :].isdigit():
        import psutil  # late: only a probe's owner looked up; plan never loads it

        return psutil.pid_exists(int(run_id[len(PROBE_PREFIX) :]))
    if run_id in _HELD:
        return True
    try:
        fd = os.open(_lock(run_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True  # someone holds it exclusively: the run is alive
    finally:
        os.close(fd)  # closing also drops the shared lock taken just now
    return False


def registered_run_ids() -> list[str]:
    """Run ids with a registry entry or lock file (names that are not netbench run ids are ignored)."""
    if not REGISTRY_DIR.is_dir():
        return []
    stems = {p.stem for p in REGISTRY_DIR.iterdir() if p.suffix in (".json", ".lock")}
    return sorted(r for r in stems if RUN_ID.fullmatch(r))
