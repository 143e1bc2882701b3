#!/usr/bin/env python3
"""How fast bbr paces a warm pairwise exchange: a burst each way per call, each opened by gloo's ready notification.

Two emulated nodes (``--bw``, ``--delay`` one way) hold one TCP connection and exchange like a gossip pair over gloo:
per call each side sends a small ready notification, and its ``--bytes`` burst once the partner's notification is in;
the calls are ``--period`` apart (none overlaps another, so every burst is application-limited). Rank 1 enters each
call ``--skews`` ms after rank 0 (cycled). A last pair sends its bursts without notifications, at the same moment
(``none``): nothing is in flight when a burst starts. Each side samples TCP_INFO and bbr's TCP_CC_INFO every
millisecond.

Printed per skew setting, over the last ``--tail`` calls of both ranks: how long a burst takes to leave (the
receiver's first to last byte), the pacing rate, bbr's bandwidth estimate as the interval it implies (bytes / bw) and
bbr's pacing gain, against a burst from an empty pipe ((gain - 1) x bytes / rtt) and against the model's pace for a
warm pair (:func:`netbench.model.gloo_tcp.bbr_rate_Bps` with ``pairwise``: the most one burst per round trip can
reach, 0.99 x gain x bytes / rtt).

Why a notification changes the pace (net/ipv4/tcp_rate.c, tcp_bbr.c): the ACK of a side's notification rides the
partner's first data, half a round trip after the burst began plus the partner's lag. An ACK restarts the
delivery-rate interval for the packets sent after it, so when it lands while the burst is still leaving, the burst's
last packets sample all of it over ``skew + rtt / 2 + burst time``; tcp_rate_gen drops samples shorter than min_rtt,
so the highest is bytes / rtt. bbr feeds an application-limited sample to its max filter only when it beats the
filter's maximum (bbr_update_bw), and STARTUP never lowers its pacing rate, so each call's best sample ratchets the
pace up toward 0.99 x gain x bytes / rtt (bbr_pacing_margin_percent = 1).

    PYTHONPATH=$PWD python3 scripts/bench_bbr_pace.py [--bw 1gbit] [--delay 50ms] [--skews 0 0,5,10,15,20,25,30]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PORT = 29641
NOTE_BYTES = 16  # the ready notification (gloo's is a small op header)
COLD_S = 1.5  # the first call starts from the initial window: the others wait until it is over
TCP_CC_INFO = 26  # linux/tcp.h
INFO_BYTES = 232  # struct tcp_info up to tcpi_snd_wnd


def _connect(rank: int, master: str) -> socket.socket:
    if rank == 0:
        listener = socket.create_server(("0.0.0.0", PORT))
        sock, _ = listener.accept()
        listener.close()
    else:
        for _ in range(200):
            try:
                sock = socket.create_connection((master, PORT))
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit("no connection to rank 0")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _sample(sock: socket.socket) -> tuple[float, int, int, int, int]:
    """(time, pacing B/s, bbr bw B/s, pacing gain x 256, bytes sent) from TCP_INFO and TCP_CC_INFO."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, INFO_BYTES)
    lo, hi, _, gain, _ = struct.unpack("5I", sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, 20))
    pacing, sent = struct.unpack_from("Q", info, 104)[0], struct.unpack_from("Q", info, 200)[0]
    return time.time(), pacing, (hi << 32) | lo, gain, sent


def probe(out: Path, nbytes: int, calls: int, period: float, skews: list[float], notify: bool) -> None:
    """One rank: ``calls`` exchanges; per call (start, burst's first and last byte received, samples during it)."""
    rank = int(os.environ["RANK"])
    sock = _connect(rank, os.environ["MASTER_ADDR"])
    if rank == 0:
        t0 = time.time() + 0.5
        sock.sendall(struct.pack("d", t0))
    else:
        t0 = struct.unpack("d", sock.recv(8, socket.MSG_WAITALL))[0]
    starts = [t0] + [t0 + COLD_S + k * period for k in range(1, calls)]
    if rank == 1:
        starts = [s + skews[k % len(skews)] / 1e3 for k, s in enumerate(starts)]
    ready = [threading.Event() for _ in range(calls)]
    arrivals: list[tuple[float, float]] = []
    samples: list[tuple[float, int, int, int, int]] = []
    done = threading.Event()

    def receive() -> None:
        for k in range(calls):
            if notify:
                sock.recv(NOTE_BYTES, socket.MSG_WAITALL)
            ready[k].set()
            first, got = 0.0, 0
            while got < nbytes:
                got += len(sock.recv(min(1 << 20, nbytes - got)))
                first = first or time.time()
            arrivals.append((first, time.time()))

    def sample() -> None:
        while not done.is_set():
            samples.append(_sample(sock))
            time.sleep(0.001)

    threads = [threading.Thread(target=f, daemon=True) for f in (receive, sample)]
    for thread in threads:
        thread.start()
    payload = b"\0" * nbytes
    for k, start in enumerate(starts):
        time.sleep(max(0.0, start - time.time()))
        if notify:
            sock.sendall(b"n" * NOTE_BYTES)
            ready[k].wait()
        sock.sendall(payload)
    threads[0].join()
    time.sleep(3 * float(os.environ.get("RTT_S", "0.1")))
    done.set()
    threads[1].join()
    (out / f"rank{rank}.json").write_text(json.dumps({"starts": starts, "arrivals": arrivals, "samples": samples}))
    sock.close()


def run(bw: str, delay: str, nbytes: int, calls: int, period: float, skews: str) -> list[dict]:
    """Both ranks' records from one emulated pair."""
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec
    from netbench.units import parse_rate, parse_time

    rate = parse_rate(bw)
    spec = ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=rate, delay_s=parse_time(delay)), down=DirectionSpec(rate_bps=rate)
    )
    args = ["--bytes", str(nbytes), "--calls", str(calls), "--period", str(period), "--skews", skews]
    with tempfile.TemporaryDirectory() as folder, Cluster(spec) as cluster:
        env = {"MASTER_ADDR": cluster.nodes[0].address, "PYTHONPATH": str(REPO), "RTT_S": str(2 * parse_time(delay))}
        procs = [
            node.popen(
                [sys.executable, str(Path(__file__).resolve()), "--probe", folder, *args], env={**env, "RANK": str(i)}
            )
            for i, node in enumerate(cluster.nodes)
        ]
        if any(proc.wait(timeout=120 + calls * period) for proc in procs):
            raise SystemExit("a prober failed")
        return [json.loads((Path(folder) / f"rank{i}.json").read_text()) for i in range(2)]


def summarise(ranks: list[dict], nbytes: int, tail: int) -> dict[str, float]:
    """Medians over the last ``tail`` calls of both ranks: departure (ms), pacing (Mbit/s), B/bw (ms), pacing gain."""
    leave, pacing, interval, gain = [], [], [], []
    for me, other in ((ranks[0], ranks[1]), (ranks[1], ranks[0])):
        for k in range(len(me["starts"]) - tail, len(me["starts"])):
            first, last = other["arrivals"][k]
            leave.append(1e3 * (last - first))
            during = [s for s in me["samples"] if me["starts"][k] <= s[0] <= last] or me["samples"][-1:]
            pacing.append(during[-1][1] * 8e-6)
            interval.append(1e3 * nbytes / during[-1][2] if during[-1][2] else float("nan"))
            gain.append(during[-1][3] / 256)
    return {
        k: statistics.median(v)
        for k, v in (("leave_ms", leave), ("pacing_mbps", pacing), ("interval_ms", interval), ("gain", gain))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", default="1gbit")
    parser.add_argument("--delay", default="50ms")
    parser.add_argument("--bytes", type=int, default=1_095_680)  # a gossip exchange of the 136k-parameter model, fp32
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--period", type=float, default=0.4)
    parser.add_argument("--tail", type=int, default=5)
    parser.add_argument("--skews", nargs="+", default=["0", "0,5,10,15,20,25,30", "none"])
    parser.add_argument("--probe", type=Path)
    args = parser.parse_args()
    if args.probe:
        notify = args.skews[0] != "none"
        skews = [float(s) for s in args.skews[0].split(",")] if notify else [0.0]
        probe(args.probe, args.bytes, args.calls, args.period, skews, notify)
        return
    from netbench.model.gloo_tcp import bbr_rate_Bps
    from netbench.units import parse_time

    rtt = 2 * parse_time(args.delay)
    empty_ms = 1e3 * args.bytes / bbr_rate_Bps(args.bytes, rtt)
    model_ms = 1e3 * args.bytes / bbr_rate_Bps(args.bytes, rtt, pairwise=True)
    print(
        f"{args.bytes} B each way per call, {args.bw}, rtt {1e3 * rtt:.0f} ms; from an empty pipe {empty_ms:.1f} ms "
        f"to leave, the model (a warm pair, one burst per round trip) {model_ms:.1f} ms"
    )
    print(f"{'skews (ms)':>22} {'leaves':>8} {'pacing':>11} {'bytes/bw':>9} {'gain':>6} {'/empty':>7} {'/model':>7}")
    for skews in args.skews:
        got = summarise(run(args.bw, args.delay, args.bytes, args.calls, args.period, skews), args.bytes, args.tail)
        print(
            f"{skews:>22} {got['leave_ms']:>6.1f}ms {got['pacing_mbps']:>6.1f}Mbit/s {got['interval_ms']:>7.1f}ms "
            f"{got['gain']:>6.3f} {got['leave_ms'] / empty_ms:>7.3f} {got['leave_ms'] / model_ms:>7.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
