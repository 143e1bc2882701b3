"""Networks as graphs of nodes, switches and links: presets, topology files, rank placement (pure data, no emulator)."""

from netbench.topology.file import TopologyError, load_topology, topology_from_dict
from netbench.topology.graph import Hop, LinkSpec, NodeSpec, Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.options import topology_from_options
from netbench.topology.placement import PlacementError, parse_rank_order, place
from netbench.topology.presets import racks, sites, star, uniform_sites

__all__ = [
    "DirectionSpec",
    "Hop",
    "LinkSpec",
    "NodeSpec",
    "PlacementError",
    "Topology",
    "TopologyError",
    "load_topology",
    "parse_rank_order",
    "place",
    "racks",
    "sites",
    "star",
    "topology_from_dict",
    "topology_from_options",
    "uniform_sites",
]
