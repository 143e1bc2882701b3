"""Keep each flow on one CPU's receive backlog (RPS), so a veth never reorders a TCP flow.

A veth hands every packet to the receive backlog of the CPU that transmitted it. Behind a tbf that
CPU changes packet by packet: the sender's CPU dequeues when it enqueues, the CPU whose timer fires
dequeues otherwise. Two backlogs drain in parallel, so consecutive packets of one flow overtake
each other; the sender sees SACK "reordering", retransmits spuriously and loses goodput (measured
at 10gbit: 68-405 retransmissions in 4 s, TCPSACKReorder > 0, none with RPS). Receive packet
steering picks the backlog by flow hash instead, the same CPU for every packet of a flow.

RPS is set in sysfs, which shows the devices of the namespace that mounted it: the writer mounts
a fresh sysfs in a private mount namespace (call it inside the network namespace, in a forked
child such as :func:`netbench.emulation.netns.call_in`, which is single-threaded).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 0x40000


def cpu_mask(cpus: set[int]) -> str:
    """The sysfs bitmap for ``cpus``: hex words of 32 bits, most significant first, comma separated."""
    value = sum(1 << cpu for cpu in cpus)
    words = []
    while True:
        words.append(f"{value & 0xFFFFFFFF:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words))


def _private_sysfs() -> Path:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(mount) for a private sysfs")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making mounts private")
    if libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mounting sysfs for this network namespace")
    return Path("/sys/class/net")


def steer_flows(ifnames: list[str]) -> bool:
    """Enable RPS over every CPU this process may use on each rx queue of ``ifnames``; False where not allowed.

    Call inside the interfaces' network namespace, in a disposable single-threaded process. The
    kernel lets only the host's root set RPS (CAP_NET_ADMIN in the initial user namespace), so a
    rootless cluster goes without: its fastest links may then reorder (see the module docstring).
    """
    try:
        net = _private_sysfs()
        mask = cpu_mask(os.sched_getaffinity(0))
        for ifname in ifnames:
            for queue in sorted((net / ifname / "queues").glob("rx-*")):
                (queue / "rps_cpus").write_text(mask)
    except PermissionError:
        return False
    return True
