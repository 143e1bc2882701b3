"""Byte and packet counters of a topology's trunks, read in the switch namespaces (a node cannot see a trunk).

Each trunk end sends one direction of its link: the a end's transmit counters are the link's ``fwd`` direction, the
b end's its ``rev``. The orchestrator samples them once every worker has joined the process group (the workers wait
for that sample before their first step, so the rendezvous's bytes are left out) and whenever the slowest worker
finishes a step, and writes the per-step differences to the run directory's ``trunks.csv`` beside the nodes' own
per-step counters.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from netbench import safe_files
from netbench.counters import PROC_NET_DEV, IfaceCounters, parse_proc_net_dev
from netbench.emulation import netns
from netbench.emulation.fabric import Fabric

__all__ = ["TrunkCounters", "read_ports", "TRUNKS_CSV"]

TRUNKS_CSV = "trunks.csv"
FIELDS = ("step", "link", "direction", "tx_bytes", "tx_packets")


def read_ports(ports: list[str]) -> dict[str, IfaceCounters]:
    """Counters of ``ports`` in the namespace the caller is in."""
    with open(PROC_NET_DEV, encoding="ascii") as f:
        text = f.read()
    return {port: parse_proc_net_dev(text, port) for port in ports}


@dataclass
class TrunkCounters:
    """Samples every trunk end's transmit counters; ``rows()`` are the per-step differences."""

    fabric: Fabric
    samples: list[tuple[int, dict[str, IfaceCounters]]] = field(default_factory=list)

    def _ends(self) -> dict[str, list[tuple[str, str]]]:
        """Switch namespace -> [(port, ``link:fwd|rev``)] of the trunk ends it holds."""
        ends: dict[str, list[tuple[str, str]]] = {}
        for pair in self.fabric.trunk_ports:
            for port in pair:
                ends.setdefault(self.fabric.netns(port.switch), []).append((port.name, port.egress.label))
        return ends

    def read(self) -> dict[str, IfaceCounters]:
        """Every trunk direction's transmit counters now, by ``link:fwd|rev``."""
        now: dict[str, IfaceCounters] = {}
        for ns, ends in self._ends().items():
            counted = netns.call_in(ns, read_ports, [port for port, _ in ends])
            now.update({label: counted[port] for port, label in ends})
        return now

    def sample(self, step: int) -> None:
        """Record the counters at the end of ``step`` (0: before the first step)."""
        if self.fabric.trunk_ports and (not self.samples or self.samples[-1][0] != step):
            self.samples.append((step, self.read()))

    def restart(self) -> None:
        """Count from now: every worker has joined, so what crossed the trunks so far was the rendezvous's
        (the store, gloo's connections), no step's."""
        self.samples.clear()
        self.sample(0)

    def rows(self) -> list[dict[str, object]]:
        rows = []
        for (_, before), (step, after) in zip(self.samples, self.samples[1:]):
            for label, now in after.items():
                link, direction = label.rsplit(":", 1)
                delta = now - before[label]
                rows.append(
                    {
                        "step": step,
                        "link": link,
                        "direction": direction,
                        "tx_bytes": delta.tx_bytes,
                        "tx_packets": delta.tx_packets,
                    }
                )
        return rows

    def write(self, path) -> None:
        """``trunks.csv``: one row per trunk direction per step (bytes and packets sent in that step)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(self.rows())
        safe_files.write_text(path, out.getvalue())
