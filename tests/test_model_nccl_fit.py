"""nccl-tests logs fitted through NCCL's tuner: sizes attributed to NCCL's picks, the cluster's own terms fitted,
and the planned node count choosing its algorithm again."""

import json
from pathlib import Path

import pytest

from netbench.cli.app import main
from netbench.model.nccl import nccl_time
from netbench.model.nccl_fit import ClusterHardware, NcclFitError, fit_tuned
from netbench.model.nccl_tests import fit_log, parse_log, read_log

FIXTURES = Path(__file__).parent / "fixtures" / "nccl_tests"
RAILS = ClusterHardware(accelerator="h100-sxm", nics=8, nic_bps=400e9, transport="rdma")
TWO = "nccl-tests-issue309-2x8-h100-ib400-all_reduce.txt"
EIGHT = "nccl-tests-issue309-8x8-h100-ib400-all_reduce.txt"


def measured(log, size: int) -> float:
    row = next(r for r in log.rows if r.size == size)
    return (row.oop_s + row.ip_s) / 2


def test_a_two_node_nvswitch_log_is_nvlstree_and_says_nothing_of_its_nics():
    fit = fit_tuned(read_log(FIXTURES / TWO), RAILS)
    large = [pick for size, pick in fit.picks if size >= 2**30]
    assert large and all(p.startswith("nvls_tree/Simple, nvls") for p in large)
    assert set(fit.efficiencies) == {"nvls"} and 0.5 < fit.efficiencies["nvls"] <= 1.0
    assert "nic" in fit.unfitted() and not fit.warnings


def test_the_fit_carries_to_eight_nodes_where_the_bus_bandwidth_fit_does_not():
    """At 8 nodes NCCL runs a ring near 320 GB/s, not the 2-node NVLSTree's 467: the tuned fit picks again."""
    two, eight = read_log(FIXTURES / TWO), read_log(FIXTURES / EIGHT)
    tuned = fit_tuned(two, RAILS)
    plain = fit_log(two)
    for size in (2**30, 2**32, 2**33):
        t = measured(eight, size)
        assert tuned.time_s(size, 8) == pytest.approx(t, rel=0.15)
        assert plain.time_s("all_reduce", size, eight.ranks) < 0.8 * t  # the 2-node bus bandwidth, carried


def test_without_nvls_every_size_is_a_ring_or_a_tree():
    ring = read_log(FIXTURES / "nccl-tests-issue309-2x8-h100-ib400-ring-minctas24-all_reduce.txt")
    fit = fit_tuned(ring, ClusterHardware(nics=8, nic_bps=400e9, transport="rdma", accelerator="a100-80gb"))
    assert {pick.split("/")[0] for _, pick in fit.picks} <= {"ring", "tree"}
    assert "nvls" not in fit.efficiencies


def test_a_log_faster_than_the_described_nics_is_flagged():
    one_nic = ClusterHardware(nics=1, nic_bps=100e9, transport="rdma", accelerator="a100-80gb")
    fit = fit_tuned(read_log(FIXTURES / EIGHT), one_nic)
    assert fit.warnings and "more or faster NICs" in fit.warnings[0]


def test_a_log_without_host_names_cannot_be_fitted_per_node():
    text = (FIXTURES / TWO).read_text()
    log = parse_log("\n".join(line for line in text.splitlines() if " on " not in line), "no-hosts.txt")
    with pytest.raises(NcclFitError, match="node count"):
        fit_tuned(log, RAILS)


def test_mpi_builds_of_nccl_tests_are_recognised():
    log = read_log(FIXTURES / "nccl-tests-issue309-4x8-h100-vm-all_reduce_mpi.txt")
    assert (log.collective, log.ranks, log.nodes) == ("all_reduce", 32, 4)


def test_calibrate_fits_at_nccls_picks_and_plan_picks_again_at_its_node_count(capsys, tmp_path):
    out = tmp_path / "fit.json"
    main(
        [
            "calibrate", "--from-nccl-tests", str(FIXTURES / TWO), "--out", str(out),
            "--accelerator", "h100-sxm", "--nics", "8", "--nic-bw", "400gbit", "--transport", "rdma",
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert "at NCCL's picks on 2 nodes of 8" in printed and "left at NCCL's model" in printed
    saved = json.loads(out.read_text())
    assert saved["tuned"]["all_reduce"]["hardware"]["nics"] == 8
    main(
        [
            "plan", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration", str(out),
            "--shapes", "gpt2-medium", "--nodes", "2,8", "-G", "8", "-r", "full", "--compute-ms", "100", "--json",
        ]
    )  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"]["net"]["transport"] == "rdma" and doc["backend"]["net"]["nics"] == 8
    tuned = fit_tuned(read_log(FIXTURES / TWO), RAILS)
    for row in doc["rows"]:
        nodes = row["machines"]
        nbytes = row["exchanges"][0]["bytes_per_step"]
        expected = nccl_time("all_reduce", nbytes, tuned.cluster(nodes))
        assert row["comm_time_s"] == pytest.approx(expected.time_s, rel=1e-9)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--accelerator", "h100-sxm"], "--accelerator and --nic-bw"),
        (["--accelerator", "tpu", "--nic-bw", "400gbit"], "--accelerator"),
        (["--accelerator", "h100-sxm", "--nic-bw", "fast"], "--nic-bw"),
        (["--accelerator", "h100-sxm", "--nic-bw", "400gbit", "--nics", "0"], "--nics"),
    ],
)
def test_a_badly_described_cluster_is_one_line_exit_2(capsys, tmp_path, args, needle):
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--from-nccl-tests", str(FIXTURES / TWO), "--out", str(tmp_path / "o.json"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
    assert not (tmp_path / "o.json").exists()


def plan_json(capsys, *args: str) -> dict:
    base = ["plan", "--backend", "nccl", "--accelerator", "v100", "--shapes", "gpt2-medium", "--nodes", "4", "-G", "8"]
    main([*base, "-r", "full", "--compute-ms", "100", "--json", *args])
    return json.loads(capsys.readouterr().out)


def test_plan_takes_the_nodes_nics_and_their_vendors_socket_defaults(capsys):
    one = plan_json(capsys, "--bw", "10gbit")
    four = plan_json(capsys, "--bw", "10gbit", "--nics", "4")
    assert four["links"]["net_bus_Bps"] > 1.5 * one["links"]["net_bus_Bps"]
    assert four["backend"]["net"]["nics"] == 4 and four["backend"]["net"]["channels"] == 4
    aws = plan_json(capsys, "--bw", "100gbit", "--nic-vendor", "aws")["backend"]["net"]
    assert (aws["threads"], aws["socks_per_thread"]) == (2, 8)  # NCCL's own for AWS ENA (net_socket.cc)
    given = plan_json(capsys, "--bw", "100gbit", "--nic-vendor", "aws", "--socket-threads", "1")["backend"]["net"]
    assert (given["threads"], given["socks_per_thread"]) == (1, 1)  # given: NCCL takes them as set


def test_calibrate_warns_of_a_bus_bandwidth_fit_no_link_can_carry(capsys, tmp_path):
    """A latency-bound size range's slope fits an impossible bandwidth (1.9e9 GB/s on this log): said, not hidden."""
    log = FIXTURES / "nccl-tests-issue309-4x8-h100-vm-all_reduce_mpi.txt"
    out = tmp_path / "fit.json"
    main(["calibrate", "--from-nccl-tests", str(log), "--out", str(out), "--accelerator", "h100-sxm"]
         + ["--nics", "8", "--nic-bw", "400gbit", "--transport", "rdma"])  # fmt: skip
    warnings = json.loads(out.read_text())["tuned"]["all_reduce"]["warnings"]
    assert any("latency-bound" in w for w in warnings)
    assert "latency-bound" in capsys.readouterr().out
