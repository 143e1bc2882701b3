"""What a re-formed quorum costs before its first window trains: its new process group's configuration, and its first
collective on connections that have carried nothing.

torchft configures a new process group whenever its quorum changes, so under churn at every leave and every join
(:class:`netbench.worker.bounded_gloo.BoundedGloo`): a connect to the quorum's store (on one member's node), a
TCPStore client and its handshake, every member's ready key written and waited for, and gloo's full mesh (each
member's address through the store, then a connection to each peer). Each is a round trip to the store's node or to a
peer, one after the other, so the configuration is a count of round trips and a little software time.
``scripts/bench_reconfigure.py`` measures it over the emulated network, every member configuring together as after
a quorum: the constants below are its fit.

The first collective on the new group then runs on fresh TCP connections: each starts from its initial window
(:func:`netbench.model.gloo_tcp.gloo_time` with ``fresh``, as a gossip pair's first exchange is priced), where a
steady step's connections are warm. A replicator that asks for its quorum as its step begins (``full``) configures
while the step computes, so the compute hides as much of the configuration; one that asks at its outer sync
(DiLoCo) configures after its inner steps, with nothing beside it.

Measured over the emulated network (``PYTHONPATH=$PWD python3 scripts/bench_reconfigure.py``, 100mbit, the
default workload's 470,528 fp32 gradients all-reduced): the configuration is 12.2 round trips and 20 ms of the hosts'
time on 2 nodes and 20.0 and 47 ms on 4 (20.2, 19.8 and 20.0 round trips at 5, 10 and 25 ms one way alone); the
constants are the line through them in the peers, and on 6 nodes, held out, give 27.8 round trips where 27.4 were
measured. The first all-reduce's time over a warm one's on 4 nodes: 0.027, 0.054 and 0.208 s at 5, 10 and 25 ms,
where this module prices 0.022, 0.062 and 0.212 s; on 2 nodes it prices twice the 0.217 s measured at 25 ms.
"""

from __future__ import annotations

from collections.abc import Sequence

from netbench.declarations.registry import spec
from netbench.model.framing import Framing
from netbench.model.gloo_tcp import gloo_time
from netbench.model.schemes import Scheme
from netbench.shapes import ParamShape
from netbench.tcp import STOCK_LINUX, TcpSettings

__all__ = [
    "CONFIGURE_ROUND_TRIPS",
    "CONFIGURE_ROUND_TRIPS_PER_PEER",
    "CONFIGURE_SOFTWARE_S",
    "CONFIGURE_SOFTWARE_PER_PEER_S",
    "configure_time_s",
    "fresh_call_s",
    "reform_time_s",
]

# scripts/bench_reconfigure.py over the emulated network: a configuration's round trips and the hosts' own time
# (python, the store, gloo's setup) grow with the members, one more peer to look up and connect to; the fit over 2, 4
# and 6 nodes
CONFIGURE_ROUND_TRIPS = 8.3  # with two members, plus CONFIGURE_ROUND_TRIPS_PER_PEER for each further one
CONFIGURE_ROUND_TRIPS_PER_PEER = 3.9
CONFIGURE_SOFTWARE_S = 0.0065
CONFIGURE_SOFTWARE_PER_PEER_S = 0.0135


def configure_time_s(one_way_s: float, members: int) -> float:
    """A new process group's configuration among ``members`` over paths of ``one_way_s`` each way."""
    peers = max(members - 1, 1)
    round_trips = CONFIGURE_ROUND_TRIPS + CONFIGURE_ROUND_TRIPS_PER_PEER * peers
    return round_trips * 2 * one_way_s + CONFIGURE_SOFTWARE_S + CONFIGURE_SOFTWARE_PER_PEER_S * peers


def fresh_call_s(
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    members: int,
    rate_bps: float,
    one_way_s: float,
    tcp: TcpSettings,
    framing: Framing,
) -> float:
    """What the scheme's first collective call among ``members`` takes longer on fresh connections than on warm
    ones (0 where it exchanges nothing)."""
    exchange = next((e for e in scheme.exchanges(shapes, members) if e.collective != "none"), None)
    if exchange is None or members < 2 or rate_bps <= 0:
        return 0.0
    call_bytes = exchange.bytes_per_step / exchange.calls
    payload_Bps = rate_bps / 8 * framing.efficiency()

    def call_s(**state: object) -> float:
        return gloo_time(
            exchange.collective, call_bytes, members, payload_Bps, one_way_s, 0.0, framing.mss, tcp, **state
        ).time_s

    return max(call_s(fresh=True) - call_s(idle_s=0.0), 0.0)


def reform_time_s(
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    members: int,
    rate_bps: float,
    one_way_s: float,
    *,
    compute_s: float = 0.0,
    tcp: TcpSettings = STOCK_LINUX,
    framing: Framing | None = None,
) -> float:
    """Seconds a re-formed quorum of ``members`` takes before its first window trains, beyond a steady window: the
    configuration (less the step's ``compute_s`` where the scheme commits every step: the quorum is asked for as the
    step begins) and the first collective's fresh connections."""
    if one_way_s < 0 or compute_s < 0:
        raise ValueError("a path's delay and a step's compute are >= 0")
    hidden = compute_s if spec(scheme.config.name).period(scheme.config) == 1 else 0.0
    configure = max(configure_time_s(one_way_s, members) - hidden, 0.0)
    return configure + fresh_call_s(scheme, shapes, members, rate_bps, one_way_s, tcp, framing or Framing())
