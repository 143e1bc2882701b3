"""Let tcpdump run in a rootless user namespace: its setgroups() becomes a no-op that succeeds.

tcpdump, started as root, always drops privileges (to its build's user, or the one ``-Z`` names),
and that goes through initgroups() -> setgroups(). In a user namespace an unprivileged user
created, the kernel refuses setgroups() for good (/proc/self/setgroups says "deny"; it must, for
an unprivileged gid_map), so tcpdump exits with "Couldn't change to 'root' uid=0 gid=0". With
``-Z root`` the rest of the drop (setgid(0), setuid(0)) is a change to the ids it already has,
which the namespace maps; only setgroups() is in the way, and there the supplementary groups are
fixed anyway. A seccomp filter installed just before exec makes that one system call return 0
without doing anything, for that process only (filters are inherited, never shared upwards).
Every other call, and every other architecture's calls, go through untouched.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable

# struct seccomp_data: nr at offset 0, arch at offset 4 (linux/seccomp.h); syscall numbers per ABI.
_ARCHES = {"x86_64": (0xC000003E, 116), "aarch64": (0xC00000B7, 159)}  # (AUDIT_ARCH_*, __NR_setgroups)
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000  # ERRNO with errno 0: "succeeded"
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _PR_SET_NO_NEW_PRIVS = 22, 2, 38


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def supported() -> bool:
    """True where this module knows the system call numbers (x86-64, arm64)."""
    return platform.machine() in _ARCHES


def preexec() -> Callable[[], None]:
    """A ``preexec_fn`` step that installs the filter; everything is allocated here, in the parent.

    The child only makes two prctl() calls (no allocation after fork); if either fails, the child
    exits with status 126 before exec, so the caller sees tcpdump fail to start rather than a
    capture that silently drops privileges differently.
    """
    arch, setgroups_nr = _ARCHES[platform.machine()]
    program = (_Insn * 6)(
        _Insn(_BPF_LD_W_ABS, 0, 0, 4),  # A = arch
        _Insn(_BPF_JEQ_K, 0, 3, arch),  # another ABI: allow
        _Insn(_BPF_LD_W_ABS, 0, 0, 0),  # A = syscall number
        _Insn(_BPF_JEQ_K, 0, 1, setgroups_nr),
        _Insn(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO),  # setgroups: return 0, do nothing
        _Insn(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    )
    prog = _Prog(len(program), program)
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl

    def install() -> None:
        _ = program  # keep the instructions alive as long as the closure
        if (
            prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0
        ):
            os._exit(126)

    return install
