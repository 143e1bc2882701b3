"""The host kernel's CONFIG_HZ: read from its build configuration, else measured from its jiffies counter, kept in the
calibration, and the tick the model's tail-loss probe timer fires on."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from netbench.calibrate.kernel import TICK_RATES, TIMER_LIST, configured_hz, kernel_hz
from netbench.model.calibration import Calibration, read_calibration
from netbench.model.collectives import Link, cost, pattern
from netbench.model.framing import DEFAULT_KERNEL_HZ
from netbench.model.probes import late_flows, probe_timeout_min_s

MBIT = 1e6
SIGNS = 49_248  # 1-bit Adam's packed signs of a 394k-parameter model at 6 nodes
STORED = Path(__file__).resolve().parent.parent / "reports" / "compressed-syncs" / "dense" / "calibration.json"


def _config(path: Path, hz: str) -> Path:
    text = f"# kernel configuration\nCONFIG_HZ_{hz}=y\nCONFIG_HZ={hz}\nCONFIG_HZ_PERIODIC=n\n".encode()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text))
    else:
        path.write_bytes(text)
    return path


def test_the_tick_is_read_from_a_plain_or_gzipped_kernel_configuration(tmp_path) -> None:
    plain = _config(tmp_path / "config-6.1.0", "1000")
    packed = _config(tmp_path / "config.gz", "300")
    assert kernel_hz((plain, packed)) == (1000, f"CONFIG_HZ read from {plain}")
    assert kernel_hz((tmp_path / "absent", packed)) == (300, f"CONFIG_HZ read from {packed}")


def test_without_a_readable_configuration_the_default_is_assumed_and_said(tmp_path) -> None:
    broken = tmp_path / "config.gz"
    broken.write_bytes(b"not gzip")
    nonsense = tmp_path / "config-x"
    nonsense.write_text("CONFIG_HZ=fast\n")
    hz, note = kernel_hz((tmp_path / "absent", broken, nonsense), timer_list=tmp_path / "no-timer-list")
    assert hz == DEFAULT_KERNEL_HZ
    assert "assumed" in note


@pytest.mark.skipif(not os.access(TIMER_LIST, os.R_OK), reason="the jiffies counter is readable by root only")
def test_without_a_configuration_the_tick_is_measured_from_the_jiffies_counter(tmp_path) -> None:
    hz, note = kernel_hz((tmp_path / "absent",))
    assert "measured" in note
    configured = configured_hz()
    assert hz == configured[0] if configured is not None else hz in TICK_RATES


def test_jiffies_that_do_not_advance_leave_the_default(tmp_path) -> None:
    frozen = tmp_path / "timer_list"
    frozen.write_text("Timer List Version: v0.10\ncpu: 0\n  .last_jiffies   : 4303708741\njiffies: 4303708742\n")
    hz, note = kernel_hz((tmp_path / "absent",), timer_list=frozen)
    assert hz == DEFAULT_KERNEL_HZ
    assert "assumed" in note


@pytest.mark.parametrize("text", [None, "Timer List Version: v0.10\njiffies: many\n", "no counter here\n"])
def test_an_unreadable_timer_list_leaves_the_default(tmp_path, text) -> None:
    path = tmp_path / "timer_list"
    if text is not None:
        path.write_text(text)
    assert kernel_hz((tmp_path / "absent",), timer_list=path)[0] == DEFAULT_KERNEL_HZ


@pytest.mark.parametrize(("hz", "timeout"), [(100, 0.010), (250, 0.004), (300, 1 / 300), (1000, 0.002)])
def test_the_probe_timers_two_milliseconds_round_up_to_whole_jiffies(hz, timeout) -> None:
    assert probe_timeout_min_s(hz) == pytest.approx(timeout)


@pytest.mark.parametrize(("hz", "late"), [(100, 0), (250, 2), (1000, 3)])
def test_a_faster_tick_makes_more_of_a_fan_outs_flows_late(hz, late) -> None:
    """6 nodes at 40mbit: 1.7 ms a message, so 10 ms of slack covers all five, 4 ms the first three, 2 ms two."""
    wire = SIGNS / 6 + 48 + 6 * 66
    assert late_flows(5, wire, 40 * MBIT, 0.0, hz) == late


def test_a_calibration_file_without_the_tick_loads_with_the_default() -> None:
    stored = read_calibration(STORED)
    assert "kernel_hz" not in STORED.read_text()
    assert stored.kernel_hz == DEFAULT_KERNEL_HZ
    assert stored.framing().kernel_hz == DEFAULT_KERNEL_HZ


def test_a_calibrations_tick_prices_its_hosts_probes() -> None:
    a2a = pattern("all_to_all", "ring", SIGNS, 6)
    assert a2a is not None
    link = Link(40 * MBIT, 40 * MBIT, 0.0, one_way_s=0.0)
    wire = {hz: cost(a2a, link, Calibration(kernel_hz=hz).framing()).tx.total for hz in (100, 250, 1000)}
    assert wire[100] < wire[250] < wire[1000]
    assert Calibration(kernel_hz=1000).framing(mtu=9000).kernel_hz == 1000


class _Clock:
    """A monotonic clock that a sleep advances, and a timer list whose jiffies advance ``rate`` a second with it."""

    def __init__(self, path: Path, rate: float) -> None:
        self.path, self.rate, self.now = path, rate, 100.0
        self._write()

    def _write(self) -> None:
        self.path.write_text(f"cpu: 0\njiffies: {4_294_000_000 + round(self.now * self.rate)}\n")

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self._write()


@pytest.mark.parametrize(("rate", "hz"), [(98.0, 100), (262.0, 250), (289.0, 300), (1040.0, 1000), (180.0, None)])
def test_a_measured_rate_snaps_to_the_nearest_tick_linux_offers_or_is_refused(tmp_path, monkeypatch, rate, hz) -> None:
    from netbench.calibrate import kernel

    clock = _Clock(tmp_path / "timer_list", rate)
    monkeypatch.setattr(kernel, "time", clock)
    assert kernel.measured_hz(clock.path) == hz
