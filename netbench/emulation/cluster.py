"""The emulated cluster: N node namespaces, one switch namespace, shaped veth links.

The switch routes rather than bridges: each port has a /32 route to its node and answers ARP for
the other nodes (proxy ARP), so the nodes still share one /24 and have no default route. A routed
switch is what lets the delay line match ports with plain ``-i``/``-o`` FORWARD rules; a bridge
would need ``-m physdev``, which makes the kernel load br_netfilter where it is a module, and that
turns bridge-nf-call-iptables on for every bridge on the host.

Use it as a context manager; teardown is guaranteed on normal exit, exceptions, Ctrl-C, SIGTERM
and SIGHUP. While the cluster is up those signals raise (KeyboardInterrupt, or SystemExit for the
others); once teardown has begun they wait until it has finished, so a second Ctrl-C cannot leave
half a cluster behind. Callers that run a cluster should call ``cluster.down()`` themselves at the
end of the ``with`` block (teardown then begins before ``__exit__``) and
``cluster.raise_if_interrupted()`` while they wait on it::

    with Cluster(spec) as cluster:
        server = cluster.nodes[1].popen(["iperf3", "-s", "-1"])
        ...
"""

from __future__ import annotations

import json
import select
import signal
import threading
from pathlib import Path
from types import FrameType

from pyroute2 import IPRoute

from netbench.emulation import delayline, netns, offload, shaping, steering
from netbench.emulation.capabilities import Capabilities, detect
from netbench.emulation.naming import RunNames, register, unregister
from netbench.emulation.node import Node, Switch
from netbench.emulation.signals import signals_held
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.emulation.tcpsettings import NODE_TCP_BUFFER_MAX, apply_tcp_settings, read_tcp_settings

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
_PORT_SYSCTLS = {  # per port, once it exists (a namespace other than the host's has no neigh "default")
    "net.ipv4.conf.{port}.proxy_arp": "1",
    "net.ipv4.neigh.{port}.proxy_delay": "0",  # else proxy replies wait up to 0.8 s
}
_NODE_SYSCTLS = {  # TCP windows large enough for 1gbit x 400 ms round trips (BDP 50 MB)
    **_QUIET_SYSCTLS,
    "net.ipv4.tcp_rmem": f"4096 131072 {NODE_TCP_BUFFER_MAX}",
    "net.ipv4.tcp_wmem": f"4096 16384 {NODE_TCP_BUFFER_MAX}",
}


class ClusterError(RuntimeError):
    """The cluster could not be built; everything created so far has been removed."""


class DelayLineDied(ClusterError):
    """The delay line exited while the cluster was up: its links drop every packet (no --queue-bypass)."""


class Cluster:
    """Builds and tears down one emulated cluster."""

    def __init__(self, spec: ClusterSpec, names: RunNames | None = None, capabilities: Capabilities | None = None) -> None:
        self.spec = spec
        self.names = names or RunNames.new()
        self.capabilities = capabilities or detect()
        self.engine = self._choose_engine()
        self.switch = Switch(self.names.switch_netns)
        self.nodes = [
            Node(self.names.node_netns(i), index=i, address=self.names.address(i), port=self.names.port(i))
            for i in range(spec.nodes)
        ]
        self.shaping: dict[str, dict] = {}
        self.tcp: dict = {}  # TCP settings in force in the nodes, read back once built
        self._delay_line = None
        self._previous_handlers: dict[int, object] = {}
        self._stopping = False  # set by down(): from then on signals wait for the teardown to finish
        self._raised: int | None = None  # the stop signal last raised from the handler
        self._deferred: int | None = None  # a signal that arrived while stopping, raised after teardown
        self._up = False

    # ----------------------------------------------------------------- engine
    def _choose_engine(self) -> str:
        """'none' without impairments; else netem where the kernel has it, else the delay line."""
        if not self.spec.impaired:
            return "none"
        wanted = self.spec.engine
        if wanted in ("auto", "netem") and self.capabilities.netem:
            return "netem"
        if wanted == "netem":
            raise ClusterError("--engine netem: this kernel has no sch_netem (try --engine delayline)")
        if not self.capabilities.delay_line:
            raise ClusterError(f"delay, jitter and loss need netem or the delay line; neither works here: {self.capabilities.delay_line_reason}")
        return "delayline"

    # ---------------------------------------------------------------- context
    def __enter__(self) -> "Cluster":
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        try:
            self.up()
        except BaseException:
            self._teardown(unwinding=True)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._teardown(unwinding=exc_type is not None)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """A stop signal: raise it so the run unwinds into teardown; once teardown began, keep it for later."""
        if self._stopping:
            self._deferred = self._deferred or signum
            return
        self._raised = signum
        _raise_for(signum)

    def raise_if_interrupted(self) -> None:
        """Raise again a stop signal whose exception Python swallowed.

        A handler's exception is only printed when it fires inside an at-fork hook (logging
        registers one), and forks are everywhere here: namespaces, helpers, every process a
        node starts. Building the cluster and watching a run call this between such steps.
        """
        if self._raised is not None and not self._stopping:
            _raise_for(self._raised)

    def check(self) -> None:
        """For a watch loop: raise a stop signal Python swallowed, or DelayLineDied if the delay line has exited.

        A dead delay line stops all traffic on impaired links; without this the run would fail a
        collective timeout later, blaming whichever node noticed first.
        """
        self.raise_if_interrupted()
        proc = self._delay_line
        if proc is None or proc.poll() is None or self._stopping:
            return
        err = (proc.stderr.read() or "").strip().splitlines() if proc.stderr else []
        how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with code {proc.returncode}"
        raise DelayLineDied(f"the delay line (switch namespace {self.switch.netns}) {how}" + (f": {err[-1]}" if err else ""))

    def _teardown(self, unwinding: bool) -> None:
        """down() until it has run to the end, then give the signal handlers back.

        A signal whose exception cuts down() short (before down() marks the cluster as stopping)
        is kept and down() runs again; it is raised at the end. When nothing is unwinding, so is
        a signal that was swallowed (see :meth:`raise_if_interrupted`) or deferred.
        """
        interrupted: BaseException | None = None
        while True:
            try:
                self.down()
                break
            except (KeyboardInterrupt, SystemExit) as exc:
                interrupted = interrupted or exc
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()
        pending, self._deferred = self._raised or self._deferred, None
        if interrupted is not None:
            raise interrupted
        if pending is not None and not unwinding:
            _raise_for(pending)

    # ------------------------------------------------------------------- build
    def up(self) -> None:
        """Create namespaces, the routed switch, veths, addresses and shaping; start the delay line if needed."""
        self._up = True  # before registering: an interrupt between the two still unregisters
        register(self.names)
        offload_on = self.spec.offload_enabled
        netns.create(self.switch.netns)
        for node in self.nodes:
            self.raise_if_interrupted()
            netns.create(node.netns)
        netns.set_sysctls(self.switch.netns, _SWITCH_SYSCTLS)
        for node in self.nodes:
            self.raise_if_interrupted()
            netns.set_sysctls(node.netns, _NODE_SYSCTLS)

        use_netem = self.engine == "netem"
        ports = [(node.port, node.iface, node.netns, node.address) for node in self.nodes]
        self.switch.ifindex, down_shaping = self.switch.call(
            _build_switch, self.names.switch_address, ports, self.spec.down, offload_on, use_netem
        )
        self.shaping.update({f"{port}/down": installed for port, installed in down_shaping.items()})
        prefixlen = self.names.subnet.prefixlen
        for node in self.nodes:
            self.raise_if_interrupted()
            self.shaping[f"{node.netns}/up"] = node.call(
                _build_node, node.iface, node.address, prefixlen, self.spec.up, offload_on, use_netem
            )

        apply_tcp_settings(self.nodes, self.spec.tcp)  # after the addresses: congestion control is a route metric
        self.tcp = read_tcp_settings(self.nodes[0])
        if self.engine == "delayline":
            self.raise_if_interrupted()
            self._start_delay_line()
        self.raise_if_interrupted()

    def _start_delay_line(self) -> None:
        ports = self.switch.ifindex
        config = {
            "up": {ports[n.port]: _impairment(self.spec.up) for n in self.nodes} if self.spec.up.impaired else {},
            "down": {ports[n.port]: _impairment(self.spec.down) for n in self.nodes} if self.spec.down.impaired else {},
            "seed": int(self.names.run_id, 16),
            "stats_path": self.delay_line_stats_path,
        }
        proc = self.switch.python("netbench.emulation.delayline", json.dumps(config), stdout=-1, stderr=-1, text=True)
        ready, _, _ = select.select([proc.stdout], [], [], 10.0)
        line = proc.stdout.readline().strip() if ready else ""
        if line != "ready":
            err = proc.stderr.read() if proc.poll() is not None else "no answer within 10 s"
            raise ClusterError(f"delay line did not start: {err.strip().splitlines()[-1] if err.strip() else line}")
        self._delay_line = proc
        delayline.install_rules(
            self.switch.netns,
            up_ports=[n.port for n in self.nodes] if self.spec.up.impaired else [],
            down_ports=[n.port for n in self.nodes] if self.spec.down.impaired else [],
        )

    @property
    def delay_line_stats_path(self) -> str:
        """Where the delay line keeps its counters (packets passed, late releases) for the fidelity check."""
        return delayline.stats_path(self.names.run_id)

    @property
    def delay_line_pid(self) -> int | None:
        return self._delay_line.pid if self._delay_line is not None else None

    # --------------------------------------------------------------- teardown
    def down(self) -> None:
        """Stop every process in the run's namespaces and delete the namespaces (idempotent)."""
        self._stopping = True  # from here on a signal waits for the teardown to finish
        if not self._up:
            return
        with signals_held():
            everyone = [self.switch, *self.nodes]
            for ns in everyone:
                ns.stop_processes()
            # Anything else that wandered into our namespaces (e.g. started by a user command).
            netns.kill_pids(netns.pids_in([ns.netns for ns in everyone]))
            for ns in everyone:
                netns.remove(ns.netns)
            unregister(self.names)
            for leftover in (self.delay_line_stats_path, self.delay_line_stats_path + ".tmp"):
                Path(leftover).unlink(missing_ok=True)
            self._delay_line = None
            self._up = False

    # ------------------------------------------------------------------- misc
    def set_link(self, index: int, up: bool) -> None:
        """Take node ``index``'s link down or up (fault injection), on the switch side."""
        node = self.nodes[index]
        self.switch.call(_set_link_state, node.port, node.address, up)

    def describe(self) -> dict:
        """What was built, for run.json."""
        return {
            "run_id": self.names.run_id,
            "nodes": [{"index": n.index, "netns": n.netns, "address": n.address, "iface": n.iface} for n in self.nodes],
            "switch": self.switch.netns,
            "subnet": str(self.names.subnet),
            "delay_engine": self.engine,
            "offload": self.spec.offload_enabled,
            "spec": self.spec.model_dump(),
            "shaping": self.shaping,
            "tcp": self.tcp,
        }


# Each builder runs inside its namespace in a forked child (Namespace.call): a plain IPRoute there
# talks to that namespace only. pyroute2's NetNS forks helpers of its own, which proved unsafe to
# mix with signal handling and repeated clusters in one process.
def _build_switch(address: str, ports: list[tuple[str, str, str, str]], down: DirectionSpec, offload_on: bool, use_netem: bool) -> tuple[dict[str, int], dict[str, dict]]:
    """One veth per node (peer moved straight into the node's namespace), a /32 route to each node, shaped.

    The switch's own address (on lo) is the source of its ARP requests to the nodes.
    """
    ifindex: dict[str, int] = {}
    installed: dict[str, dict] = {}
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
            installed[port] = shaping.apply(ipr, ifindex[port], down, offload_on, use_netem)
    offload.set_segmentation(list(ifindex), offload_on)
    steered = steering.steer_flows(list(ifindex))  # last: it leaves this forked child in a mount namespace of its own
    for port in installed:
        installed[port]["flow_steering"] = steered
    return ifindex, installed


def _build_node(iface: str, address: str, prefixlen: int, up: DirectionSpec, offload_on: bool, use_netem: bool) -> dict:
    """Address and bring up the node's interface (no default route: nothing leaves the subnet)."""
    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=iface)
        ipr.addr("add", index=index, address=address, prefixlen=prefixlen)
        ipr.link("set", index=index, state="up")
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        installed = shaping.apply(ipr, index, up, offload_on, use_netem)
    offload.set_segmentation([iface], offload_on)
    installed["flow_steering"] = steering.steer_flows([iface])  # last: it leaves this forked child in a mount namespace of its own
    return installed


def _set_link_state(port: str, node_address: str, up: bool) -> None:
    """Set the port down or up; on up, put back the route to its node, which the kernel flushed on down."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=port)[0]
        ipr.link("set", index=index, state="up" if up else "down")
        if up:
            ipr.route("replace", dst=node_address, dst_len=32, oif=index, scope=253)


def _impairment(direction) -> dict:
    return {"delay_s": direction.delay_s, "jitter_s": direction.jitter_s, "loss": direction.loss}


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_for(signum: int) -> None:
    """As the usual handlers do: Ctrl-C raises KeyboardInterrupt, SIGTERM/SIGHUP exit with 128 + signal."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)
