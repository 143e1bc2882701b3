"""The emulated cluster: N node namespaces, a namespace per switch of the network's graph, shaped veth links.

Every network is a graph (:mod:`netbench.topology`; the star, netbench's default, is one switch) built by one path:
:mod:`netbench.emulation.fabric` places the ports and routes, this module creates and shapes them. A switch routes
rather than bridges: each port has a /32 route to its node and answers ARP for the other nodes
(proxy ARP), so the nodes still share one /24 and have no default route. A routed switch is what lets the delay line
match ports with plain ``-i``/``-o`` FORWARD rules; a bridge would need ``-m physdev``, which makes the kernel load
br_netfilter where it is a module, and that turns bridge-nf-call-iptables on for every bridge on the host.

Use it as a context manager; teardown is guaranteed on normal exit, exceptions, Ctrl-C, SIGTERM and SIGHUP. While the
cluster is up those signals raise (KeyboardInterrupt, or SystemExit for the others); once teardown has begun they
wait until it has finished, so a second Ctrl-C cannot leave half a cluster behind (the state machine is
:class:`netbench.signals.StopSignals`). Callers that run a cluster should call ``cluster.down()`` themselves at the
end of the ``with`` block (teardown then begins before ``__exit__``) and ``cluster.raise_if_interrupted()`` while
they wait on it::

    with Cluster(spec) as cluster:
        server = cluster.nodes[1].popen(["iperf3", "-s", "-1"])
        ...

What adds delay, jitter and loss (nothing, netem, or the delay line) is an impairment engine
(:mod:`netbench.emulation.impairment`), chosen once from the spec and the host's capabilities: it decides the qdiscs
of every egress and runs whatever helper it needs beside the cluster.
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from netbench.emulation import fabric, netns, offload, shaping, steering, tmpfolders
from netbench.emulation.capabilities import Capabilities, detect
from netbench.emulation.delaylines import DelayLines
from netbench.emulation.errors import ClusterError, DelayLineDied
from netbench.emulation.impairment import DelayLine, ImpairmentEngine, choose
from netbench.emulation.naming import RunNames, register, unregister
from netbench.emulation.node import Node, Switch
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.emulation.tcpsettings import NODE_TCP_BUFFER_MAX, apply_tcp_settings, read_tcp_settings
from netbench.signals import StopSignals, kept_until_done, signals_held

__all__ = ["Cluster", "ClusterError", "DelayLineDied"]  # the errors live in errors.py, shared with the engines

_QUIET_SYSCTLS = {  # no IPv6 router/neighbour chatter on the measured wires
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}
_SWITCH_SYSCTLS = {  # a router between the ports that answers ARP for the nodes behind the others
    **_QUIET_SYSCTLS,
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}
_PORT_SYSCTLS = fabric.PORT_SYSCTLS  # proxy ARP on every switch port, trunks alike
_NODE_SYSCTLS = {  # TCP windows large enough for 1gbit x 400 ms round trips (BDP 50 MB)
    **_QUIET_SYSCTLS,
    "net.ipv4.tcp_rmem": f"4096 131072 {NODE_TCP_BUFFER_MAX}",
    "net.ipv4.tcp_wmem": f"4096 16384 {NODE_TCP_BUFFER_MAX}",
}


class Cluster:
    """Builds and tears down one emulated cluster."""

    def __init__(
        self, spec: ClusterSpec, names: RunNames | None = None, capabilities: Capabilities | None = None
    ) -> None:
        self.spec = spec
        self.names = names or RunNames.new()
        self.capabilities = capabilities or detect()
        self.impairment: ImpairmentEngine = choose(spec, self.capabilities, self.names.run_id)
        self.nodes = [
            Node(self.names.node_netns(i), index=i, address=self.names.address(i), port=self.names.port(i))
            for i in range(spec.nodes)
        ]
        self.fabric = fabric.Fabric(spec.topology, self.names)
        self.switches = [Switch(self.fabric.netns(k)) for k in range(len(spec.topology.switches))]
        self.switch = self.switches[0]  # the first switch's namespace (``-sw``): the run's name for its network
        if isinstance(self.impairment, DelayLine):  # a line in every switch with delayed ports
            self.impairment = DelayLines(spec, self.names.run_id, self.fabric, self.switches)
        self.shaping: dict[str, dict] = {}
        self.tcp: dict = {}  # TCP settings in force in the nodes, read back once built
        self._signals = StopSignals()
        self._up = False  # registered: this instance holds the run id, and down() has work to do
        self._created: list[str] = []  # namespaces this instance made (down() removes these and no others)
        self.tmpdir: Path | None = None  # every process's $TMPDIR in the namespaces, made by up(), removed by down()

    @property
    def engine(self) -> str:
        """Which engine adds delay, jitter and loss: 'none', 'netem' or 'delayline' (run.json's delay_engine)."""
        return self.impairment.name

    # ---------------------------------------------------------------- context
    def __enter__(self) -> Cluster:
        self._signals.install()
        try:
            self.up()
        except BaseException as exc:
            self._teardown(unwinding=exc)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, *traceback: object) -> None:
        self._teardown(unwinding=exc)

    @property
    def stop_signal_raised(self) -> bool:
        """Whether a stop signal has raised its exception while this cluster was up."""
        return self._signals.raised is not None

    def raise_if_interrupted(self) -> None:
        """Raise again a stop signal whose exception Python swallowed (see :meth:`StopSignals.raise_if_interrupted`)."""
        self._signals.raise_if_interrupted()

    def check(self) -> None:
        """For a watch loop: raise a stop signal Python swallowed, or DelayLineDied if the delay line has exited.

        A dead delay line stops all traffic on impaired links; without this the run would fail a
        collective timeout later, blaming whichever node noticed first.
        """
        self.raise_if_interrupted()
        if not self._signals.stopping:
            self.impairment.check()

    def _teardown(self, unwinding: BaseException | None) -> None:
        """down() until it has run to the end, then give the signal handlers back (:meth:`StopSignals.finish`)."""
        self._signals.finish(self.down, unwinding)

    # ------------------------------------------------------------------- build
    def up(self) -> None:
        """Build the links, shape them, start the impairment engine."""
        with signals_held():  # registered and _up together: an interrupt cannot come between them
            register(self.names)  # a run id another live run holds fails here, before anything is touched
            self._up = True
            self.tmpdir = tmpfolders.make(self.names.run_id, "tmp")
        for ns in (*self.switches, *self.nodes):
            ns.tmpdir = self.tmpdir
        self._build_links()
        self._shape_links()
        apply_tcp_settings(self.nodes, self.spec.tcp)  # after the addresses: congestion control is a route metric
        self.tcp = read_tcp_settings(self.nodes[0])
        self.raise_if_interrupted()
        self.impairment.start()
        self.raise_if_interrupted()

    def _build_links(self) -> None:
        """Namespaces, a routed switch per switch with its nodes' veths, the trunks between switches, then each node's
        address and route (batched: one fork for the sysctls of every switch, one for every node)."""
        for ns in (*self.switches, *self.nodes):
            self.raise_if_interrupted()
            self._create(ns.netns)
        netns.set_sysctls_each([sw.netns for sw in self.switches], _SWITCH_SYSCTLS)
        self.raise_if_interrupted()
        netns.set_sysctls_each([node.netns for node in self.nodes], _NODE_SYSCTLS)
        for k, switch in enumerate(self.switches):
            self.raise_if_interrupted()
            ports = [(n.port, n.iface, n.netns, n.address) for n in self.nodes if self.fabric.switch_of(n.index) == k]
            switch.ifindex = switch.call(_build_switch, self.names.fabric_switch_address(k), ports)
        if self.fabric.graph.trunks:  # one switch routes to its own ports alone, as _build_switch did
            trunk_ends = fabric.join(self.fabric, lambda k, fn, *args: self.switches[k].call(fn, *args))
            for switch, ends in zip(self.switches, trunk_ends):
                switch.ifindex.update(ends)
        self.raise_if_interrupted()
        subnet = self.names.subnet
        netns.call_each(
            [
                (n.netns, _build_node, (n.iface, n.address, subnet, self.names.fabric_switch_address(k)))
                for n, k in ((n, self.fabric.switch_of(n.index)) for n in self.nodes)
            ]
        )

    def _create(self, name: str) -> None:
        """Create namespace ``name`` and count it as ours; a stop signal meanwhile is raised only once it is counted.

        Creating fails on a name that exists already (never adopting another run's), and teardown removes only what
        was counted: a Ctrl-C landing between the two would otherwise leave the new namespace behind.
        """
        with kept_until_done():
            netns.create(name)
            self._created.append(name)

    def switch_of(self, node: Node) -> Switch:
        """The switch namespace node ``node``'s port lives in."""
        return self.switches[self.fabric.switch_of(node.index)]

    def _shape_links(self, replace: bool = False) -> None:
        """Each link direction on the egress it leaves by: a node's uplink on the node, the rest on switch ports, one
        call per namespace. ``replace``: remove the root qdisc first (a cluster re-shaped for the next run).

        run.json labels each egress by its link direction (``n0:fwd``, ``site0--site1:rev``).
        """
        graph = self.spec.topology
        shaped = self.fabric.shaped()
        calls, labels = [], []
        for k, switch in enumerate(self.switches):
            ports = {port: direction for sw, port, direction, _ in shaped if sw == k}
            calls.append((switch.netns, ports))
            labels.append({port: label for sw, port, _, label in shaped if sw == k})
        for node in self.nodes:
            link = graph.access_link(node.index)
            calls.append((node.netns, {node.iface: link.forward}))
            labels.append({node.iface: f"{link.name}:fwd"})
        args = [(name, _shape, (ports, self.spec.offload_enabled, self.impairment, replace)) for name, ports in calls]
        if replace:  # qdiscs alone, nothing mounted: one fork for every namespace
            results = netns.call_each(args)
        else:
            results = [self._call_checked(name, fn, a) for name, fn, a in args]
        for installed, named in zip(results, labels):
            self.shaping.update({named[iface]: value for iface, value in installed.items()})

    def _call_checked(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(*args)`` in namespace ``name``, once a stop signal Python swallowed has been raised."""
        self.raise_if_interrupted()
        return netns.call_in(name, fn, *args)

    def reshape(self, spec: ClusterSpec) -> None:
        """Shape every link anew for ``spec``, a spec that differs from the built one at most in its link rates.

        Each egress gets a new root qdisc, so whatever the last run left queued there is dropped and
        the shaper's statistics start from zero. Namespaces, links, addresses, TCP settings and the
        impairment engine stay as built.
        """
        self.spec = spec
        self.fabric = fabric.Fabric(spec.topology, self.names)  # the same ports and routes, the new rates
        self.impairment.spec = spec
        built, self.shaping = self.shaping, {}
        self._shape_links(replace=True)
        for label, installed in self.shaping.items():  # offloads and flow steering stay as built
            installed["flow_steering"] = built.get(label, {}).get("flow_steering")

    @property
    def delay_line_stats_path(self) -> Path | None:
        """Where the delay line keeps its counters (packets passed, late releases) for the fidelity check; None without
        one. Read them with :func:`netbench.emulation.delaystats.read`.
        """
        return getattr(self.impairment, "stats_path", None)

    @property
    def helper_pids(self) -> dict[str, int]:
        """Every delay line's process (one per switch with delayed ports) by name, for the fidelity monitor."""
        return self.impairment.helper_pids()

    @property
    def _delay_line(self) -> subprocess.Popen | None:
        """The delay line's process while it runs (tests kill it to inject a fault)."""
        return getattr(self.impairment, "proc", None)

    # --------------------------------------------------------------- teardown
    def down(self) -> None:
        """Stop every process in the namespaces this instance created and delete them (idempotent).

        Only what this instance made: a cluster whose registration failed (its run id held by
        another live run) or whose namespace already existed leaves the other run's untouched.
        """
        self._signals.stop()  # from here on a signal waits for the teardown to finish
        if not self._up:
            return
        with signals_held():
            ours = [ns for ns in (*self.switches, *self.nodes) if ns.netns in self._created]
            for ns in ours:
                ns.stop_processes()
            # Anything else that wandered into our namespaces (e.g. started by a user command).
            netns.kill_pids(netns.pids_in([ns.netns for ns in ours]))
            for ns in ours:
                netns.remove(ns.netns)
            self._created.clear()
            tmpfolders.remove(self.tmpdir)  # once nothing that could write there is left
            self.tmpdir = None
            unregister(self.names)
            self.impairment.stop()
            self._up = False

    # ------------------------------------------------------------------- misc
    def set_link(self, index: int, up: bool) -> None:
        """Take node ``index``'s link down or up (fault injection), on the switch side."""
        node = self.nodes[index]
        self.switch_of(node).call(_set_link_state, node.port, node.address, up)

    def describe(self) -> dict:
        """What was built, for run.json."""
        return {
            "run_id": self.names.run_id,
            "nodes": [{"index": n.index, "netns": n.netns, "address": n.address, "iface": n.iface} for n in self.nodes],
            "switch": self.switch.netns,
            "subnet": str(self.names.subnet),
            "delay_engine": self.engine,
            **self.impairment.describe(),
            "offload": self.spec.offload_enabled,
            "spec": self.spec.model_dump(),
            "shaping": self.shaping,
            "tcp": self.tcp,
            "fabric": self.fabric.describe(),
        }


# Each builder (and _shape) runs inside its namespace in a forked child (Namespace.call): a plain IPRoute there
# talks to that namespace only. pyroute2's NetNS forks helpers of its own, which proved unsafe to
# mix with signal handling and repeated clusters in one process.
def _build_switch(address: str, ports: list[tuple[str, str, str, str]]) -> dict[str, int]:
    """One veth per node (peer moved straight into the node's namespace), a /32 route to each node.

    The switch's own address (on lo) is the source of its ARP requests to the nodes.
    """
    ifindex: dict[str, int] = {}
    with IPRoute() as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        ipr.addr("add", index=lo, address=address, prefixlen=32)
        for port, peer_name, peer_netns, node_address in ports:
            with netns.open_fd(peer_netns) as peer_fd:
                ipr.link("add", ifname=port, kind="veth", peer={"ifname": peer_name, "net_ns_fd": peer_fd})
            ifindex[port] = ipr.link_lookup(ifname=port)[0]
            netns.write_sysctls({key.format(port=port): value for key, value in _PORT_SYSCTLS.items()})
            ipr.link("set", index=ifindex[port], state="up")
            ipr.route("add", dst=node_address, dst_len=32, oif=ifindex[port], scope=253)  # scope link: on that wire
    return ifindex


IFA_F_NOPREFIXROUTE = 0x200  # an address without its on-link subnet route
RTNH_F_ONLINK = 4  # the gateway is on this wire, whatever its address


def _build_node(iface: str, address: str, subnet: ipaddress.IPv4Network, gateway: str) -> None:
    """Address and bring up the node's interface; the subnet is reached through its switch (``gateway``), no default
    route: nothing leaves the subnet.

    Through the switch, not on the wire: a node then resolves one neighbour (its switch) instead of every peer.
    Linux keeps one neighbour table for all namespaces, and its garbage collector refuses new entries past
    ``gc_thresh3`` (1024 by default) host-wide: 64 nodes that each resolved their 63 peers (4032 entries) lost SYNs
    to it for minutes while gloo connected its full mesh.
    """
    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=iface)
        ipr.addr("add", index=index, address=address, prefixlen=subnet.prefixlen, flags=IFA_F_NOPREFIXROUTE)
        ipr.link("set", index=index, state="up")
        ipr.route(
            "add",
            dst=str(subnet.network_address),
            dst_len=subnet.prefixlen,
            gateway=gateway,
            oif=index,
            flags=RTNH_F_ONLINK,
        )
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def _shape(
    egresses: dict[str, DirectionSpec], offload_on: bool, impairment: ImpairmentEngine, replace: bool = False
) -> dict[str, dict]:
    """Shape each interface of ``egresses`` (in this namespace) to its direction as ``impairment`` does; set offloads
    and flow steering. ``replace``: remove the root qdisc first, and leave offloads and flow steering as they are (set
    when built).

    Returns what was installed per interface, for run.json.
    """
    ifaces = list(egresses)
    with IPRoute() as ipr:
        if replace:
            for iface in ifaces:
                shaping.clear(ipr, ipr.link_lookup(ifname=iface)[0])
        installed = {
            iface: impairment.shape(ipr, ipr.link_lookup(ifname=iface)[0], direction, offload_on)
            for iface, direction in egresses.items()
        }
    if replace:
        return installed
    offload.set_segmentation(ifaces, offload_on)
    steered = steering.steer_flows(ifaces)  # last: it leaves this forked child in a mount namespace of its own
    for iface in installed:
        installed[iface]["flow_steering"] = steered
    return installed


def _set_link_state(port: str, node_address: str, up: bool) -> None:
    """Set the port down or up; on up, put back the route to its node, which the kernel flushed on down."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=port)[0]
        ipr.link("set", index=index, state="up" if up else "down")
        if up:
            ipr.route("replace", dst=node_address, dst_len=32, oif=index, scope=253)
