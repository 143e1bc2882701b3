"""Bytes per link direction: the model's beside the counters', named alike, and the busiest link."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from netbench import pacing
from netbench.model.calibration import Calibration
from netbench.model.network import GraphModel
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.model.steptime import Scenario
from netbench.orchestrator.run.links import access_bytes_per_step, compare_links, trunk_bytes_per_step
from netbench.shapes import ParamShape
from netbench.topology import DirectionSpec, place
from netbench.topology.presets import Site, Wan, sites

LAN, WAN = DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=20e6, delay_s=0.01)
TOPO = sites([Site("a", 2, LAN, LAN), Site("b", 2, LAN, LAN)], [Wan("a", "b", WAN)])


def test_counters_are_named_as_the_model_names_link_directions() -> None:
    steps = pd.DataFrame(
        [
            {"rank": r, "step": s, "warmup": s == 0, "tx_bytes": 1000 * (r + 1) + s, "rx_bytes": 10 * s}
            for r in range(4)
            for s in range(3)
        ]
    )
    placement = place(TOPO, "interleaved")  # rank 1 runs on node 2
    access = access_bytes_per_step(steps, TOPO, placement)
    assert access["n2 up"] == 2001.5 and access["n1 up"] == 3001.5 and access["n0 down"] == 15.0  # warm-up left out
    trunks = pd.DataFrame(
        [
            {"step": st, "link": "a--b", "direction": d, "tx_bytes": b, "tx_packets": 1}
            for st, d, b in (
                (1, "fwd", 500),
                (1, "rev", 400),
                (3, "fwd", 8500),
                (3, "rev", 2000),
                (4, "fwd", 3000),
                (4, "rev", 1600),
            )
        ]
    )  # a row may hold several steps' bytes (sampled late)
    assert trunk_bytes_per_step(trunks, TOPO) == {"a to b": 3000.0, "b to a": 1000.0}  # steps 1-4: 12000 / 4, 4000 / 4
    assert trunk_bytes_per_step(trunks.iloc[:0], TOPO) == {}


def test_a_rank_s_tail_is_charged_to_its_steps_over_the_whole_run() -> None:
    """A rank ahead of a slow hop books its steps' last messages a step late, or after its last step: with the last
    step's tail recorded, each access direction is the whole run's counters over its steps, warm-up included."""
    rows = [
        {"rank": r, "step": s, "warmup": s == 0, "tx_bytes": tx, "rx_bytes": 100_000, "tail_tx_bytes": None}
        for r, sent in (
            (0, (60_000, 140_000, 70_000)),
            (1, (100_000, 100_000, 100_000)),
            (2, (1, 2, 3)),
            (3, (0, 0, 0)),
        )
        for s, tx in enumerate(sent)
    ]
    rows[2] |= {"tail_tx_bytes": 30_000, "tail_rx_bytes": 66}  # rank 0 still sending 30 kB after its last step
    rows[5] |= {"tail_tx_bytes": 0, "tail_rx_bytes": 0}
    steps = pd.DataFrame(rows)
    access = access_bytes_per_step(steps, TOPO, place(TOPO, "topology"))
    assert access["n0 up"] == 100_000.0  # (60 + 140 + 70 + 30) kB over 3 steps
    assert access["n0 down"] == (300_000 + 66) / 3
    assert access["n1 up"] == 100_000.0
    assert access["n2 up"] == 2.5  # no tail recorded: the measured steps' mean, as runs without it were read
    assert access_bytes_per_step(steps.drop(columns="tail_tx_bytes"), TOPO, place(TOPO, "topology"))["n0 up"] == 105_000


def test_the_model_bottleneck_and_the_busiest_link_by_counters() -> None:
    model = GraphModel(TOPO, place(TOPO, "topology"))
    calib = Calibration(software_overhead_s=1e-4, encode_s_per_param={"full": 1e-9})
    est = model.estimate(
        build_scheme("full", SchemeSettings()), [ParamShape("w", (512, 512))], Scenario(workers=4), calib
    )
    measured = {name: b * 1.05 for name, b in est.link_bytes.items()}
    measured["n0 up"] = 1e9  # a node sending far more than the model says: busiest by its time on the wire
    out = compare_links(est, TOPO, measured)
    assert out["bottleneck_model"] == est.bottleneck.name and "to" in out["bottleneck_model"]  # a WAN direction
    assert out["busiest_link"] == "n0 up" and out["busiest_send_s_per_step"] == pytest.approx(8.0)
    wan = next(r for r in out["directions"] if r["link"] == est.bottleneck.name)
    assert wan["ratio"] == pytest.approx(1.05) and wan["rate_bps"] == 20e6
    del measured["n0 up"]
    assert compare_links(est, TOPO, measured)["busiest_link"] in (
        "a to b",
        "b to a",
    )  # the WAN (either way): 20 Mbit/s among 1 Gbit/s LANs


def test_a_straggler_stretches_each_phase_by_its_scale() -> None:
    pacing.set_compute_scale(2.0)
    try:
        began = time.perf_counter()
        slept = pacing.pace(0.05, 0.0)  # a 50 ms phase (the shapes workload's sleep: no CPU time)
        assert slept == pytest.approx(0.05) and time.perf_counter() - began >= 0.05
        pacing.set_factor(2.0)
        assert pacing.pace(0.01, 0.01) == pytest.approx(
            0.01 + 0.02
        )  # dilation pads to 20 ms, then the straggler doubles that
    finally:
        pacing.set_factor(1.0)
        pacing.set_compute_scale(1.0)
    assert pacing.pace(0.05, 0.0) == 0.0


def test_a_run_with_an_ended_phase_is_not_compared_link_by_link() -> None:
    """1-bit Adam's dense warm-up sits in the counters' whole-run means and not in the model's lasting phase: the
    link report says so instead of a ratio between the two."""
    from netbench.declarations.config import ReplicatorConfig
    from netbench.emulation.spec import ClusterSpec
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.run.links import ENDED_PHASE, link_report
    from netbench.workloads.config import WorkloadConfig

    cluster = ClusterSpec(nodes=2, up={"rate_bps": 1e8}, down={"rate_bps": 1e8})
    work = WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=1,ffn=128,vocab=128", compute_ms=10)
    steps = pd.DataFrame(
        [
            {"rank": r, "step": s, "warmup": s == 0, "compute_s": 0.01, "tx_bytes": 1000, "rx_bytes": 1000}
            for r in range(2)
            for s in range(3)
        ]
    )
    calibration = Calibration()
    for name, ended in (("onebit", True), ("full", False)):
        config = RunConfig(cluster=cluster, replicator=ReplicatorConfig(name=name), workload=work, capture=False)
        report = link_report(config, steps, pd.DataFrame(), calibration)
        assert (report.get("error") == ENDED_PHASE) is ended, report
