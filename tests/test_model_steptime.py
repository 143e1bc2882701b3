"""Step time = compute + compression + communication; sharded and periodic cases by hand."""

import dataclasses

import pydantic
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.collectives import Link, cost, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.gloo_tcp import gloo_time
from netbench.model.network import GraphModel
from netbench.model.schemes import Scheme, SchemeSettings, build_scheme, parse_scheme_list
from netbench.model.steptime import Scenario, call_cost
from netbench.shapes import ParamShape
from netbench.tcp import STOCK_LINUX

BARE = Framing(gloo_preamble_bytes=0, acks_per_segment=0.0)
SHAPES = [ParamShape("w", (1000, 1000))]
DENSE = 1_000_000 * 4


def mtdao(kx: int, k1: int, kv: int, **extra) -> Scheme:
    return Scheme("mtdao", ReplicatorConfig(name="mtdao", params_every=kx, m1_every=k1, m2_every=kv, **extra))


MTDAO = mtdao(1, 2, 4)


def ring_ar(nbytes, n, bps, alpha=0.0):
    return cost(pattern("all_reduce", "ring", nbytes, n), Link(bps, bps, alpha), BARE)


def test_flat_step_is_the_sum():
    calib = Calibration(encode_s_per_param={"mtdao": 1e-8})
    sc = Scenario(workers=4, up_bps=100e6, down_bps=100e6, compute_s=0.2, framing=BARE)
    est = GraphModel.star_step(MTDAO, SHAPES, sc, calib)
    one = ring_ar(DENSE, 4, 100e6)
    assert est.comm_time_s == pytest.approx(one.time_s * (1 + 1 / 2 + 1 / 4))
    assert est.payload_bytes_per_step == pytest.approx(DENSE * 1.75)
    assert est.tx.payload == pytest.approx(1.5 * DENSE * 1.75)  # 2(N-1)/N of each buffer
    assert est.compression_time_s == pytest.approx(1e6 * 1e-8)
    assert est.step_time_s == pytest.approx(0.2 + 0.01 + est.comm_time_s)
    assert est.comm_fraction == pytest.approx(est.comm_time_s / est.step_time_s)


def test_delay_and_software_overhead_add_per_hop():
    # A one-word buffer passes the ring hop by hop: each of 2(N-1) hops costs delay + overhead.
    calib = Calibration(software_overhead_s=1e-4)
    base = Scenario(workers=4, framing=BARE)
    slow = base.model_copy(update={"delay_s": 0.005})
    scheme = mtdao(1, 1, 1)
    tiny = [ParamShape("w", (1,))]
    a = GraphModel.star_step(scheme, tiny, base, calib)
    b = GraphModel.star_step(scheme, tiny, slow, calib)
    assert b.comm_time_s - a.comm_time_s == pytest.approx(3 * 6 * 0.005)  # 3 all-reduces x 2(N-1) hops
    assert a.wire.latency_s == pytest.approx(3 * 6 * 1e-4)


def test_ring_step_uses_gloos_pipeline_over_tcp():
    # A 4 MB buffer at 100mbit with 5 ms: each call is gloo_time's, at the framing's payload rate.
    calib = Calibration(software_overhead_s=1e-4)
    sc = Scenario(workers=4, delay_s=0.005, framing=BARE, tcp=STOCK_LINUX)
    est = GraphModel.star_step(mtdao(1, 1, 1), SHAPES, sc, calib)
    payload_rate = 100e6 / 8 * BARE.mss / BARE.frame_bytes  # 1448 payload bytes per 1514-byte frame
    one = gloo_time("all_reduce", DENSE, 4, payload_rate, 0.005, 1e-4, BARE.mss, STOCK_LINUX, idle_s=0.0).time_s
    assert est.comm_time_s == pytest.approx(
        3 * one, rel=1e-3
    )  # (the framing also counts each message's last, partial frame)
    # the delay is mostly hidden behind 40 ms segments: less than alpha-beta's 2(N-1) x 5 ms per call
    no_delay = GraphModel.star_step(mtdao(1, 1, 1), SHAPES, sc.model_copy(update={"delay_s": 0.0}), calib)
    assert 0 < est.comm_time_s - no_delay.comm_time_s < 3 * 6 * 0.005


def test_sharded_by_hand():
    calib = Calibration(encode_s_per_param={"mtdao": 1e-8})
    sc = Scenario(
        workers=8, gpus_per_node=4, intra_bits_per_s=10e9, up_bps=100e6, down_bps=100e6, compute_s=0.1, framing=BARE
    )
    assert sc.machines == 2
    est = GraphModel.star_step(MTDAO, SHAPES, sc, calib)
    inter = ring_ar(DENSE, 2, 100e6).time_s * 1.75  # scheme among the 2 nodes on the slow link
    intra = ring_ar(DENSE, 4, 10e9).time_s  # reduce-scatter + all-gather among 4 on the fast link
    assert est.intra_time_s == pytest.approx(intra)
    assert est.comm_time_s == pytest.approx(inter + intra)
    assert est.compression_time_s == pytest.approx(1e6 / 4 * 1e-8)  # each accelerator compresses its shard
    assert est.tx.payload == pytest.approx(DENSE * 1.75)  # 2 nodes: 2(N-1)/N = 1


def test_hierarchy_is_cheaper_than_flat_on_a_slow_link():
    flat = Scenario(workers=16, up_bps=100e6, down_bps=100e6)
    tiered = flat.model_copy(update={"gpus_per_node": 8, "intra_bits_per_s": 100e9})
    calib = Calibration()
    assert (
        GraphModel.star_step(MTDAO, SHAPES, tiered, calib).comm_time_s
        < GraphModel.star_step(MTDAO, SHAPES, flat, calib).comm_time_s
    )


def test_one_machine_has_no_slow_link_traffic():
    sc = Scenario(workers=4, gpus_per_node=4, intra_bits_per_s=1e9)
    est = GraphModel.star_step(MTDAO, SHAPES, sc, Calibration())
    assert est.payload_bytes_per_step == 0 and est.tx.total == 0 and est.intra_time_s > 0


def test_overlap_takes_the_max():
    calib = Calibration(encode_s_per_param={"mtdao": 1e-8})
    sc = Scenario(workers=2, compute_s=10.0, framing=BARE)
    overlapped = dataclasses.replace(MTDAO, overlap=True)
    est = GraphModel.star_step(overlapped, SHAPES, sc, calib)
    assert est.step_time_s == pytest.approx(0.01 + 10.0)
    assert GraphModel.star_step(MTDAO, SHAPES, sc, calib).step_time_s == pytest.approx(0.01 + 10.0 + est.comm_time_s)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"workers": 1},
        {"workers": 100_001},
        {"gpus_per_node": 2, "workers": 4},
        {"gpus_per_node": 4, "workers": 6, "intra_bits_per_s": 1e9},
    ],
)
def test_scenario_validation(kwargs):
    with pytest.raises(pydantic.ValidationError):
        Scenario(**kwargs)


def test_scheme_list_and_settings():
    assert parse_scheme_list("all")[5:9] == ["lowrank", "mtdao", "streaming", "sparseloco"]  # listing order
    assert parse_scheme_list("dct, full,dct") == ["dct", "full"]
    with pytest.raises(ValueError, match="unknown replicator"):
        parse_scheme_list("dct,zip")
    s = build_scheme("mtdao", SchemeSettings(params_every=7, m1_every=8, m2_every=9, grad_dtype="bf16"))
    assert s.config == mtdao(7, 8, 9, grad_dtype="bf16").config
    assert build_scheme("lowrank", SchemeSettings(rank=0.25)).config == ReplicatorConfig(name="lowrank", rank=0.25)
    with pytest.raises(pydantic.ValidationError):
        build_scheme("lowrank", SchemeSettings(rank=2.5))
    with pytest.raises(pydantic.ValidationError):
        build_scheme("dct", SchemeSettings(topk=5000, chunk=64))


def test_scheme_from_a_run_config_predicts_its_declared_bytes():
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload
    from netbench.model.schemes import scheme_from_config

    cfg = ReplicatorConfig(name="dct", topk=8, chunk=32)
    est = GraphModel.star_step(scheme_from_config(cfg), SHAPES, Scenario(workers=3), Calibration())
    assert est.payload_bytes_per_step == declared_payload(SHAPES, cfg, 3).bytes_per_step
    assert est.tx.payload == 2 * est.payload_bytes_per_step  # ring all_gather: N-1 contributions forwarded


def test_an_exchange_whose_hops_run_the_codec_is_priced_as_a_point_to_point_ring():
    link, tcp, nbytes = Link(1e9, 1e9, 0.05, one_way_s=0.05), STOCK_LINUX.model_copy(update={"cc": "bbr"}), 500_000
    p = pattern("all_reduce", "ring", nbytes, 6)
    rate = p.critical_bytes / cost(p, link, Framing()).transfer_s
    dense = Exchange("all_reduce", nbytes)
    ringed = dataclasses.replace(dense, hop_codec=True)
    times = {}
    for ex, kind in ((dense, "all_reduce"), (ringed, "p2p_ring")):  # gloo's all-reduce stays gloo's
        times[kind] = call_cost(ex, 6, link, Framing(), "ring", tcp).time_s
        assert times[kind] == pytest.approx(gloo_time(kind, nbytes, 6, rate, 0.05, 0.0, Framing().mss, tcp, 0.0).time_s)
    assert times["p2p_ring"] < times["all_reduce"]
