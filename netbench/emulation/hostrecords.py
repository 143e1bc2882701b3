"""Which host qdiscs netbench installed, for whom: records a killed worker leaves behind for `netbench clean`.

A shaping guard (:mod:`netbench.emulation.shapeguard`) writes one record per interface it shapes,
``/run/netbench/host-shaping/<netns inode>-<ifindex>.json``, naming the interface, the run, the worker's and the
guard's pids and the qdisc's *fingerprint* (kind, handle and every parameter the kernel reports; for a per-peer HTB
tree also every class's rates and bursts), and holds an ``flock`` on it for as long as it lives. So:

* a second run on the same interface sees a live record and is refused (:func:`claim`);
* the guard removes the root qdisc only while its fingerprint is still the recorded one: never a
  qdisc another run or the administrator put there;
* once the guard is gone (the kernel released its lock: a SIGKILL, a ``scancel``, a pod deletion
  that took the guard with the job), `netbench clean` finds the record, removes the qdisc if it is still exactly
  the recorded one, and drops the record (:func:`clean_dead`).

Every step that reads or changes an interface's root qdisc or the records runs under one host-wide lock
(:func:`host_lock`), so a check and the install that follows it cannot interleave with another run's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from netbench import safe_files
from netbench.emulation import naming

_RECORD_FIELDS = ("iface", "ifindex", "netns_inode", "fingerprint", "run_id", "worker_pid", "guard_pid")
_COUNTERS = {"direct_pkts"}  # reported among a qdisc's parameters, but counts traffic: not part of what was installed


def folder() -> Path:
    """The records' folder, created root-only on first use."""
    return naming.private_folder(naming.REGISTRY_DIR / "host-shaping")


@contextlib.contextmanager
def host_lock() -> Iterator[None]:
    """Serialise every check-and-change of host qdiscs and records on this host (blocking ``flock``)."""
    fd = naming.open_lock(folder() / "host.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def own_netns_inode() -> int:
    return os.stat("/proc/self/ns/net").st_ino


def fingerprint(ipr: Any, index: int) -> dict[str, Any] | None:
    """The root qdisc of ``index`` exactly: kind, handle and the parameters the kernel reports (None: none).

    An HTB root's own parameters are generic (any HTB at ``1:`` with ``default 0`` has them), so
    its fingerprint adds every class: handle, parent, rates, ceilings and bursts.
    """
    from netbench.emulation.shaping import TC_H_ROOT  # late: keeps networkx, pyroute2 off this module's import

    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == TC_H_ROOT:
            kind = str(msg.get_attr("TCA_KIND"))
            found = {"kind": kind, "handle": int(msg["handle"]), "options": _options(msg)}
            if kind == "htb":
                found["classes"] = sorted(
                    ([int(c["handle"]), int(c["parent"]), _options(c)] for c in ipr.get_classes(index=index)),
                    key=lambda c: c[0],
                )
            return found
    return None


def _options(msg: Any) -> dict[str, Any]:
    """A qdisc's or class's TCA_OPTIONS as plain data, without the counters some kinds report among them."""
    options = msg.get_attr("TCA_OPTIONS")
    return {name: _plain(value) for name, value in (options["attrs"] if options else [])}


def _plain(value: Any) -> Any:
    """A netlink attribute's value as plain JSON data, so fingerprints compare after a round trip."""
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in dict(value).items() if k != "attrs" and k not in _COUNTERS}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


@dataclass(frozen=True)
class Record:
    """One interface netbench shaped: where, for which run and process, and exactly what it installed."""

    iface: str
    ifindex: int
    netns_inode: int
    fingerprint: dict[str, Any]
    run_id: str
    worker_pid: int
    guard_pid: int

    @property
    def path(self) -> Path:
        return record_path(self.netns_inode, self.ifindex)


def record_path(netns_inode: int, ifindex: int) -> Path:
    return folder() / f"{netns_inode}-{ifindex}.json"


def _read(fd: int) -> Record | None:
    """The record in the open file ``fd``, or None when it is unreadable or not one of ours."""
    try:
        data = json.loads(os.pread(fd, 1 << 20, 0).decode())
        return Record(**{name: data[name] for name in _RECORD_FIELDS})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _held(fd: int) -> bool:
    """True while another process (a live guard) holds the record's lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def busy_reason(ipr: Any, iface: str, ifindex: int) -> str | None:
    """Under :func:`host_lock`: why another netbench run's record forbids shaping this interface now (None: none does).

    A live guard's record refuses it. A dead guard's record refuses it while its qdisc is still
    there (`netbench clean --host-qdiscs` removes both); once that qdisc is gone the record is
    stale, and is dropped here.
    """
    path = record_path(own_netns_inode(), ifindex)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        record, live = _read(fd), _held(fd)
    finally:
        os.close(fd)
    if live:
        who = f"netbench run {record.run_id} (worker pid {record.worker_pid})" if record else "another netbench run"
        return f"{iface} is shaped by {who}: one run per interface at a time"
    if record is not None and record.iface == iface and fingerprint(ipr, ifindex) == record.fingerprint:
        return (
            f"{iface} still has the qdisc of netbench run {record.run_id}, whose worker was killed: "
            f"`netbench clean --host-qdiscs` removes it"
        )
    path.unlink(missing_ok=True)
    return None


def remove_if_ours(ipr: Any, record: Record) -> bool:
    """Delete the root qdisc of the record's interface only if it is still exactly the recorded one; True if deleted."""
    found = ipr.link_lookup(ifname=record.iface)
    if found != [record.ifindex] or fingerprint(ipr, record.ifindex) != record.fingerprint:
        return False
    major = record.fingerprint["handle"] >> 16
    ipr.tc("del", index=record.ifindex, handle=f"{major:x}:", root=True)
    return True


def claim(record: Record) -> int:
    """Under :func:`host_lock`: write the record and hold its lock for the caller's life; returns the descriptor."""
    fd = safe_files.create_new(record.path, os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, json.dumps(asdict(record)).encode())
    os.fsync(fd)
    return fd


def release(record: Record, fd: int) -> None:
    """Under :func:`host_lock`: drop the record, then its lock."""
    record.path.unlink(missing_ok=True)
    os.close(fd)


def dead_records() -> list[tuple[Path, Record | None]]:
    """Under :func:`host_lock`: records whose guard is gone (None for a record file that cannot be read)."""
    found = []
    for path in sorted(folder().glob("*.json")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not _held(fd):
                found.append((path, _read(fd)))
        finally:
            os.close(fd)
    return found
