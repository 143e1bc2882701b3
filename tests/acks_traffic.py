"""Whether a shaper serves pure ACKs first, for the emulator's links and `netbench worker`'s host shaping alike: the
trees tc shows, a UDP flood that fills one node's shaped queue toward another, and the round trip TCP keeps for a flow
whose ACKs cross that full queue."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SINK_PORT", "acked_round_trip_ms", "acks_first_trees", "flood", "while_flooded"]

SINK_PORT = 5301
DATAGRAM = b"\0" * 1400
SO_SNDBUFFORCE = 32  # root may raise a socket's send buffer past wmem_max: enough to fill tbf's whole queue
SEND_BUFFER_BYTES = 8 << 20
FILL_S = 1.5  # a queue of 1010 frames fills in 1.2 s at 10mbit


def flood(address: str, seconds: float) -> int:
    """Send full-size UDP datagrams to ``address`` for ``seconds``: the sender's uplink queue fills to its limit."""
    sent, end = 0, time.monotonic() + seconds
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SEND_BUFFER_BYTES)
        while time.monotonic() < end:
            try:
                sock.sendto(DATAGRAM, (address, 9))
                sent += 1
            except OSError:  # the queue is full
                time.sleep(0.001)
    return sent


def while_flooded(flooded: Any, other: Any, seconds: float, measure: Callable[[Any, Any], Any]) -> Any:
    """Fill ``flooded``'s queue toward ``other`` with its own data, then ``measure(flooded, other)`` while it stays
    full."""
    filler = threading.Thread(target=flooded.call, args=(flood, other.address, seconds))
    filler.start()
    time.sleep(FILL_S)
    try:
        return measure(flooded, other)
    finally:
        filler.join()


def _round_trip_ms(node: Any, port: int) -> float:
    """The smoothed round trip TCP keeps for ``node``'s connection to ``port``."""
    out = node.run(["ss", "-tinH", "state", "established", "dport", f"= :{port}"]).stdout
    return float(re.search(r" rtt:([0-9.]+)/", out).group(1))


def acked_round_trip_ms(flooded: Any, other: Any) -> float:
    """``other`` sends a TCP flow to ``flooded``, whose queue toward ``other`` is kept full (it carries the flow's
    ACKs); the flow's smoothed round trip, in ms, once the queue has been full for 1.5 s."""
    sink = flooded.python("netbench.emulation.traffic", "tcp-sink", str(SINK_PORT), "30", stdout=subprocess.PIPE)
    sink.stdout.readline()  # listening
    source = other.python("netbench.emulation.traffic", "tcp-source", flooded.address, str(SINK_PORT), "7")
    time.sleep(1.0)
    rtt_ms = while_flooded(flooded, other, 5.0, lambda *_: (time.sleep(1.5), _round_trip_ms(other, SINK_PORT))[1])
    source.wait(timeout=30)
    sink.wait(timeout=30)
    return rtt_ms


def acks_first_trees(node: Any) -> dict[str, str]:
    """Each ACKs-first tree on ``node``'s interface, by the class it sits beneath: an htb below the root whose two
    bands hold a pfifo each and whose u32 filter sends to the first."""
    qdiscs = json.loads(node.run(["tc", "-j", "qdisc", "show", "dev", node.iface], check=True).stdout)
    found = {}
    for tree in qdiscs:
        if tree["kind"] != "htb" or tree.get("root"):
            continue
        root = tree["handle"]
        bands = sorted(q["parent"] for q in qdiscs if q["kind"] == "pfifo" and q.get("parent", "").startswith(root))
        filters = node.run(["tc", "filter", "show", "dev", node.iface, "parent", root], check=True).stdout
        if bands == [f"{root}1", f"{root}2"] and " u32 " in filters and f"flowid {root}1 " in filters:
            found[tree["parent"]] = root
    return found
