"""probe's UDP ping measures the round trip as the network took it: the kernel's receive timestamps, less the time
the echo held the datagram, so neither end's wake-up counts (loopback, no privileges needed)."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time

from netbench.emulation.traffic import HOLD, _kernel_rx_time, _timestamped_udp, udp_echo, udp_ping

SLOW_REPLY_S = 0.02


def _slow_echo(sock: socket.socket, count: int) -> None:
    """An echo that answers each datagram only after SLOW_REPLY_S, and says so (as udp_echo does)."""
    for _ in range(count):
        data, ancillary, _, peer = sock.recvmsg(2048, 256)
        received = _kernel_rx_time(ancillary)
        time.sleep(SLOW_REPLY_S)
        sock.sendto(data[:4] + HOLD.pack(time.time() - received) + data[4 + HOLD.size :], peer)


def test_the_echo_s_hold_time_is_left_out_of_the_round_trip() -> None:
    with _timestamped_udp() as sock:
        sock.bind(("127.0.0.1", 0))
        echo = threading.Thread(target=_slow_echo, args=(sock, 5), daemon=True)
        echo.start()
        rtt = udp_ping("127.0.0.1", sock.getsockname()[1], 5, 0.0)
        echo.join(timeout=5)
    assert rtt["lost"] == 0 and len(rtt["samples"]) == 5
    assert rtt["rtt_user_ms"] >= SLOW_REPLY_S * 1e3  # what the ping process waited
    assert 0 < rtt["rtt_ms"] < SLOW_REPLY_S * 1e3 / 4  # what the loopback took


class _Listening(io.StringIO):
    """stdout for udp_echo: set once it says it is listening."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = threading.Event()

    def write(self, text: str) -> int:
        if "listening" in text:
            self.ready.set()
        return super().write(text)


def test_udp_echo_answers_so_that_the_ping_sees_the_loopback_not_the_echo_s_wake_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    out = _Listening()
    with contextlib.redirect_stdout(out):
        echo = threading.Thread(target=udp_echo, args=(port, 1.0), daemon=True)
        echo.start()
        assert out.ready.wait(timeout=10)
        rtt = udp_ping("127.0.0.1", port, 3, 0.0)
        echo.join(timeout=5)
    assert rtt["lost"] == 0 and 0 < rtt["rtt_ms"] <= rtt["rtt_user_ms"]
