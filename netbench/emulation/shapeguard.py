"""The guard that owns a real host's qdisc for `netbench worker --bw` or `--topology`: adds it, removes it when the
worker goes.

A worker cannot be trusted to clean up after itself: its signal handlers wait on a gloo collective, and torchrun
SIGKILLs it 30 s after SIGTERM. So the qdisc belongs to this small process instead. The worker starts it (its own
session: a Ctrl-C or a group kill aimed at the worker does not reach it, and it ignores SIGINT/SIGTERM/SIGHUP
besides) and writes one JSON line to its stdin. The guard opens a pidfd on the worker, then, under the host-wide lock
(:func:`hostrecords.host_lock`), refuses an interface another run shapes or whose root is not the kernel's default,
adds the qdisc (a tbf, or the per-peer HTB tree: whichever shaping the request names), and records it
(:mod:`netbench.emulation.hostrecords`), holding the record's lock. It answers with one JSON line and waits until the
worker exits (the pidfd: however it ends, SIGKILL included, whatever children it forked that still hold the pipe) or
asks for the release (a line, or end-of-file, on stdin). It then removes the root qdisc only if it is still exactly
the one it added (kind, handle, every parameter) and drops the record: never a qdisc netbench did not add.

If the guard itself is killed (it shares the job's cgroup, so ``scancel``, ``systemctl stop`` or a pod deletion take
it too), the record stays for `netbench clean --host-qdiscs`.

Protocol: stdin ``{"iface", "shaping", "offload", "acks_first", "run_id", "worker_pid"}`` (``shaping``: a
:data:`~netbench.emulation.hostshaping.HostShaping` as JSON); stdout ``{"installed": {...}}``, ``{"error": "...",
"refused": true}`` (one line for the user) or ``{"error": "...", "errno": N}``.
"""

from __future__ import annotations

import json
import os
import select
import sys
from typing import Any

from netbench import signals
from netbench.emulation import hostrecords


def watch(pid: int) -> int | None:
    """A pidfd on ``pid``, provided it is still this guard's parent (so the number was not reused); None otherwise."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    if os.getppid() != pid:
        os.close(pidfd)
        return None
    return pidfd


def wait_for_owner(pidfd: int) -> None:
    """Block until the worker exits (pidfd readable) or writes to or closes its end of stdin."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(0, select.POLLIN | select.POLLHUP)
    while not poller.poll():
        pass


def install(ipr: Any, config: dict) -> tuple[dict[str, Any], tuple[hostrecords.Record, int] | None]:
    """Under the host lock: refuse, or add the qdisc and claim its record; (answer, (record, its fd) or None)."""
    from pyroute2.netlink.exceptions import NetlinkError  # late: keeps pyroute2 off this module's import

    from netbench.emulation.hostshaping import (  # late: keeps networkx, pyroute2 off this module's import
        foreign_root_message,
        parse_shaping,
    )  # late: keeps networkx, pyroute2 off this module's import

    iface, plan = config["iface"], parse_shaping(config["shaping"])
    found = ipr.link_lookup(ifname=iface)
    if not found:
        return {"error": f"--iface: no interface {iface!r} in this network namespace", "refused": True}, None
    index = found[0]
    busy = hostrecords.busy_reason(ipr, iface, index)
    root = hostrecords.fingerprint(ipr, index)
    if busy is None and root is not None and root["handle"] != 0:
        busy = foreign_root_message(iface, root["kind"], root["handle"])
    if busy is not None:
        return {"error": busy, "refused": True}, None
    try:
        installed = plan.install(ipr, index, config["offload"], config["acks_first"])
    except NetlinkError as exc:
        undo_partial(ipr, index, plan.root_kinds)
        return {"error": str(exc), "errno": exc.code}, None
    record = hostrecords.Record(
        iface=iface,
        ifindex=index,
        netns_inode=hostrecords.own_netns_inode(),
        fingerprint=hostrecords.fingerprint(ipr, index),
        run_id=config["run_id"],
        worker_pid=config["worker_pid"],
        guard_pid=os.getpid(),
    )
    try:
        return {"installed": installed}, (record, hostrecords.claim(record))
    except OSError as exc:  # no record, no qdisc: nothing may outlive the guard unrecorded
        hostrecords.remove_if_ours(ipr, record)
        return {"error": f"cannot record the shaping of {iface} in {record.path.parent}: {exc.strerror}"}, None


def undo_partial(ipr: Any, index: int, kinds: tuple[str, ...]) -> None:
    """After a failed install: the root was the kernel's default under the host lock, so a root of ours at 1: is what
    the install left half built (with its classes, leaves and filters); delete it."""
    from netbench.emulation.shaping import (  # late: keeps networkx, pyroute2 off this module's import
        OUR_HANDLE,
        root_qdisc,
    )  # late: keeps networkx, pyroute2 off this module's import

    root = root_qdisc(ipr, index)
    if root is not None and root[1] == OUR_HANDLE and root[0] in kinds:
        ipr.tc("del", index=index, handle="1:", root=True)


def serve(config: dict) -> None:
    from pyroute2 import IPRoute  # late: keeps pyroute2 off this module's import

    pidfd = watch(config["worker_pid"])
    if pidfd is None:
        print(json.dumps({"error": "the worker exited before its shaping guard started"}), flush=True)
        return
    with hostrecords.host_lock(), IPRoute() as ipr:
        answer, claimed = install(ipr, config)
    print(json.dumps(answer), flush=True)
    if claimed is None:
        return
    wait_for_owner(pidfd)
    record, fd = claimed
    with hostrecords.host_lock(), IPRoute() as ipr:
        try:
            hostrecords.remove_if_ours(ipr, record)
        except Exception:
            os.close(fd)  # the record stays, its lock free: `netbench clean --host-qdiscs` tries again
            raise
        hostrecords.release(record, fd)


def main() -> None:
    signals.ignore()  # only the worker's exit or its release request ends the guard
    serve(json.loads(sys.stdin.readline()))


if __name__ == "__main__":
    main()
