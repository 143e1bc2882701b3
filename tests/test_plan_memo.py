"""What ``plan`` remembers between probes changes none of its answers: its document is the same with gloo's call
pricing and the fragments' layers worked out afresh at every probe, and a bucket pipeline's lead lag is what the
simulation gives wherever a ring of two can settle skewed."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from netbench.declarations import fragments
from netbench.declarations.registry import names
from netbench.model import gloo_tcp, overlap, steptime
from netbench.model.calibration import read_calibration
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.planning import PlanRequest, plan

CALIBRATION = Path(__file__).resolve().parent.parent / "reports" / "ci" / "calibration.json"


def _every_scheme() -> tuple:
    return tuple(build_scheme(n, SchemeSettings()) for n in names())


def _forget(function):
    """``function`` without its memory: its result worked out at every call (the memo's wrapped function)."""
    return function.__wrapped__


@pytest.mark.parametrize(
    "link",
    [{"bw": "10gbit", "delay": "5ms"}, {"bw": "100mbit", "delay": "0ms"}, {"bw": "1gbit", "delay": "0.2ms"}],
    ids=["wan", "default-link", "lan"],
)
def test_a_plan_is_the_same_when_nothing_is_remembered(monkeypatch, link):
    calib = read_calibration(CALIBRATION)
    request = PlanRequest(
        schemes=_every_scheme(), shapes="llama-1b", nodes="2,8,64", compute_ms=200, bucket_mb=25, **link
    )
    remembered = plan(request, calib, CALIBRATION).doc
    monkeypatch.setattr(steptime, "_gloo_call", _forget(steptime._gloo_call))
    monkeypatch.setattr(fragments, "_layers", _forget(fragments._layers))
    afresh = plan(request, calib, CALIBRATION).doc
    assert afresh == remembered
    assert remembered["derived"]["crossover_bw"]  # the searches ran


def test_the_memo_of_gloo_calls_holds_what_gloo_time_gives():
    steptime._gloo_call.cache_clear()
    args = ("all_gather", 4e6, 2, 1.2e8, 0.005, 2e-5, 1448, steptime.STOCK_LINUX, 0.0, 4e6, True, False)
    first = steptime._gloo_call(*args)
    assert steptime._gloo_call(*args) is first
    assert first == gloo_tcp.gloo_time(*args)
    assert steptime._gloo_call.cache_info().hits == 1


class _Estimate:
    """The parts of a step estimate :func:`overlap.skew_lag_s` reads."""

    def __init__(self, machines: int, delay_s: float, compression_s: float) -> None:
        self.scenario = type("Scenario", (), {"machines": machines, "delay_s": delay_s})()
        self.compression_time_s = compression_s


def test_the_lead_lag_is_the_simulated_one_wherever_a_ring_of_two_can_settle_skewed():
    skewed_cases = 0
    for kind, machines, calls, lanes, delay, codec, transfer in itertools.product(
        ("all_gather", "all_reduce"), (2, 3), (1, 2, 8), (1, 2), (0.0, 0.001, 0.05), (0.0, 0.01, 0.5), (0.02, 3.0)
    ):
        est = _Estimate(machines, delay, codec)
        lag = gloo_tcp.lead_lag_s(calls, lanes, transfer / (2 * calls), codec / calls) if calls >= 2 else 0.0
        expected = lag if gloo_tcp.pipeline_skew_expected(kind, machines, calls, codec, delay, lag) else 0.0
        assert overlap.skew_lag_s(est, kind, calls, lanes, codec, transfer) == expected
        skewed_cases += expected > 0
    assert skewed_cases  # some cases did settle skewed, so the simulation was compared
