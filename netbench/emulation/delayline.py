"""Userspace delay line: delay, jitter and loss where the kernel has no netem.

The switch namespace's FORWARD chain hands each routed packet to an NFQUEUE; this process holds
every packet until its release time and then issues the verdict, in arrival order. It must sit in
the forwarding path: a delay in the *sender's* namespace keeps the packet charged to its socket and
TCP Small Queues throttles the flow (docs/concepts/emulation.md). Frames forwarded from another namespace are
orphaned from their socket, so holding them there is harmless, as with netem.

Per packet: delay = up[in_port] + down[out_port] (+ Gaussian jitter, truncated at zero), dropped
with probability 1 - (1 - loss_up)(1 - loss_down). Release times are kept monotonic per port pair,
so jitter never reorders a flow.

Run as ``python -m netbench.emulation.delayline CONFIG_JSON`` inside the switch namespace; it
prints ``ready`` once bound, after which the orchestrator installs the iptables rules. With a
``control_path`` in its config it re-reads the ports' impairments from that file on SIGHUP
(:mod:`netbench.emulation.delaycontrol`: a link schedule changing delay during a run).
"""

from __future__ import annotations

import ctypes
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from netbench import signals
from netbench.emulation import delaystats

QUEUE_NUM = 0
QUEUE_MAX_LEN = 200_000
RCVBUF_BYTES = 64 << 20


@dataclass(frozen=True)
class Impairment:
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0


def iptables_rules(up_ports: list[str], down_ports: list[str]) -> str:
    """iptables-restore input that queues packets the switch routes in from / out to impaired ports.

    Plain ``-i``/``-o`` matches on a routed switch: never ``-m physdev``, which loads br_netfilter
    where it is a module and so changes how every bridge on the host is filtered.

    No ``--queue-bypass``, on purpose: with it, packets pass undelayed whenever no process is
    bound to the queue, so a dead delay line would silently turn a 50 ms link into a 0 ms one and
    the run would measure the wrong network. Without it they are dropped, the run stalls, and the
    orchestrator's watch (which checks the delay line like a worker) fails it naming the delay line.
    """
    lines = ["*filter", ":FORWARD ACCEPT [0:0]"]
    for port in up_ports:
        lines.append(f"-A FORWARD -i {port} -j NFQUEUE --queue-num {QUEUE_NUM}")
    for port in down_ports:
        lines.append(f"-A FORWARD -o {port} -j NFQUEUE --queue-num {QUEUE_NUM}")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def iptables_restore_binary() -> str:
    """Legacy iptables: its NFQUEUE target works on kernels without nft's queue expression."""
    import shutil  # late: the delay line process loads only what its engine uses

    for name in ("iptables-legacy-restore", "iptables-restore"):
        if shutil.which(name):
            return name
    raise FileNotFoundError("iptables-restore not found (apt-get install iptables)")


def install_rules(switch_netns: str, up_ports: list[str], down_ports: list[str]) -> None:
    """Load the queue rules into the switch namespace's filter table in one call."""
    from netbench.emulation.netns import preexec  # late: keeps psutil, pyroute2 off this module's import

    subprocess.run(
        [iptables_restore_binary(), "-w", "5"],
        input=iptables_rules(up_ports, down_ports),
        text=True,
        check=True,
        capture_output=True,
        preexec_fn=preexec(switch_netns),
    )


class DelayLine:
    """Holds queued packets until their release time; one instance per switch namespace."""

    def __init__(self, up: dict[int, Impairment], down: dict[int, Impairment], seed: int = 0) -> None:
        self.up = up
        self.down = down
        self.rng = random.Random(seed)
        self.heap: list[tuple[float, int, object]] = []
        self.last_release: dict[tuple[int, int], float] = {}
        self.seq = 0
        self.passed = 0
        self.dropped = 0
        self.late = 0  # packets released more than LATE_S after their due time (the line fell behind)
        self.late_sum_s = 0.0
        self.late_max_s = 0.0

    def on_packet(self, pkt) -> None:  # called by NetfilterQueue for every queued packet
        now = _arrival_monotonic(pkt)
        src, dst = pkt.indev, pkt.outdev  # ifindexes of the switch ports it was routed between
        a, b = self.up.get(src, _NONE), self.down.get(dst, _NONE)
        if (a.loss or b.loss) and self.rng.random() >= (1 - a.loss) * (1 - b.loss):
            pkt.drop()
            self.dropped += 1
            return
        delay = a.delay_s + b.delay_s
        jitter = (a.jitter_s**2 + b.jitter_s**2) ** 0.5
        if jitter:
            delay = max(0.0, self.rng.gauss(delay, jitter))
        key = (src, dst)
        release = max(now + delay, self.last_release.get(key, 0.0))
        self.last_release[key] = release
        self.seq += 1
        heapq.heappush(self.heap, (release, self.seq, pkt))

    def set_ports(self, up: dict[int, Impairment], down: dict[int, Impairment]) -> None:
        """New impairments from here on (a schedule's change); packets already held keep their release time."""
        self.up, self.down = {**self.up, **up}, {**self.down, **down}

    def release_due(self) -> float | None:
        """Accept every packet whose time has come; return seconds until the next one."""
        heap = self.heap
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            due, _, pkt = heapq.heappop(heap)
            pkt.accept()
            self.passed += 1
            if now - due > LATE_S:
                self.late += 1
                self.late_sum_s += now - due
                self.late_max_s = max(self.late_max_s, now - due)
        return heap[0][0] - now if heap else None


_NONE = Impairment()
LATE_S = 1e-3  # a release this much past due counts as late (the loop's own jitter is ~0.1 ms)
STATS_EVERY_S = 1.0


def stats(line: DelayLine) -> dict:
    """Counters the orchestrator reads for the run's fidelity check, the kernel's queue drops included."""
    return {
        "passed": line.passed,
        "dropped": line.dropped,
        "late": line.late,
        "late_sum_s": line.late_sum_s,
        "late_max_s": line.late_max_s,
        **delaystats.kernel_queue_counters(QUEUE_NUM),
    }


def write_stats(path: str, line: DelayLine) -> None:
    """Replace ``path`` with the current counters (:func:`netbench.emulation.delaystats.write`)."""
    delaystats.write(path, stats(line))


SO_TIMESTAMP = getattr(socket, "SO_TIMESTAMP", 29)  # Linux (x86-64, arm64)
SPIN_S = 150e-6  # wake this early and spin: select() wake-ups run ~50-100 us late


def _arrival_monotonic(pkt) -> float:
    """When the kernel queued the packet, on the monotonic clock.

    The callback runs a wake-up and a netlink read after the packet was queued; anchoring on
    the kernel timestamp keeps that latency out of the added delay.
    """
    now_mono = time.monotonic()
    stamp = pkt.get_timestamp()
    if not stamp:
        return now_mono
    age = time.time() - stamp
    return now_mono - age if 0 <= age < 0.05 else now_mono


def _minimal_timer_slack() -> None:
    """Ask for 1 ns timer slack (default 50 us) so sleeps end when asked."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


RT_PRIORITY = 10  # SCHED_FIFO: above every normal task, below the kernel's own threads
SHORT_SLICE_NS = 100_000  # the fair slice asked for where real-time is not allowed (as delayline.c)
SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}  # glibc has no wrapper, Python no binding


def _run_ahead_of_workers() -> None:
    """Real-time priority where allowed (root), else a higher share where allowed and a short slice
    (any user may: EEVDF lets a task waking with a shorter slice preempt): a release must not wait
    for a core behind the workers (as delayline.c does)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        return
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass
    number = SYS_SCHED_SETATTR.get(os.uname().machine)
    if number is None:
        return
    # struct sched_attr, SCHED_ATTR_SIZE_VER0: size, policy (SCHED_OTHER), flags, nice, priority, runtime, deadline,
    # period
    attr = ctypes.create_string_buffer(
        struct.pack("IIQiIQQQ", 48, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, SHORT_SLICE_NS, 0, 0)
    )
    ctypes.CDLL(None, use_errno=True).syscall(number, 0, attr, 0)


CONTROL_EVERY_S = 0.05  # with a control file: how soon a SIGHUP is acted on (select() resumes after the handler)


class _Control:
    """The control file a SIGHUP asks the line to re-read (:mod:`netbench.emulation.delaycontrol`)."""

    def __init__(self, path: str | None, line: DelayLine) -> None:
        self.path, self.line, self.asked = path, line, False

    def request(self, *_: object) -> None:
        self.asked = True

    def reload_if_asked(self) -> None:
        if not (self.asked and self.path):
            return
        self.asked = False
        from netbench.emulation import delaycontrol  # late: the delay line process loads only what its engine uses

        try:
            up, down = delaycontrol.read(self.path)
        except (OSError, ValueError) as exc:
            print(f"delay line: control file not read: {exc}", file=sys.stderr, flush=True)
            return
        self.line.set_ports({k: Impairment(**v) for k, v in up.items()}, {k: Impairment(**v) for k, v in down.items()})


def serve(config: dict) -> None:
    """Bind the queue, report ready, and release packets until SIGTERM."""
    from netfilterqueue import COPY_META, NetfilterQueue  # late: keeps netfilterqueue off this module's import

    line = DelayLine(
        up={int(k): Impairment(**v) for k, v in config["up"].items()},
        down={int(k): Impairment(**v) for k, v in config["down"].items()},
        seed=int(config.get("seed", 0)),
    )
    queue = NetfilterQueue()
    queue.bind(QUEUE_NUM, line.on_packet, max_len=QUEUE_MAX_LEN, mode=COPY_META)
    sock = socket.fromfd(queue.get_fd(), socket.AF_NETLINK, socket.SOCK_RAW)
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF_BYTES)  # SO_RCVBUFFORCE (needs CAP_NET_ADMIN)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    # receive timestamps on (host-wide while a socket asks, as tcpdump does): without them no packet carries its
    # arrival time, and the wait before this process reads it adds to every delay (_arrival_monotonic)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
    sock.setblocking(False)
    stop = False
    control = _Control(config.get("control_path"), line)

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    with (
        signals.handled((signal.SIGTERM, signal.SIGINT), _stop),  # to the end: a second SIGTERM must not cut the drain
        signals.handled((signal.SIGHUP,), control.request),
    ):
        print("ready", flush=True)
        _minimal_timer_slack()
        _run_ahead_of_workers()
        fd = sock.fileno()
        stats_path = config.get("stats_path")
        next_stats = time.monotonic() + STATS_EVERY_S
        while not stop:
            if stats_path and time.monotonic() >= next_stats:
                write_stats(stats_path, line)
                next_stats = (
                    time.monotonic() + STATS_EVERY_S
                )  # select(): microsecond timeouts; poll/epoll round up to whole milliseconds
            control.reload_if_asked()
            wait = line.release_due()
            timeout = 0.2 if wait is None else (0.0 if wait < SPIN_S else wait - SPIN_S)
            timeout = min(timeout, CONTROL_EVERY_S) if control.path else timeout
            ready, _, _ = select.select([fd], [], [], timeout)
            if ready:
                queue.run(block=False)
        for _, _, pkt in line.heap:  # let what is in flight go, so nothing hangs on teardown
            pkt.accept()
        final = stats(line)  # while the queue is bound: its kernel counters go with it
        queue.unbind()
        if stats_path:
            delaystats.write(stats_path, final)
        print(json.dumps(final), flush=True)


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
