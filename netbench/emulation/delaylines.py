"""The delay line engine of every network: one process in each switch namespace that has delayed ports.

An NFQUEUE queue belongs to the namespace whose rule sent the packet, so one delay line cannot serve another
switch's ports. Each switch's line delays what enters from its nodes' uplinks and what leaves by its egresses
(:meth:`netbench.emulation.fabric.Fabric.delayed_ports`): every link direction is delayed once, where it begins or
ends, and a packet crossing a WAN link waits the sum over its path.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from netbench.emulation.fabric import Fabric
from netbench.emulation.impairment import DelayLine, ImpairmentEngine
from netbench.emulation.node import Switch
from netbench.emulation.spec import ClusterSpec

__all__ = ["DelayLines"]


class _OneSwitch(DelayLine):
    """The delay line of one switch (its counters in a fresh folder of its own, as every delay line's)."""

    def __init__(self, spec: ClusterSpec, run_id: str, switch: int) -> None:
        super().__init__(spec, run_id)
        self.switch_index = switch


class DelayLines(ImpairmentEngine):
    """A delay line per switch with delayed ports; run.json, the watch and the fidelity check see them as one, and a
    live schedule tells each line its ports' new delays (:meth:`line_of`)."""

    name = "delayline"

    def __init__(self, spec: ClusterSpec, run_id: str, fabric: Fabric, switches: list[Switch]) -> None:
        super().__init__(spec, run_id)
        self.fabric, self.switches = fabric, switches
        self.lines: list[_OneSwitch] = []

    def start(self) -> None:
        """Start a line in every switch with delayed ports."""
        for k, sw in enumerate(self.switches):
            up, down = self.fabric.delayed_ports(k)
            if up or down:
                line = _OneSwitch(self.spec, self.run_id, k)
                self.lines.append(line)  # before it starts: stop() removes its files whatever happens
                line.start_ports(sw, up, down)

    def line_of(self, switch: int) -> DelayLine | None:
        """The running line of switch ``switch`` (its ``control_path`` and ``pid`` take new delays), or None."""
        return next((line for line in self.lines if line.switch_index == switch), None)

    @property
    def proc(self) -> subprocess.Popen | None:
        """The first line's process."""
        return self.lines[0].proc if self.lines else None

    @property
    def stats_path(self) -> Path | None:
        """The first line's counters (:meth:`stats` sums every line's)."""
        return self.lines[0].stats_path if self.lines else None

    def check(self) -> None:
        for line in self.lines:
            line.check()

    def stop(self) -> None:
        for line in self.lines:
            line.stop()

    @property
    def pid(self) -> int | None:
        return self.lines[0].pid if self.lines else None

    @property
    def pids(self) -> list[int]:
        return [line.pid for line in self.lines if line.pid is not None]

    def helper_pids(self) -> dict[str, int]:
        """Every switch's line: the first as ``delay_line`` (the star's name), the others ``delay_line_sw<switch>``."""
        named = {
            ("delay_line" if i == 0 else f"delay_line_sw{line.switch_index}"): line.pid
            for i, line in enumerate(self.lines)
        }
        return {name: pid for name, pid in named.items() if pid is not None}

    def describe(self) -> dict[str, Any]:
        first = self.lines[0].describe() if self.lines else {}
        return {**first, "delay_line_switches": [line.switch_netns for line in self.lines]}

    def stats(self) -> dict[str, Any] | None:
        """The lines' counters summed (the largest lateness is the largest of any)."""
        each = [s for s in (line.stats() for line in self.lines) if s]
        if not each:
            return None
        total = {key: sum(s.get(key, 0) for s in each) for key in each[0] if key != "late_max_s"}
        total["late_max_s"] = max(s.get("late_max_s", 0.0) for s in each)
        return total
