"""A process group's configuration when a member of its quorum is gone: real gloo members and torch stores in their
own processes on 127.0.0.1, killed with SIGKILL at the moment that leaves the survivor waiting, the survivor
configured as torchft's Manager configures it. netbench's group (:class:`netbench.worker.bounded_gloo.BoundedGloo`)
is held at most about the exchange timeout T in each case; its collectives still wait T."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from torch.distributed import TCPStore

from netbench.worker.bounded_gloo import READY_KEY, BoundedGloo

REPO = Path(__file__).resolve().parents[1]
T_S = 2.0
BOUND = 1.5  # x T: the survivor's held time, with room for a loaded 2-core host
PREFIX = "torchft/1/0"  # torchft's store prefix: quorum 1, group rank 0
HIGHER = "127.0.0.2"  # the killed member's gloo address: above the survivor's, so the survivor waits for its connect

# A member that writes its ready mark and its gloo address, then waits for the survivor's (killed meanwhile).
MEMBER = f"""
import sys
from datetime import timedelta
from torch.distributed import PrefixStore, TCPStore
from torch._C._distributed_c10d import ProcessGroupGloo
store = PrefixStore({PREFIX!r}, TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, wait_for_workers=False))
store.set("{READY_KEY}/1", b"1")
options = ProcessGroupGloo._Options()
options._timeout = timedelta(seconds=60)
options._devices = [ProcessGroupGloo.create_device(hostname={HIGHER!r})]
ProcessGroupGloo(store, 1, 2, options)
"""

# A member that configures netbench's group beside the survivor, then never joins a collective.
SILENT = f"""
import sys, time
from datetime import timedelta
from netbench.worker.bounded_gloo import BoundedGloo
pg = BoundedGloo(timedelta(seconds={T_S}))
pg.configure(sys.argv[1], "silent", 1, 2)
time.sleep(60)
"""

Group = Callable[[timedelta], object]


@pytest.fixture(autouse=True)
def on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The survivor's gloo address: 127.0.0.1, below the killed member's."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(code: str, *args: str, **popen: object) -> subprocess.Popen:
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, **popen)


def held_s(group: Group, store_addr: str, timeout_s: float) -> tuple[float, str]:
    """How long the survivor (group rank 0 of 2) is held configuring, and the first line of what ended it."""
    pg = group(timedelta(seconds=timeout_s))
    began = time.perf_counter()
    try:
        pg.configure(store_addr, "survivor", 0, 2)
        ended = "configured"
    except Exception as exc:  # noqa: BLE001 - each library ends its wait with its own type
        ended = str(exc).splitlines()[0]
    return time.perf_counter() - began, ended


def address_written_then_killed(group: Group, timeout_s: float) -> tuple[float, str]:
    """The member wrote its gloo address and was killed before the survivor connected."""
    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    member = child(MEMBER, str(port))
    deadline = time.monotonic() + 60
    while not store.check([f"{PREFIX}/0/1"]):
        assert member.poll() is None and time.monotonic() < deadline, "the member never wrote its address"
        time.sleep(0.01)
    member.kill()
    member.wait()
    return held_s(group, f"127.0.0.1:{port}/{PREFIX}", timeout_s)


def never_configured(group: Group, timeout_s: float) -> tuple[float, str]:
    """The member was listed and killed before it configured."""
    port = free_port()
    _store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    return held_s(group, f"127.0.0.1:{port}/{PREFIX}", timeout_s)


def store_killed(group: Group, timeout_s: float) -> tuple[float, str]:
    """The quorum's store was on the member's node: its process was killed."""
    port = free_port()
    code = f"import time; from torch.distributed import TCPStore; s = TCPStore('127.0.0.1', {port}, is_master=True)\n"
    holder = child(code + "print('up', flush=True); time.sleep(60)", stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"up"
    holder.kill()
    holder.wait()
    return held_s(group, f"127.0.0.1:{port}/{PREFIX}", timeout_s)


CASES = {
    "address written, then killed": address_written_then_killed,
    "never configured": never_configured,
    "store killed": store_killed,
}


@pytest.mark.parametrize("case", list(CASES), ids=["address_then_killed", "never_configured", "store_killed"])
def test_a_member_gone_holds_the_configuration_about_the_exchange_timeout(case: str) -> None:
    held, ended = CASES[case](BoundedGloo, T_S)
    assert ended != "configured"
    assert held <= BOUND * T_S, f"{case}: held {held:.1f} s at T = {T_S} s ({ended})"


def test_the_survivor_waits_on_the_member_that_wrote_its_address() -> None:
    """The case gloo stretches: the survivor, at the lower address, waits for the killed member to connect."""
    _, ended = address_written_then_killed(BoundedGloo, T_S)
    assert "Connect timeout" in ended


def test_a_collective_with_a_silent_member_waits_the_exchange_timeout() -> None:
    port = free_port()
    store_addr = f"127.0.0.1:{port}/{PREFIX}"
    _store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    silent = child(SILENT, store_addr)
    try:
        pg = BoundedGloo(timedelta(seconds=T_S))
        pg.configure(store_addr, "survivor", 0, 2)
        began = time.perf_counter()
        with pytest.raises(RuntimeError):
            pg.allreduce([torch.ones(4)], torch.distributed.AllreduceOptions()).wait()
        waited = time.perf_counter() - began
    finally:
        silent.kill()
        silent.wait()
    assert 0.8 * T_S <= waited <= BOUND * T_S
