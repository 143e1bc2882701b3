"""Interface byte and packet counters from /proc/net/dev.

/proc/net/dev shows the interfaces of the *reading process's* network namespace (whereas
/sys/class/net follows the namespace sysfs was mounted in), so a worker started inside a node's
namespace reads its own veth. One read is a few tens of microseconds: cheap enough per step.

TCP's ``RetransSegs`` (/proc/net/snmp) comes along: segments this network namespace sent again.
In a node's namespace those are the worker's own connections (gloo and the rendezvous store), so
loss on the emulated link shows up per step; on a real host it counts every TCP socket there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

PROC_NET_DEV = "/proc/net/dev"
PROC_NET_SNMP = "/proc/net/snmp"


class CounterError(RuntimeError):
    """The interface is not visible in this namespace."""


@dataclass(frozen=True)
class IfaceCounters:
    """Cumulative counters of one interface."""

    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    retrans_segs: int = 0  # TCP segments retransmitted from this namespace (all its sockets)

    def __sub__(self, earlier: IfaceCounters) -> IfaceCounters:
        return IfaceCounters(
            self.tx_bytes - earlier.tx_bytes,
            self.rx_bytes - earlier.rx_bytes,
            self.tx_packets - earlier.tx_packets,
            self.rx_packets - earlier.rx_packets,
            self.retrans_segs - earlier.retrans_segs,
        )

    def as_dict(self) -> dict[str, int]:
        """The counters as a step record's columns (a delta's: what the step sent and received).

        The field names are steps.csv's column names (tests/test_steps_schema.py holds them to the schema), so
        this leaf module needs no import of the run directory's format.
        """
        return asdict(self)


def parse_proc_net_dev(text: str, iface: str) -> IfaceCounters:
    """Counters of ``iface`` from the text of /proc/net/dev.

    Each data line is ``name: rx_bytes rx_packets errs drop fifo frame compressed multicast
    tx_bytes tx_packets ...``; the name is split at the colon because large counters can follow
    it without a space.
    """
    for line in text.splitlines()[2:]:
        name, sep, fields = line.partition(":")
        if sep and name.strip() == iface:
            values = fields.split()
            if len(values) < 10:
                break
            return IfaceCounters(int(values[8]), int(values[0]), int(values[9]), int(values[1]))
    raise CounterError(f"interface {iface!r} not found in {PROC_NET_DEV} of this network namespace")


def parse_retrans_segs(text: str) -> int:
    """TCP ``RetransSegs`` from the text of /proc/net/snmp (a ``Tcp:`` header line, then its values)."""
    tcp = [line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:")]
    if len(tcp) >= 2 and "RetransSegs" in tcp[0]:
        return int(tcp[1][tcp[0].index("RetransSegs")])
    raise CounterError(f"no Tcp RetransSegs in {PROC_NET_SNMP}")


def read_counters(iface: str, path: str = PROC_NET_DEV, snmp_path: str = PROC_NET_SNMP) -> IfaceCounters:
    """Current counters of ``iface`` (and the namespace's TCP retransmissions) as this process sees them."""
    with open(path, encoding="ascii") as f:
        counters = parse_proc_net_dev(f.read(), iface)
    with open(snmp_path, encoding="ascii") as f:
        return replace(counters, retrans_segs=parse_retrans_segs(f.read()))
