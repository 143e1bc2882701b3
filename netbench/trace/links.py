"""Counter tracks of the links: each direction's throughput in 10 ms bins, the switch's held bytes, the trunks.

From the capture where there is one: every packet a switch port saw, by its kernel timestamp
(CLOCK_REALTIME, the clock the workers' ``t_start`` reads), binned by 10 ms; ``up`` is what the
node sent, ``down`` what it received. Where a single switch carries every packet (the star), the
bytes that entered it minus those that left are what its delay line and port queues hold. Without
a capture, each rank's interface counters per step give one value per step. Trunks (topologies)
come from trunks.csv, per step of the slowest rank.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from netbench.rundir.steps_schema import Col
from netbench.trace import events as ev

BIN_S = 0.01


def mbit_per_s(nbytes: float, seconds: float) -> float:
    return round(nbytes * 8 / seconds / 1e6, 4) if seconds > 0 else 0.0


def binned(packets: Iterable[tuple], origin: float) -> dict[str, dict[int, int]]:
    """Wire bytes per 10 ms bin (index from ``origin``), by direction."""
    bins: dict[str, dict[int, int]] = {"tx": defaultdict(int), "rx": defaultdict(int)}
    for row in packets:
        bins[row[1]][int((row[0] - origin) // BIN_S)] += row[4]
    return bins


def counter_track(pid: int, name: str, by_bin: Mapping[int, float], unit: str, scale) -> list[ev.Event]:
    """A counter that changes only where its value does: each bin's value, and a return to 0 after a gap."""
    out, last = [], None
    for i in sorted(by_bin):
        if last is not None and last[0] != i - 1 and last[1] != 0:
            out.append(ev.counter(pid, name, (last[0] + 1) * BIN_S, **{unit: 0.0}))
        value = scale(by_bin[i])
        if last is None or last[0] != i - 1 or value != last[1]:
            out.append(ev.counter(pid, name, i * BIN_S, **{unit: value}))
        last = (i, value)
    if last is not None and last[1] != 0:
        out.append(ev.counter(pid, name, (last[0] + 1) * BIN_S, **{unit: 0.0}))
    return out


def capture_events(
    pcaps: Mapping[int, Path], addresses: Mapping[int, str], origin: float, one_switch: bool
) -> list[ev.Event]:
    """Each node's up and down link from its capture, and (one switch only) the bytes held in the switch."""
    from netbench.capture.pcap import packets  # late: scapy: only where a capture is read

    out: list[ev.Event] = []
    held: dict[int, int] = defaultdict(int)
    for node, path in sorted(pcaps.items()):
        bins = binned(packets(path, addresses[node]), origin)
        for direction, label in (("tx", "up"), ("rx", "down")):
            out += counter_track(
                ev.LINKS_PID, f"node {node} {label} (Mbit/s)", bins[direction], "Mbit/s", lambda b: mbit_per_s(b, BIN_S)
            )
        for i, b in bins["tx"].items():
            held[i] += b
        for i, b in bins["rx"].items():
            held[i] -= b
    if one_switch and held:
        out += held_events(held)
    return out


def held_events(net_by_bin: Mapping[int, int]) -> list[ev.Event]:
    """Bytes inside the switch (entered minus left) at the end of each 10 ms bin: the delay line's queue and the
    ports'.
    """
    out, level = [], 0
    for i in range(min(net_by_bin), max(net_by_bin) + 1):
        level += net_by_bin.get(i, 0)
        out.append(
            ev.counter(ev.LINKS_PID, "switch queue: delay line + ports (bytes)", (i + 1) * BIN_S, bytes=max(level, 0))
        )
    return out


def counter_events(steps: Iterable[dict[str, Any]], node_of_rank: Mapping[int, int], origin: float) -> list[ev.Event]:
    """Without a capture: each node's interface counters, one value per step of its first rank."""
    first = {node: rank for rank, node in sorted(node_of_rank.items(), reverse=True)}  # the lowest rank of each node
    out = []
    for r in sorted(steps, key=lambda r: (r[Col.RANK], r[Col.STEP])):
        node = node_of_rank.get(r[Col.RANK])
        if node is None or first.get(node) != r[Col.RANK]:
            continue
        t0, t1 = r[Col.T_START] - origin, r[Col.T_END] - origin
        for field, label in ((Col.TX_BYTES, "up"), (Col.RX_BYTES, "down")):
            out.append(
                ev.counter(
                    ev.LINKS_PID,
                    f"node {node} {label} (Mbit/s, per step)",
                    t0,
                    **{"Mbit/s": mbit_per_s(r.get(field) or 0, t1 - t0)},
                )
            )
    return out


def trunk_events(trunks_csv: Path, step_ends: Mapping[int, float], origin: float) -> list[ev.Event]:
    """Each trunk direction's throughput per step of the slowest rank, from trunks.csv (topologies only)."""
    if not trunks_csv.is_file():
        return []
    with trunks_csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for row in rows:
        try:
            step, nbytes = int(row["step"]), int(row["tx_bytes"])
        except (KeyError, ValueError):
            continue
        t0, t1 = step_ends.get(step - 1), step_ends.get(step)
        if t0 is None or t1 is None:
            continue
        name = f"trunk {row.get('link', '?')} {row.get('direction', '')} (Mbit/s, per step)"
        out.append(ev.counter(ev.LINKS_PID, name, t0 - origin, **{"Mbit/s": mbit_per_s(nbytes, t1 - t0)}))
    return out
