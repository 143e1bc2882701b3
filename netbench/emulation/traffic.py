"""Built-in traffic tools run inside nodes: a TCP stream (when iperf3 is absent) and a UDP echo and ping.

Each prints one JSON line. Run as ``python -m netbench.emulation.traffic MODE ...``.
"""

from __future__ import annotations

import json
import socket
import statistics
import struct
import sys
import time

CHUNK = 256 * 1024


def tcp_sink(port: int, timeout_s: float, warmup_s: float = 0.0) -> dict:
    """Accept one connection and count bytes; goodput from ``warmup_s`` after the first byte to the last."""
    with socket.create_server(("0.0.0.0", port)) as server:
        server.settimeout(timeout_s)
        print(json.dumps({"listening": port}), flush=True)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout_s)
            buf = bytearray(CHUNK)
            total, start, first, last = 0, None, None, None
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                last = time.perf_counter()
                start = start or last
                if first is None:  # still warming up (slow start); the window opens after warmup_s
                    if last - start >= warmup_s:
                        first = last
                    continue
                total += n
    seconds = (last - first) if first and last else 0.0
    return {"bytes": total, "seconds": seconds, "goodput_bps": 8 * total / seconds if seconds else 0.0}


def tcp_source(address: str, port: int, seconds: float) -> dict:
    """Send as fast as the link allows for ``seconds``."""
    payload = b"\0" * CHUNK
    sent = 0
    with socket.create_connection((address, port), timeout=10) as conn:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            conn.sendall(payload)
            sent += len(payload)
    return {"bytes": sent}


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux (x86-64, arm64): the receive time, in nanoseconds
HOLD = struct.Struct("!d")  # the echo's hold time, in seconds, after the ping's 4-byte sequence number


def _kernel_rx_time(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """When the kernel received the datagram (CLOCK_REALTIME, s), from SO_TIMESTAMPNS's control message."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec * 1e-9
    return None


def _timestamped_udp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return sock


def udp_echo(port: int, timeout_s: float) -> dict:
    """Echo datagrams back until idle for ``timeout_s``, each carrying how long it was held here: from the kernel's
    receive timestamp to the reply's send (this process's wake-up, which the ping leaves out of the round trip)."""
    echoed = 0
    with _timestamped_udp() as sock:
        sock.bind(("0.0.0.0", port))
        sock.settimeout(timeout_s)
        print(json.dumps({"listening": port}), flush=True)
        try:
            while True:
                data, ancillary, _, peer = sock.recvmsg(2048, 256)
                received = _kernel_rx_time(ancillary)
                hold = time.time() - received if received is not None else 0.0
                sock.sendto(data[:4] + HOLD.pack(hold) + data[4 + HOLD.size :], peer)
                echoed += 1
        except TimeoutError:
            pass
    return {"echoed": echoed}


def udp_ping(address: str, port: int, count: int, interval_s: float, size: int = 56) -> dict:
    """Round-trip times of ``count`` datagrams of ``size`` bytes, one at a time, as the network took them.

    From just before the send to the kernel's receive timestamp of the reply, less the echo's hold time: neither
    end's wake-up (two Python processes woken from a sleep, about 0.15 ms together on a 2-core VM) is part of the
    link's round trip. ``rtt_user_ms`` is the median as the ping process itself saw it, wake-ups included.
    """
    rtts: list[float] = []
    user: list[float] = []
    lost = 0
    with _timestamped_udp() as sock:
        sock.settimeout(2.0)
        for seq in range(count):
            message = seq.to_bytes(4, "big") + b"\0" * (size - 4)
            sent, start = time.time(), time.perf_counter()
            sock.sendto(message, (address, port))
            try:
                while True:
                    data, ancillary, _, _ = sock.recvmsg(2048, 256)
                    if data[:4] == message[:4]:
                        break
                user.append((time.perf_counter() - start) * 1e3)
                received = _kernel_rx_time(ancillary)
                hold = HOLD.unpack_from(data, 4)[0] if len(data) >= 4 + HOLD.size else 0.0
                rtts.append((received - sent - hold) * 1e3 if received is not None else user[-1])
            except TimeoutError:
                lost += 1
            time.sleep(interval_s)
    return {
        "rtt_ms": statistics.median(rtts) if rtts else None,
        "rtt_min_ms": min(rtts, default=None),
        "rtt_max_ms": max(rtts, default=None),
        "rtt_user_ms": statistics.median(user) if user else None,
        "samples": rtts,
        "lost": lost,
    }


def main(argv: list[str]) -> None:
    mode, args = argv[0], argv[1:]
    if mode == "tcp-sink":
        result = tcp_sink(int(args[0]), float(args[1]), float(args[2]) if len(args) > 2 else 0.0)
    elif mode == "tcp-source":
        result = tcp_source(args[0], int(args[1]), float(args[2]))
    elif mode == "udp-echo":
        result = udp_echo(int(args[0]), float(args[1]))
    elif mode == "udp-ping":
        result = udp_ping(args[0], int(args[1]), int(args[2]), float(args[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
