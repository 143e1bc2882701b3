"""What this host can emulate, found by trying it in a throwaway namespace (`netbench doctor`; the capture's own
check is :func:`netbench.capture.tcpdump.unavailable_reason`).

Kernel features are tested by use, not by reading config files: a qdisc kind is present when
adding it works, the delay line when an NFQUEUE rule loads in a throwaway namespace. Nothing here
may change the host's kernel state: no ``-m physdev`` (it loads br_netfilter, see delayline.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from pyroute2 import IPRoute

from netbench.emulation import acksfirst, netns
from netbench.emulation.delayline import install_rules
from netbench.emulation.naming import PROBE_PREFIX
from netbench.frames import FRAME_BYTES
from netbench.rootless import user_namespaces_allowed
from netbench.validation import error_text


@dataclass(frozen=True)
class Capabilities:
    root: bool
    user_namespaces: bool
    tbf: bool = False
    htb: bool = False
    acks_first: bool = False
    netem: bool = False
    nfqueue_rule: bool = False
    netfilterqueue_module: bool = False
    iperf3: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def delay_line(self) -> bool:
        return self.nfqueue_rule and self.netfilterqueue_module

    @property
    def delay_line_reason(self) -> str:
        missing = [
            what
            for what, ok in (
                ("iptables with the NFQUEUE target (apt-get install iptables)", self.nfqueue_rule),
                ("the NetfilterQueue Python package (pip install NetfilterQueue)", self.netfilterqueue_module),
            )
            if not ok
        ]
        return "missing " + ", ".join(missing) if missing else "available"

    def as_dict(self) -> dict:
        return {**asdict(self), "delay_line": self.delay_line, "delay_line_reason": self.delay_line_reason}

    def consequences(self) -> list[tuple[str, bool, str]]:
        """(feature, present, what its absence disables) for the doctor table."""
        return [
            ("root (or user namespaces)", self.root, "everything: namespaces, links and qdiscs need CAP_NET_ADMIN"),
            ("user namespaces", self.user_namespaces, "running as a non-root user"),
            ("tbf qdisc", self.tbf, "rate shaping: no cluster can be built"),
            ("htb qdisc", self.htb, "shaping a real host per peer (netbench worker --topology)"),
            (
                "pure ACKs first (htb + u32 beneath tbf)",
                self.acks_first,
                "pure ACKs wait behind the other direction's data: bidirectional bulk under bbr below the line rate",
            ),
            ("netem qdisc", self.netem, "kernel delay/jitter/loss: the userspace delay line stands in"),
            ("delay line (iptables NFQUEUE)", self.delay_line, "delay/jitter/loss when netem is absent"),
            ("iperf3", self.iperf3, "nothing: probe falls back to its built-in TCP stream"),
        ]


PROBE_TBF_LIMIT_BYTES = 65536
PROBE_TBF: dict[str, object] = {"rate": "100mbit", "burst": 16384, "limit": PROBE_TBF_LIMIT_BYTES}  # any rate would do


def _qdisc_works(ipr: IPRoute, index: int, kind: str, **kwargs: object) -> bool:
    try:
        ipr.tc("add", kind, index=index, handle="1:", **kwargs)
        ipr.tc("del", index=index, handle="1:", root=True)
        return True
    except Exception:  # noqa: BLE001 - absent kind answers "unknown qdisc" as NetlinkError
        return False


def _acks_first_works(ipr: IPRoute, index: int) -> bool:
    """Whether tbf takes the ACKs-first tree beneath it (htb, pfifo and the u32 classifier)."""
    try:
        ipr.tc("add", "tbf", index=index, handle="1:", **PROBE_TBF)
        acksfirst.install(ipr, index, "1:1", PROBE_TBF_LIMIT_BYTES // FRAME_BYTES)
        return True
    except Exception:  # noqa: BLE001 - an absent qdisc or classifier answers as NetlinkError
        return False
    finally:
        try:
            ipr.tc("del", index=index, handle="1:", root=True)
        except Exception:  # noqa: BLE001 - nothing installed is fine
            pass


def _nfqueue_rule_loads(name: str) -> bool:

    try:
        install_rules(name, up_ports=["nbprobe0"], down_ports=[])
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def _probe_inside() -> dict[str, bool]:
    """Runs inside the throwaway namespace: which qdiscs load."""
    with IPRoute() as ipr:
        ipr.link("add", ifname="nbprobe0", kind="veth", peer="nbprobe1")
        index = ipr.link_lookup(ifname="nbprobe0")[0]
        return {
            "tbf": _qdisc_works(ipr, index, "tbf", **PROBE_TBF),
            "htb": _qdisc_works(ipr, index, "htb", default=1),
            "acks_first": _acks_first_works(ipr, index),
            "netem": _qdisc_works(ipr, index, "netem", delay=1000),
        }


@functools.lru_cache(maxsize=1)
def detect() -> Capabilities:
    """Probe the host once per process."""
    root = os.geteuid() == 0
    found: dict = {
        "root": root,
        "user_namespaces": user_namespaces_allowed(),
        "iperf3": shutil.which("iperf3") is not None,
        "errors": {},
    }
    try:
        import netfilterqueue  # noqa: F401  # late: keeps netfilterqueue off this module's import

        found["netfilterqueue_module"] = True
    except ImportError as exc:
        found["errors"]["netfilterqueue"] = str(exc)
    if not root:
        return Capabilities(**found)
    name = f"netbench-{PROBE_PREFIX}{os.getpid()}-x"  # `clean` leaves it alone while this process lives
    try:
        netns.create(name)
        found.update(netns.call_in(name, _probe_inside))
        found["nfqueue_rule"] = _nfqueue_rule_loads(name)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: doctor must always answer
        found["errors"]["namespaces"] = error_text(exc)
    finally:
        netns.remove(name)
    return Capabilities(**found)
