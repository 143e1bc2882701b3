"""The planner's searches cost a bounded, small number of model evaluations, and each evaluation a bounded amount of
work whatever the bandwidth or the size of the loop it prices."""

import math
import random

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model import gloo_tcp
from netbench.model.calibration import Calibration
from netbench.model.planner import BW_RANGE_BPS, GRID_PER_DECADE, Planner
from netbench.model.schemes import Scheme
from netbench.model.search import bisect_log, max_evaluations, sign_change_log
from netbench.model.steptime import Scenario
from netbench.model.utilization import at_bandwidth, bandwidth_for
from netbench.shapes import ParamShape
from netbench.tcp import STOCK_LINUX

SHAPES = [ParamShape(f"w{i}", (512, 512)) for i in range(8)] + [ParamShape("b", (512,))]
DENSE = Scheme("full", ReplicatorConfig(name="full"))
DILOCO = Scheme("diloco", ReplicatorConfig(name="diloco"))
LOWRANK = Scheme("lowrank", ReplicatorConfig(name="lowrank", rank=4))
CALIB = Calibration(software_overhead_s=5e-5, encode_s_per_param={"lowrank": 2e-8})
SMOOTH_SEARCH = 16  # evaluations a search takes where the step is smooth in the bandwidth (bisection: ~37)


class Counted:
    """A function that counts its calls."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, x):
        self.calls += 1
        return self.f(x)


@pytest.mark.parametrize("seed", range(4))
def test_a_sign_change_is_found_within_tolerance_in_at_most_bisections_plus_itp_slack(seed):
    rnd = random.Random(seed)
    for _ in range(200):
        root = 10 ** rnd.uniform(3.1, 14.9)
        tol = rnd.choice([1e-9, 1e-6])
        shape = rnd.randrange(3)

        def f(x, root=root, shape=shape):
            if shape == 0:  # a step: nothing to interpolate
                return -1.0 if x < root else 0.0
            if shape == 1:  # steep, then flat
                return math.atan(50 * math.log(x / root))
            return 1.0 / root - 1.0 / x + (1e-12 if x > 3 * root else 0.0)  # a line in 1/x with a jump past it

        counted = Counted(f)
        found = sign_change_log(counted, *BW_RANGE_BPS, rel_tol=tol)
        assert abs(math.log(found / root)) <= tol * (1 + 1e-6)
        assert counted.calls <= max_evaluations(*BW_RANGE_BPS, tol)


def test_a_line_in_the_inverse_bandwidth_takes_a_few_evaluations():
    counted = Counted(lambda bw: 0.3 + 8e9 / bw - 5.0)  # a step of 0.3 s plus 1 GB, against 5 s
    found = sign_change_log(counted, *BW_RANGE_BPS)
    assert found == pytest.approx(8e9 / 4.7, rel=1e-9)
    assert counted.calls <= 12 < max_evaluations(*BW_RANGE_BPS, 1e-9)


def counting_planner() -> tuple[Planner, list[int]]:
    """A gloo planner whose backend counts the steps it models."""
    planner = Planner(SHAPES, CALIB)
    calls = [0]
    model = planner.backend.step

    def step(scheme, scenario):
        calls[0] += 1
        return model(scheme, scenario)

    planner.backend.step = step
    return planner, calls


def with_compute(planner: Planner, scheme: Scheme, sc: Scenario, times_floor: float) -> Scenario:
    """``sc`` computing ``times_floor`` times what its communication takes at the top of the planner's range."""
    floor = planner.step(scheme, sc.model_copy(update={"up_bps": BW_RANGE_BPS[1], "down_bps": BW_RANGE_BPS[1]}))
    return sc.model_copy(update={"compute_s": times_floor * floor.comm_time_s + 0.01})


@pytest.mark.parametrize("delay_s", [0.0, 0.005, 0.05])
@pytest.mark.parametrize("workers", [2, 16, 512])
def test_the_bandwidth_where_communication_equals_compute_takes_a_bounded_few_evaluations(delay_s, workers):
    planner, calls = counting_planner()
    sc = with_compute(planner, DENSE, Scenario(workers=workers, delay_s=delay_s), 3.0)
    before = calls[0]
    ans = planner.comm_equals_compute(DENSE, sc)
    assert ans["reason"] is None
    assert calls[0] - before <= SMOOTH_SEARCH


@pytest.mark.parametrize("target", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("scheme", [DENSE, DILOCO], ids=["full", "diloco"])
def test_the_bandwidth_for_a_utilisation_target_takes_a_bounded_few_evaluations(target, scheme):
    planner, calls = counting_planner()
    sc = with_compute(planner, scheme, Scenario(workers=8, delay_s=0.005), 200.0)
    before = calls[0]
    ans = bandwidth_for(planner.step, scheme, sc, target)
    assert ans["reason"] is None
    assert calls[0] - before <= SMOOTH_SEARCH


def test_crossovers_cost_one_grid_per_scheme_and_a_bounded_search_per_crossover():
    planner, calls = counting_planner()
    sc = Scenario(workers=4, compute_s=0.01)
    ans = planner.crossovers(LOWRANK, DENSE, sc)
    grid = int(math.log10(BW_RANGE_BPS[1] / BW_RANGE_BPS[0]) * GRID_PER_DECADE) + 1
    assert len(ans["crossovers"]) == 1
    x0 = BW_RANGE_BPS[0]
    halvings = math.ceil(math.log2(math.log(10 ** (1 / GRID_PER_DECADE)) / 1e-9))  # one grid interval to 1e-9
    assert calls[0] <= 2 * grid + halvings
    assert math.log(bisect_log(lambda bw: bw - 3 * x0, x0, 10 * x0) / (3 * x0)) <= 1e-9
    before = calls[0]
    planner.crossovers(DENSE, LOWRANK, sc)  # the same points: every one modelled once
    assert calls[0] == before


def sends(ops: int, op_bytes: float, rate_Bps: float, one_way_s: float) -> int:
    """How many times gloo's loop of ``ops`` segments hands bytes to its connection."""
    counted = []
    conn = gloo_tcp.Transfer(cwnd=gloo_tcp.window_bytes(STOCK_LINUX), cap=gloo_tcp.window_bytes(STOCK_LINUX))
    send = conn.send

    def counting(*args):
        counted.append(args)
        return send(*args)

    conn.send = counting
    gloo_tcp.pipeline_time_s(ops, op_bytes, one_way_s, 1e-4, rate_Bps, conn)
    return len(counted)


@pytest.mark.parametrize("rate_Bps", [1e5, 1e8, 1.2e10, 1e14])
def test_a_long_gloo_loop_costs_the_same_few_sends_as_a_short_one(rate_Bps):
    # 10 MB segments through a 2 MiB window over 10 ms: every segment waits for the connection, a byte stream
    short, long = sends(64, 1e7, rate_Bps, 0.005), sends(100_000, 1e7, rate_Bps, 0.005)
    assert long == short <= 12


def test_a_link_slower_than_its_window_sends_at_its_line_rate():
    conn = gloo_tcp.Transfer(cwnd=14480, cap=2**21)
    start = conn.send(0.0, 1e9, 1e5, 0.01)  # a slow link: 69,000 windows of 14,480 B, each longer than the round trip
    assert start == pytest.approx(1e9 / 1e5, rel=1e-12)


@pytest.mark.parametrize("delay_s", [0.0, 0.02])
def test_crossovers_are_those_of_every_grid_point(delay_s):
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(workers=8, compute_s=0.02, delay_s=delay_s)
    lo, hi = BW_RANGE_BPS
    grid = [lo * 10 ** (i / GRID_PER_DECADE) for i in range(int(math.log10(hi / lo) * GRID_PER_DECADE) + 1)]
    schemes = (DENSE, DILOCO, LOWRANK, Scheme("random", ReplicatorConfig(name="random")))
    crossings = 0
    for i, a in enumerate(schemes):
        for b in schemes[i + 1 :]:
            at = [at_bandwidth(sc, bw) for bw in grid]
            every = [planner.step(a, s).step_time_s - planner.step(b, s).step_time_s for s in at]
            changes = [k for k in range(len(grid) - 1) if (every[k] < 0) != (every[k + 1] < 0)]
            found = planner.crossovers(a, b, sc)["crossovers"]
            assert [next(k for k in changes if grid[k] <= c["bw_bps"] <= grid[k + 1]) for c in found] == changes
            crossings += len(changes)
    assert crossings >= 2
