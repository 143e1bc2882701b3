"""NCCL's cost model (release 2.27.5's tuning.cc) over the network netbench prices: latencies, protocols, sockets."""

import pytest

from netbench.model.nccl import (
    BUFFSIZE,
    NCCL_RELEASE,
    NcclCluster,
    NetProfile,
    bus_factor,
    nccl_time,
    net_bus_Bps,
    socket_streams,
    steps_of,
)

H100 = 2  # NCCL's Hopper row


def cluster(ranks: int, nodes: int, **net) -> NcclCluster:
    return NcclCluster(
        ranks, nodes, intra_bytes_per_s=450e9, intra_link="nvlink", generation=H100, net=NetProfile(**net)
    )


def test_the_release_followed_is_named():
    assert NCCL_RELEASE == "2.27.5"


def test_steps_and_bus_factors_are_nccl_tests_ones():
    assert steps_of("all_reduce", 8) == 14 and steps_of("all_gather", 8) == 7
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(3 / 4)


def test_a_tiny_single_node_all_reduce_is_nccls_ll_ring_latency():
    """One node of 8 on NVLink: ring LL latency = base 6.6 us + 14 steps x 0.6 us (tuning.cc's tables)."""
    choice = nccl_time("all_reduce", 8, cluster(8, 1))
    assert (choice.algorithm, choice.protocol) == ("ring", "LL")
    assert choice.latency_s == pytest.approx((6.6 + 14 * 0.6) * 1e-6)


def test_a_large_multi_node_all_reduce_runs_ring_simple_at_the_nics_rate():
    c = cluster(64, 8, transport="rdma", nic_bps=400e9, channels=16)
    choice = nccl_time("all_reduce", 2**31, c)
    assert (choice.algorithm, choice.protocol) == ("ring", "Simple")
    assert choice.bus_Bps == pytest.approx(400e9 / 8 * 1448 / 1514)  # NDR: the 46-48 GB/s NVIDIA quotes per NIC


def test_a_7b_all_reduce_on_64_gpus_at_1_tbit_costs_well_under_a_second_of_latency():
    c = cluster(64, 8, transport="rdma", nic_bps=1e12, channels=16)
    choice = nccl_time("all_reduce", 6.74e9 * 2, c)  # bf16 gradients of llama-7b
    assert choice.latency_s < 2e-3
    assert choice.time_s < 0.3


@pytest.mark.parametrize("nic_gbit", [10, 25, 40, 100])
def test_sockets_at_10_to_100_gbe_land_where_public_nccl_tests_runs_do(nic_gbit):
    """Published socket runs: 4.5-5.2 GB/s bus bandwidth at 100 GbE with 4 channels of two sockets
    (github.com/NVIDIA/nccl/issues/450), 1.9-3.9 GB/s at 32 GbE with 4-8 threads (github.com/NVIDIA/nccl/issues/209),
    0.7-1.4 GB/s with the defaults."""
    default = net_bus_Bps(NetProfile(transport="socket", nic_bps=nic_gbit * 1e9))
    assert 0.7e9 <= default <= 1.4e9
    tuned = net_bus_Bps(NetProfile(transport="socket", nic_bps=nic_gbit * 1e9, channels=4, threads=1))
    assert default <= tuned <= nic_gbit * 1e9 / 8


def test_threads_and_sockets_raise_the_ceiling_up_to_the_line_rate():
    few = NetProfile(transport="socket", nic_bps=100e9, threads=1, socks_per_thread=1)
    many = NetProfile(transport="socket", nic_bps=100e9, threads=4, socks_per_thread=4)
    assert socket_streams(few) == 1 and socket_streams(many) == 16
    assert net_bus_Bps(many) == pytest.approx(100e9 / 8 * 1448 / 1514)
    assert net_bus_Bps(few) < net_bus_Bps(many)


def test_a_long_round_trip_caps_each_channel_at_its_buffer_per_rtt():
    far = NetProfile(transport="rdma", nic_bps=400e9, one_way_s=0.025, channels=4)
    assert net_bus_Bps(far) == pytest.approx(4 * BUFFSIZE / 0.05)
    c = NcclCluster(16, 2, 450e9, "nvlink", H100, far)
    near = NcclCluster(16, 2, 450e9, "nvlink", H100, far.model_copy(update={"one_way_s": 0.0}))
    small = nccl_time("all_reduce", 1024, c).time_s - nccl_time("all_reduce", 1024, near).time_s
    assert small == pytest.approx(2 * 0.025, abs=1e-4)  # each step across the two nodes waits the one-way delay


def test_ll128_is_off_over_sockets():
    c = cluster(16, 2, transport="socket", nic_bps=100e9)
    protocols = {nccl_time("all_reduce", 2**k, c).protocol for k in range(3, 33)}
    assert "LL128" not in protocols and {"LL", "Simple"} <= protocols
