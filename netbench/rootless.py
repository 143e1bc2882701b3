"""Run netbench without root: enter fresh user + network + mount namespaces in-process.

Mapping the caller to uid 0 inside a new user namespace grants CAP_NET_ADMIN over namespaces
created there, enough for netns, veths, bridges and tbf. A private tmpfs on /run gives a writable
/run/netns. The "host" namespace is then itself a throwaway, so nothing of the real host is
touched. Must be called while the process is still single-threaded (unshare(CLONE_NEWUSER)
refuses multi-threaded callers).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
MARKER = "NETBENCH_ROOTLESS"


class RootlessError(RuntimeError):
    """Neither root nor unprivileged user namespaces are available."""


def user_namespaces_allowed() -> bool:
    try:
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
            return False
    except (OSError, ValueError):
        return False
    clone = Path("/proc/sys/kernel/unprivileged_userns_clone")
    return not clone.exists() or clone.read_text().strip() == "1"


def enter_user_namespace() -> None:
    """unshare user+net+mount, map the caller to root, mount a private /run."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self/*_map stay writable after a setuid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0:
        reason = os.strerror(ctypes.get_errno())
        threads = len(os.listdir("/proc/self/task"))
        if threads > 1:  # the kernel's EINVAL for a threaded caller says nothing about why
            reason += (
                f" ({threads} threads running: the user namespace must be entered before numpy/torch start "
                "theirs; run the `netbench` console script or `python -m netbench`)"
            )
        raise RootlessError(f"unshare(user, net, mount) failed: {reason}")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise RootlessError(f"making mounts private failed: {os.strerror(ctypes.get_errno())}")
    if libc.mount(b"netbench-run", b"/run", b"tmpfs", 0, None) != 0:
        raise RootlessError(f"mounting a private /run failed: {os.strerror(ctypes.get_errno())}")
    _loopback_up()
    os.environ[MARKER] = "1"


def _loopback_up() -> None:
    """Bring up ``lo`` of the new network namespace (born down): local gloo processes, such as the
    model's first-use calibration on 127.0.0.1, would otherwise wait forever to connect."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)  # struct ifreq: name, flags, padding to 40 bytes
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        try:
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))
        except OSError as exc:
            raise RootlessError(f"bringing up loopback failed: {exc.strerror}") from None


def ensure_privileges() -> None:
    """Return if root (real or inside our user namespace); else enter one, or raise why not."""
    if os.geteuid() == 0:
        return
    if not user_namespaces_allowed():
        raise RootlessError(
            "netbench needs root, or unprivileged user namespaces (sysctl user.max_user_namespaces > 0 "
            "and kernel.unprivileged_userns_clone = 1); run it with sudo"
        )
    enter_user_namespace()
