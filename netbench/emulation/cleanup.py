"""Find and remove what killed runs left behind, and only netbench's own objects.

Everything a run creates lives inside its ``netbench-<run_id>-*`` namespaces (links, qdiscs,
iptables rules, the delay line), so cleaning means: kill the processes inside those namespaces,
then delete the namespaces, and the run's folders in the temporary directory (:mod:`netbench.emulation.tmpfolders`:
the delay lines' counters, the nodes' ``$TMPDIR``).
Runs whose owner process is still alive are left alone unless forced.
On real hosts, :func:`host_qdiscs` removes the qdiscs whose shaping guard was killed, exactly those
its record names (:mod:`netbench.emulation.hostrecords`), never one a live guard still owns.

:func:`traces_of` answers the narrower question "what is left of *this* run", for fault tests and
the soak script, which share the host with other runs and must never judge by theirs.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pyroute2 import IPRoute

from netbench.emulation import hostrecords, naming, netns, tmpfolders


@dataclass
class Leftovers:
    run_ids: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    stale_registrations: list[str] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # in the temporary directory (netbench.emulation.tmpfolders)

    @property
    def empty(self) -> bool:
        return not (self.namespaces or self.pids or self.stale_registrations or self.folders)


def find_leftovers(include_live: bool = False, only: Collection[str] = ()) -> Leftovers:
    """Namespaces, processes and registry entries of runs whose owner is gone (of the runs ``only`` names, if given)."""
    found = Leftovers()
    for name in netns.list_netns():
        run_id = naming.run_id_of(name)
        if run_id is None or (only and run_id not in only) or (not include_live and naming.owner_alive(run_id)):
            continue
        found.namespaces.append(name)
        if run_id not in found.run_ids:
            found.run_ids.append(run_id)
    found.pids = netns.pids_in(found.namespaces)
    found.stale_registrations = [
        r
        for r in naming.registered_run_ids()
        if (not only or r in only) and (include_live or not naming.owner_alive(r))
    ]
    folders = tmpfolders.leftovers(set(only) if only else None)
    found.folders = [
        f for run_id, fs in sorted(folders.items()) if include_live or not naming.owner_alive(run_id) for f in fs
    ]
    return found


def clean(include_live: bool = False, only: Collection[str] = ()) -> Leftovers:
    """Remove leftovers (of the runs ``only`` names, if given); returns what was removed."""
    found = find_leftovers(include_live, only)
    netns.kill_pids(found.pids)
    for name in found.namespaces:
        netns.remove(name)
    for run_id in found.stale_registrations:
        naming.unregister(naming.RunNames(run_id))
    for folder in found.folders:  # every delay line's counters, a topology's other switches' too, and the nodes' TMPDIR
        tmpfolders.remove(folder)
    return found


@dataclass(frozen=True)
class HostQdisc:
    """A host interface's qdisc that a killed `netbench worker` left (by its record)."""

    iface: str
    run_id: str
    present: bool  # the recorded qdisc was still there, exactly (else only its record was left)


def host_qdiscs(dry_run: bool = False, only: Collection[str] = ()) -> list[HostQdisc]:
    """Records of host shaping whose guard is gone (of the runs ``only`` names, if given); unless ``dry_run``,
    remove each recorded qdisc that is still exactly as recorded, and the record."""
    found = []
    with hostrecords.host_lock():
        for path, record in hostrecords.dead_records():
            if only and (record is None or record.run_id not in only):
                continue
            where = _netns_with_inode(record.netns_inode) if record else None
            present = False
            if where is not None:
                present = (
                    netns.call_in(where, _remove_recorded, record, dry_run)
                    if where
                    else _remove_recorded(record, dry_run)
                )
            if not dry_run:
                path.unlink(missing_ok=True)
            found.append(HostQdisc(record.iface if record else path.name, record.run_id if record else "?", present))
    return found


def _netns_with_inode(inode: int) -> str | None:
    """'' for this process's own network namespace, the name of a named one with that inode, None if it is gone."""
    if inode == hostrecords.own_netns_inode():
        return ""
    return next((name for name in netns.list_netns() if netns.inode_of(name) == inode), None)


def _remove_recorded(record: hostrecords.Record, dry_run: bool) -> bool:
    """In the record's namespace: whether its qdisc is still exactly there, removed unless ``dry_run``."""

    with IPRoute() as ipr:
        if dry_run:
            return (
                ipr.link_lookup(ifname=record.iface) == [record.ifindex]
                and hostrecords.fingerprint(ipr, record.ifindex) == record.fingerprint
            )
        return hostrecords.remove_if_ours(ipr, record)


def namespaces_of(run_id: str) -> list[str]:
    return [name for name in netns.list_netns() if naming.RunNames(run_id).owns(name)]


def inodes_of(run_id: str) -> set[int]:
    """Inodes of the run's namespaces now; a process inside one keeps seeing that inode after the name is gone."""
    return {ino for ino in map(netns.inode_of, namespaces_of(run_id)) if ino is not None}


def running(pid: int) -> bool:
    """True for a live process; a killed orphan is a zombie until init reaps it, which counts as gone."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _inodes_named_by_others(run_id: str) -> set[int]:
    """Inodes of namespaces that now carry a name not of ``run_id``.

    The kernel hands a freed namespace's inode number to the next namespace created (lowest free
    number), so once a run's namespaces are gone, another run's new ones often have the very
    inodes recorded for it: their processes are not this run's traces. A namespace of this run
    that a leftover process keeps alive still holds its inode, so no other can have it.
    """
    names = naming.RunNames(run_id)
    return {ino for name in netns.list_netns() if not names.owns(name) and (ino := netns.inode_of(name)) is not None}


def _same_user_namespace(pid: int, own: int | None) -> bool:
    """A run's processes stay in its creator's user namespace; a rootless run of someone else's has its own."""
    try:
        return os.stat(f"/proc/{pid}/ns/user").st_ino == own
    except OSError:
        return False


def processes_of(run_id: str, known_inodes: Iterable[int] = ()) -> list[int]:
    """Live processes inside the run's namespaces (by inode, ``known_inodes`` included) or whose command line names the
    run.

    A process matched by inode alone counts only while no other namespace is named with that inode and it shares our
    user namespace (see :func:`_inodes_named_by_others`).
    """
    wanted = (set(known_inodes) | inodes_of(run_id)) - _inodes_named_by_others(run_id)
    own_userns = os.stat("/proc/self/ns/user").st_ino
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid() or not running(proc.pid):
            continue
        try:
            inside = os.stat(f"/proc/{proc.pid}/ns/net").st_ino in wanted and _same_user_namespace(proc.pid, own_userns)
        except OSError:
            inside = False
        if inside or any(run_id in arg for arg in proc.info["cmdline"] or ()):
            found.append(proc.pid)
    return found


def traces_of(run_id: str, known_inodes: Iterable[int] = ()) -> dict[str, object]:
    """Everything of ``run_id`` still on the host: all values empty or False when it left nothing."""
    return {
        "namespaces": namespaces_of(run_id),
        "registered": run_id in naming.registered_run_ids(),
        "processes": processes_of(run_id, known_inodes),
    }
