"""The host kernel's CONFIG_HZ: read from its build configuration, kept in the calibration, and the tick the model's
tail-loss probe timer fires on."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from netbench.calibrate.kernel import kernel_hz
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
    hz, note = kernel_hz((tmp_path / "absent", broken, nonsense))
    assert hz == DEFAULT_KERNEL_HZ
    assert "assumed" in note


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
