"""Segmentation offloads on veths, set through pyroute2's ethtool (ioctl in the caller's namespace).

With TSO/GSO on, one skb can carry up to 64 KiB of TCP payload under a single set of headers, so
interface counters and captures no longer see real Ethernet frames. Turning them off makes every
skb one frame, at a per-packet CPU cost that caps throughput near 4-5 Gbit/s on two cores.
"""

from __future__ import annotations

from pyroute2.ethtool import Ethtool

SEGMENTATION_FEATURES = (
    "tx-tcp-segmentation",
    "tx-tcp6-segmentation",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-generic-segmentation",
    "rx-gro",
)


def set_segmentation(ifnames: list[str], enabled: bool) -> None:
    """Enable or disable TSO/GSO/GRO on ``ifnames`` (call inside their namespace)."""
    tool = Ethtool()
    try:
        for ifname in ifnames:
            features = tool.get_features(ifname)
            for name in SEGMENTATION_FEATURES:
                feature = features.features.get(name)
                if feature is not None and feature.available:
                    feature.enable = enabled
            tool.set_features(ifname, features)
    finally:
        tool.close()


def segmentation_state(ifname: str) -> dict[str, bool]:
    """Current TSO/GSO/GRO flags of ``ifname`` (call inside its namespace)."""
    tool = Ethtool()
    try:
        features = tool.get_features(ifname).features
        return {name: bool(features[name].enable) for name in SEGMENTATION_FEATURES if name in features}
    finally:
        tool.close()
