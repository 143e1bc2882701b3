"""The guard that owns a real host's qdisc for `netbench worker --bw`: adds it, and removes it when the worker goes.

A worker cannot be trusted to clean up after itself: its signal handlers wait on a gloo collective,
and torchrun SIGKILLs it 30 s after SIGTERM. So the qdisc belongs to this small process instead.
The worker starts it (its own session: a Ctrl-C or a group kill aimed at the worker does not reach
it, and it ignores SIGINT/SIGTERM/SIGHUP besides), writes one JSON line to its stdin and keeps the
pipe open for as long as it lives. The guard adds the qdisc, answers with one JSON line, then reads
stdin until end-of-file, which the kernel delivers however the worker ends, SIGKILL included. It
then deletes the root qdisc only if it is still the one it added (same interface, kind and handle):
never one that netbench did not add.

Protocol: stdin ``{"iface", "direction", "offload"}``; stdout ``{"installed": {...}}`` or
``{"error": "...", "errno": N}``.
"""

from __future__ import annotations

import json
import os
import sys

from netbench.emulation import signals


def _wait_for_owner() -> None:
    """Block until the owner's end of stdin closes (exit, crash or SIGKILL)."""
    while os.read(0, 4096):
        pass


def serve(config: dict) -> None:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    from netbench.emulation import shaping
    from netbench.emulation.spec import DirectionSpec

    iface = config["iface"]
    direction = DirectionSpec(**config["direction"])
    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=iface)
        try:
            installed = shaping.apply(ipr, index, direction, config["offload"], use_netem=direction.impaired)
        except NetlinkError as exc:
            shaping.clear_if(ipr, index, ours=None)
            print(json.dumps({"error": str(exc), "errno": exc.code}), flush=True)
            return
        ours = shaping.root_qdisc(ipr, index)
    print(json.dumps({"installed": installed}), flush=True)
    _wait_for_owner()
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=iface)
        if found and found[0] == index:
            shaping.clear_if(ipr, index, ours=ours)


def main() -> None:
    signals.ignore()  # only the owner's pipe ends the guard
    serve(json.loads(sys.stdin.readline()))


if __name__ == "__main__":
    main()
