"""nccl-tests logs from public threads (tests/fixtures/nccl_tests, sources in its README): read, fitted, planned."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from netbench.cli.app import main
from netbench.model.backends import CodecCost, NcclBackend
from netbench.model.compute import model_shape
from netbench.model.nccl_tests import NcclTestsError, fit_log, fit_logs, parse_log, read_log
from netbench.model.schemes import shape_key
from netbench.model.steptime import Scenario
from netbench.shapes import resolve_shapes

FIXTURES = Path(__file__).parent / "fixtures" / "nccl_tests"
A3MEGA = FIXTURES / "gcp-a3mega-2x8-h100-all_reduce.txt"
ISSUE450 = FIXTURES / "nccl-issue450-4x8-v100-socket-all_reduce.txt"
ISSUE232 = FIXTURES / "nccl-tests-issue232-2x1-h100-ib-all_reduce.txt"
ISSUE1435 = FIXTURES / "nccl-issue1435-1x2-gpu-all_gather.txt"
# (file, collective, ranks, nodes, rows)
EXPECTED = [
    (A3MEGA, "all_reduce", 16, 2, 31),
    (ISSUE450, "all_reduce", 32, None, 5),
    (ISSUE232, "all_reduce", 2, None, 5),
    (ISSUE1435, "all_gather", 2, None, 7),
]
# logs whose own sizes follow a latency + bandwidth line: part of one predicts the rest (the 100 GbE socket log's does
# not: its time jumps sevenfold from 16 to 32 MiB, a second regime its fit names, a slowdown its thread is about)
PREDICTABLE = [A3MEGA, ISSUE232, ISSUE1435]


def measured(row) -> float:
    return (row.oop_s + row.ip_s) / 2


@pytest.mark.parametrize("path,collective,ranks,nodes,rows", EXPECTED, ids=lambda v: getattr(v, "name", None))
def test_each_log_is_read(path, collective, ranks, nodes, rows):
    log = read_log(path)
    assert (log.collective, log.ranks, log.nodes, len(log.rows)) == (collective, ranks, nodes, rows)
    assert [r.size for r in log.rows] == sorted(r.size for r in log.rows)


@pytest.mark.parametrize("path", [e[0] for e in EXPECTED], ids=lambda p: p.name)
def test_the_fit_is_within_ten_percent_at_16_mb_and_above(path):
    log = read_log(path)
    fit = fit_log(log)
    big = [r for r in log.rows if r.size >= 16e6]
    assert big
    for r in big:
        assert fit.time_s(log.collective, r.size, log.ranks) == pytest.approx(measured(r), rel=0.10), r.size
    assert all(abs(res) < 0.10 for size, res in fit.residuals if size >= 16e6)


@pytest.mark.parametrize("path", PREDICTABLE, ids=lambda p: p.name)
@pytest.mark.parametrize("half", [0, 1])
def test_a_fit_on_half_the_rows_predicts_the_other_half_within_15_percent(path, half):
    log = read_log(path)
    train, test = log.rows[half::2], log.rows[1 - half :: 2]
    fit = fit_log(replace(log, rows=tuple(train)))
    for r in test:
        assert fit.time_s(log.collective, r.size, log.ranks) == pytest.approx(measured(r), rel=0.15), r.size


def test_a_log_whose_bus_bandwidth_falls_with_size_is_said_to_hold_two_regimes():
    """The 100 GbE socket log (github.com/NVIDIA/nccl/issues/450): 8-16 MiB at about 6 GB/s of bus bandwidth, 32-128 MiB
    at about 1.3."""
    fit = fit_log(read_log(ISSUE450))
    assert fit.regimes.startswith("two regimes: 8 MiB-16 MiB at ") and "32 MiB-128 MiB at " in fit.regimes
    for path in PREDICTABLE:  # protocol switches raise the bus bandwidth: no second regime
        assert fit_log(read_log(path)).regimes == ""


def test_plan_with_the_fit_gives_the_logs_times_for_the_same_collective_and_sizes():
    """The NCCL backend, given the fit, prices an all-reduce of each logged size on the log's cluster as the log."""
    log = read_log(A3MEGA)
    shapes = shape_key(resolve_shapes("gpt2-small"))
    scenario = Scenario(workers=16, gpus_per_node=8, intra_bits_per_s=3.6e12, up_bps=1.6e12, down_bps=1.6e12)
    backend = NcclBackend(
        shapes, model_shape(shapes), CodecCost(None), fitted=fit_logs([log]), fit_as_measured_bps=scenario.bw_bps
    )
    for r in log.rows:
        if r.size >= 16e6:
            assert backend.collective("all_reduce", r.size, scenario)[0] == pytest.approx(measured(r), rel=0.10)


def test_a_slower_network_than_the_logs_caps_the_fitted_bandwidth():
    log = read_log(A3MEGA)
    shapes = shape_key(resolve_shapes("gpt2-small"))
    backend = NcclBackend(
        shapes, model_shape(shapes), CodecCost(None), fitted=fit_logs([log]), fit_as_measured_bps=1.6e12
    )
    slow = Scenario(workers=16, gpus_per_node=8, intra_bits_per_s=3.6e12, up_bps=10e9, down_bps=10e9)
    as_logged = Scenario(workers=16, gpus_per_node=8, intra_bits_per_s=3.6e12, up_bps=1.6e12, down_bps=1.6e12)
    assert backend.collective("all_reduce", 2**30, slow)[0] > 10 * backend.collective("all_reduce", 2**30, as_logged)[0]


def test_latency_scales_with_the_rings_steps_and_bus_bandwidth_stays():
    fit = fit_log(read_log(A3MEGA))
    seg = fit.segment(2**30)
    at_64 = fit.time_s("all_reduce", 2**30, 64)
    assert at_64 == pytest.approx(seg.latency_s * 126 / 30 + 2**30 * (2 * 63 / 64) / seg.bus_Bps)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("hello\nworld\n", "says nothing of which test"),
        ("# all_reduce_perf\n     8   2   float   sum   -1   1.0  0.0  0.0  0  1.0  0.0  0.0  0\n", "fewer than two"),
        ("# all_reduce_perf\n" + "     8   2   float   sum   -1   nan  0.0  0.0  0  1.0  0.0  0.0  0\n" * 3, "fewer"),
        ("# all_reduce_perf\n" + "     8   2   float   sum   -1   -5  0.0  0.0  0  1.0  0.0  0.0  0\n" * 3, "fewer"),
        (
            "# all_reduce_perf\n"
            + "".join(f" {8 * i}  2  float sum -1 1.0 1.0 3.0 0 1.0 1.0 3.0 0\n" for i in range(1, 9)),
            "rank count",
        ),
    ],
)
def test_what_is_not_nccl_tests_output_is_one_line(text, needle):
    with pytest.raises(NcclTestsError, match=needle) as exc:
        parse_log(text, "x.txt")
    assert "\n" not in str(exc.value)


def test_calibrate_from_nccl_tests_writes_a_fit_plan_takes(capsys, tmp_path):
    out = tmp_path / "fit.json"
    main(["calibrate", "--from-nccl-tests", str(A3MEGA), "--from-nccl-tests", str(ISSUE1435), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "all_reduce: 16 ranks on 2 nodes" in printed and "all_gather: 2 ranks" in printed
    assert "largest residual at 16 MB and above" in printed
    saved = json.loads(out.read_text())
    assert set(saved["collectives"]) == {"all_reduce", "all_gather"}
    main(
        [
            "plan", "--backend", "nccl", "--accelerator", "h100-sxm", "--nccl-calibration", str(out),
            "--shapes", "gpt2-medium", "--nodes", "2", "-G", "8", "-r", "full", "--compute-ms", "100", "--json",
        ]
    )  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    row = doc["rows"][0]
    nbytes = row["exchanges"][0]["bytes_per_step"]
    expected = fit_log(read_log(A3MEGA)).time_s("all_reduce", nbytes, 16)
    assert row["comm_time_s"] == pytest.approx(expected, rel=1e-9)
    assert doc["backend"]["nccl_calibration"] == str(out)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--from-nccl-tests", "{log}"], "--out: name the file"),
        (["--from-nccl-tests", "{missing}", "--out", "{out}"], "--from-nccl-tests"),
        (["--from-nccl-tests", "{log}", "--out", "{out}", "--collective", "broadcast"], "--collective"),
        (["--collective", "all_reduce"], "--collective"),
    ],
)
def test_calibrate_bad_input_is_one_line_exit_2(capsys, tmp_path, args, needle):
    subs = {"log": str(A3MEGA), "missing": str(tmp_path / "none.txt"), "out": str(tmp_path / "o.json")}
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", *[a.format(**subs) for a in args]])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
