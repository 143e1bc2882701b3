"""Capture on the node ports of several switches (a topology): one tcpdump set per switch namespace, seen as one."""

from __future__ import annotations

from pathlib import Path

from netbench.capture.tcpdump import Capture

__all__ = ["SwitchCaptures"]


class SwitchCaptures:
    """:class:`Capture` on each switch's node ports; ``stop()`` merges their pcaps and drops (port names are unique)."""

    def __init__(self, captures: list[Capture]) -> None:
        self.captures = captures

    def start(self, timeout_s: float = 10.0) -> None:
        for capture in self.captures:
            capture.start(timeout_s)

    def stop(self) -> tuple[dict[str, Path], dict[str, int]]:
        paths: dict[str, Path] = {}
        dropped: dict[str, int] = {}
        for capture in self.captures:
            p, d = capture.stop()
            paths.update(p)
            dropped.update(d)
        return paths, dropped
