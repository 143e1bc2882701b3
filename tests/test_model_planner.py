"""Derived answers hold at the values they report (equalities, doubling, crossovers)."""

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.planner import Planner
from netbench.model.schemes import Scheme
from netbench.model.search import bisect_int, sign_change_log
from netbench.model.steptime import Scenario
from netbench.shapes import ParamShape

SHAPES = [ParamShape(f"w{i}", (512, 512)) for i in range(8)] + [ParamShape("b", (512,))]
DENSE = Scheme("mtdao", ReplicatorConfig(name="mtdao", params_every=1, m1_every=1, m2_every=1))
LOWRANK = Scheme("lowrank", ReplicatorConfig(name="lowrank", rank=4))
CALIB = Calibration(software_overhead_s=5e-5, encode_s_per_param={"lowrank": 2e-8, "mtdao": 0.0})


def test_bisection_helpers():
    assert sign_change_log(lambda x: x - 1234.5, 1, 1e9) == pytest.approx(1234.5, rel=1e-8)
    assert bisect_int(lambda k: k * k >= 50, 1, 100) == 8


def test_comm_equals_compute_at_the_reported_bandwidth():
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(workers=4, compute_s=0.05, delay_s=0.0002)
    ans = planner.comm_equals_compute(DENSE, sc)
    assert ans["reason"] is None and ans["bw_bps"] > 0
    at = planner.step(DENSE, sc.model_copy(update={"up_bps": ans["up_bps"], "down_bps": ans["down_bps"]}))
    assert at.comm_time_s == pytest.approx(0.05, rel=1e-6)


def test_comm_equals_compute_keeps_an_asymmetric_ratio():
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(workers=4, compute_s=0.05, up_bps=50e6, down_bps=200e6)
    ans = planner.comm_equals_compute(DENSE, sc)
    assert ans["down_bps"] / ans["up_bps"] == pytest.approx(4)
    assert ans["bw_bps"] == pytest.approx(ans["up_bps"])


def test_comm_equals_compute_reasons():
    planner = Planner(SHAPES, CALIB)
    assert "compute time is 0" in planner.comm_equals_compute(DENSE, Scenario(workers=2))["reason"]
    latency_bound = Scenario(workers=64, compute_s=0.01, delay_s=0.5)
    ans = planner.comm_equals_compute(DENSE, latency_bound)
    assert ans["bw_bps"] is None and "latency-bound" in ans["reason"]


def test_doubling_node_count():
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(workers=2, compute_s=0.02, delay_s=0.002, up_bps=1e9, down_bps=1e9)
    ans = planner.doubling_nodes(DENSE, sc)
    n = ans["nodes"]
    assert n is not None and n > 2
    target = 2 * ans["baseline_step_time_s"]
    assert planner.step(DENSE, sc.model_copy(update={"workers": n})).step_time_s >= target
    assert planner.step(DENSE, sc.model_copy(update={"workers": n - 1})).step_time_s < target


def test_doubling_sharded_counts_are_multiples_of_g():
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(
        workers=8, gpus_per_node=4, intra_bits_per_s=1e11, compute_s=0.02, delay_s=0.002, up_bps=1e9, down_bps=1e9
    )
    ans = planner.doubling_nodes(DENSE, sc)
    assert ans["baseline_nodes"] == 8 and ans["nodes"] % 4 == 0


def test_doubling_never_within_range():
    planner = Planner(SHAPES, Calibration())
    sc = Scenario(workers=2, compute_s=100.0, up_bps=1e12, down_bps=1e12)
    ans = planner.doubling_nodes(DENSE, sc, max_nodes=1000)
    assert ans["nodes"] is None and "up to 1000" in ans["reason"]


def test_crossover_compression_versus_bytes():
    planner = Planner(SHAPES, CALIB)
    sc = Scenario(workers=4, compute_s=0.01)
    ans = planner.crossovers(LOWRANK, DENSE, sc)
    assert len(ans["crossovers"]) == 1
    c = ans["crossovers"][0]
    # slow links: fewer bytes win; fast links: no compression cost wins
    assert (c["faster_below"], c["faster_above"]) == ("lowrank", "mtdao")

    def gap(bw):
        s = sc.model_copy(update={"up_bps": bw, "down_bps": bw})
        return planner.step(LOWRANK, s).step_time_s - planner.step(DENSE, s).step_time_s

    assert abs(gap(c["bw_bps"])) < 1e-6 * planner.step(DENSE, sc).step_time_s
    assert gap(c["bw_bps"] / 2) < 0 < gap(c["bw_bps"] * 2)


def test_no_crossover_says_who_wins():
    planner = Planner(SHAPES, Calibration())  # no compression cost: fewer bytes always win
    ans = planner.crossovers(LOWRANK, DENSE, Scenario(workers=4))
    assert ans["crossovers"] == [] and ans["reason"].startswith("lowrank is never slower")


def test_derived_bundle_shape():
    planner = Planner(SHAPES, CALIB)
    scs = [Scenario(workers=n, compute_s=0.05) for n in (2, 8)]
    d = planner.derived([LOWRANK, DENSE], scs)
    assert len(d["comm_equals_compute_bw"]) == 4
    assert len(d["doubling_nodes"]) == 2  # one per scheme per distinct link
    assert len(d["crossover_bw"]) == 2  # one pair per node count
