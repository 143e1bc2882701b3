"""Time dilation's CPU pacing: a CPU phase lasts k times its CPU time, a waiting phase is left alone."""

from __future__ import annotations

import time

import pytest

from netbench import pacing
from netbench.replicators.base import StepTimer


@pytest.fixture(autouse=True)
def _reset() -> None:
    yield
    pacing.set_factor(1.0)


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_cpu_phase_padded_to_k_times_its_cpu_time() -> None:
    pacing.set_factor(3.0)
    timer = StepTimer()
    _spin(0.05)
    timer.compress()
    assert timer.compress_cpu_s >= 0.05
    assert timer.compress_s >= 3 * timer.compress_cpu_s - 1e-3  # padded: wall = k x CPU
    assert timer.compress_s < 3 * timer.compress_cpu_s + 0.05


def test_waiting_is_not_padded_and_k1_never_sleeps() -> None:
    pacing.set_factor(4.0)
    timer = StepTimer()
    time.sleep(0.05)  # a collective's wait: no CPU, nothing to pad
    timer.skip()
    _spin(0.01)
    timer.decode()
    assert timer.decode_s < 4 * timer.decode_cpu_s + 0.05  # the sleep before the phase was not counted as its CPU
    pacing.set_factor(1.0)
    assert pacing.pace(0.0, 1.0) == 0.0
    pacing.set_factor(0.5)  # below 1 means no dilation
    assert pacing.factor() == 1.0


def test_codec_work_in_backward_hooks_is_booked_as_paced_codec_time_with_its_cpu() -> None:
    """Backward (hooks included) is paced as a whole; the hooks' codec share of it is k x their CPU time."""
    from netbench.replicators.base import Hooked

    pacing.set_factor(2.5)
    timer = StepTimer()
    timer.book_hooked(Hooked(encode_s=0.011, decode_s=0.5, encode_cpu_s=0.01, decode_cpu_s=0.1))
    assert timer.compress_s == pytest.approx(0.025) and timer.decode_s == pytest.approx(
        0.5
    )  # a wait beyond k x CPU stays
    assert timer.compress_cpu_s == pytest.approx(0.01) and timer.decode_cpu_s == pytest.approx(0.1)
    pacing.set_factor(1.0)
    assert Hooked(encode_s=0.011, encode_cpu_s=0.01).paced() == (0.011, 0.0)
