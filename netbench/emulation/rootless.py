"""Run netbench without root: re-execute inside user + network + mount namespaces.

``unshare -Urnm`` maps the user to root inside a fresh user namespace, which may create network
namespaces, veths and qdiscs. A private tmpfs on /run gives it a writable /run/netns. The "host"
namespace is then itself a throwaway, so nothing of the real host is touched.
"""

from __future__ import annotations

import os
import shutil
import sys

from netbench.emulation.capabilities import _user_namespaces_allowed

MARKER = "NETBENCH_ROOTLESS"


class RootlessError(RuntimeError):
    """Neither root nor unprivileged user namespaces are available."""


def ensure_privileges() -> None:
    """Return if root; else re-exec this command under unshare, or raise with the reason."""
    if os.geteuid() == 0:
        return
    if os.environ.get(MARKER):
        raise RootlessError("still not root inside the user namespace; the kernel refused the mapping")
    if not _user_namespaces_allowed():
        raise RootlessError(
            "netbench needs root, or unprivileged user namespaces (sysctl user.max_user_namespaces > 0 "
            "and kernel.unprivileged_userns_clone = 1); run it with sudo"
        )
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RootlessError("running without root needs unshare(1) from util-linux")
    script = 'mount -t tmpfs netbench-run /run && exec "$@"'
    argv = [unshare, "-Urnm", "--propagation", "private", "sh", "-c", script, "netbench", sys.executable, "-m", "netbench", *sys.argv[1:]]
    os.environ[MARKER] = "1"
    os.execv(unshare, argv)
