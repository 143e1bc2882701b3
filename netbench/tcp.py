"""The TCP settings of the nodes that decide a transfer's window: read from the namespaces, or assumed.

Declared once for both sides: the emulator reads them back from every node's namespace for run.json
(:mod:`netbench.emulation.tcpsettings`), and the model computes gloo's pipeline over TCP's window with
them (:mod:`netbench.model.gloo_tcp`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BBR_LIKE", "TcpSettings", "STOCK_LINUX"]

BBR_LIKE = frozenset({"bbr", "bbr2", "bbr3"})  # congestion controls with their own cong_control: no idle restart


class TcpSettings(BaseModel):
    """TCP settings of the nodes that decide a transfer's window (read from the namespaces, or assumed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cc: str = Field("cubic", min_length=1, description="congestion control")
    wmem_max: int = Field(212992, ge=4096, description="net.core.wmem_max (clamps an explicit SO_SNDBUF)")
    tcp_wmem_max: int = Field(4194304, ge=4096, description="net.ipv4.tcp_wmem max: autotuned send buffer limit")
    tcp_rmem_max: int = Field(6291456, ge=4096, description="net.ipv4.tcp_rmem max: autotuned receive buffer limit")
    slow_start_after_idle: bool = Field(True, description="net.ipv4.tcp_slow_start_after_idle")
    initcwnd: int = Field(10, ge=1, le=1000, description="initial congestion window (segments)")
    source: Literal["measured", "assumed"] = "assumed"

    @property
    def restarts_after_idle(self) -> bool:
        """Whether an idle connection falls back to slow start (not with bbr: it has its own cong_control)."""
        return self.slow_start_after_idle and self.cc not in BBR_LIKE


STOCK_LINUX = TcpSettings()  # a stock distribution's defaults: cubic, wmem_max 212992, tcp_wmem 4 MiB, tcp_rmem 6 MiB
