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
    nvls_graph,
    ring_graph,
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


def rail_optimised(nodes: int, nics: int = 8, nic_bps: float = 400e9, nvls: bool = True) -> NcclCluster:
    net = NetProfile(transport="rdma", nic_bps=nic_bps, nics=nics)
    return NcclCluster(8 * nodes, nodes, 450e9, "nvlink", H100, net, nvls=nvls)


def test_eight_400g_nics_on_h100_give_eight_channels_within_nvlink_as_nccl_counts_it():
    """The ladder's 48 GB/s on 8 channels would exceed the GPU's 18 x 20.6 GB/s of NVLink: 8 x 45."""
    channels, bus, bound = ring_graph(rail_optimised(4))
    assert (channels, bus, bound) == (8, pytest.approx(360e9), "nvlink")


def test_one_100g_nic_gives_the_ladders_12_gb_s_and_the_nics_count_multiplies_the_line_rate():
    one = rail_optimised(4, nics=1, nic_bps=100e9)
    channels, bus, bound = ring_graph(one)  # the ladder's 12 GB/s (NVIDIA's figure for a 100G NIC, nccl-tests#119)
    assert (channels, bound) == (1, "nic") and bus == pytest.approx(min(12e9, net_bus_Bps(one.net)))
    four = NetProfile(transport="rdma", nic_bps=100e9, nics=4)
    assert net_bus_Bps(four) == pytest.approx(4 * net_bus_Bps(NetProfile(transport="rdma", nic_bps=100e9)))


def test_socket_streams_follow_the_channels_over_every_nic():
    one = NetProfile(transport="socket", nic_bps=100e9)
    four = NetProfile(transport="socket", nic_bps=100e9, nics=4)
    assert net_bus_Bps(four) == pytest.approx(2 * net_bus_Bps(one))  # 4 channels (one a NIC) against 2


def test_nvls_graph_has_a_head_per_nic_40_gb_s_inside_and_a_nics_speed_across():
    heads, intra, inter = nvls_graph(rail_optimised(2))
    assert (heads, intra) == (8, pytest.approx(40e9))
    assert inter == pytest.approx(min(48e9, 400e9 / 8 * 1448 / 1514))


def test_two_nodes_pick_nvlstree_and_more_nodes_a_ring():
    """NVLSTree's inter-node speed halves beyond two nodes (tuning.cc), so from 4 nodes the ring wins."""
    two = nccl_time("all_reduce", 2**33, rail_optimised(2))
    four = nccl_time("all_reduce", 2**33, rail_optimised(4))
    assert (two.algorithm, two.bound) == ("nvls_tree", "nvls")
    assert (four.algorithm, four.protocol) == ("ring", "Simple")
    assert two.bus_Bps > 8 * 400e9 / 8  # beyond the NICs' line rate: legitimate for NVLSTree on two nodes
    assert nccl_time("all_reduce", 2**33, rail_optimised(2, nvls=False)).algorithm == "ring"


def test_a_single_node_on_an_nvswitch_runs_nvls_for_large_all_reduces():
    c = NcclCluster(8, 1, 450e9, "nvlink", H100, NetProfile(), nvls=True)
    choice = nccl_time("all_reduce", 2**30, c)
    assert choice.algorithm == "nvls"
    assert nccl_time("all_gather", 2**30, c).algorithm == "ring"  # NVLS here for all-reduce only


def test_efficiencies_and_latency_scales_price_the_pick_without_changing_it():
    c = rail_optimised(4)
    slow = NcclCluster(**{**c.__dict__, "nvlink_efficiency": 0.5, "latency_scales": (("ring", 2.0),)})
    base, scaled = nccl_time("all_reduce", 2**33, c), nccl_time("all_reduce", 2**33, slow)
    assert (scaled.algorithm, scaled.protocol) == (base.algorithm, base.protocol)
    assert scaled.latency_s == pytest.approx(2 * base.latency_s)
    assert scaled.time_s - scaled.latency_s == pytest.approx(2 * (base.time_s - base.latency_s))
