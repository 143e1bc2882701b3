"""The nodes' TCP settings: validated before anything is built, applied per namespace, recorded in run.json,
and the same settings the model predicts with (plan assumes stock Linux and says so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pydantic
import pytest
from test_bad_input import rejected

from netbench.emulation.spec import ClusterSpec
from netbench.emulation.tcpsettings import (
    TcpOptions,
    available_congestion_controls,
    check_tcp_options,
    expected_tcp_settings,
)
from netbench.model.calibration import Calibration
from netbench.model.network import GraphModel
from netbench.model.schemes import SchemeSettings, build_scheme
from netbench.model.steptime import Scenario
from netbench.orchestrator.prediction import scenario_for
from netbench.shapes import resolve_shapes
from netbench.tcp import STOCK_LINUX, TcpSettings

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
SHAPES = "llama:d_model=64,layers=1,ffn=128,vocab=64"


def spec(**tcp) -> ClusterSpec:
    return ClusterSpec(nodes=2, up={"rate_bps": 1e9, "delay_s": 0.05}, down={"rate_bps": 1e9}, tcp=tcp)


def test_unknown_congestion_control_is_refused():
    assert "available" in check_tcp_options(TcpOptions(cc="nosuch"))
    assert check_tcp_options(TcpOptions(cc=available_congestion_controls()[0])) is None
    with pytest.raises(pydantic.ValidationError):
        TcpOptions(wmem_max=1000)


@pytest.mark.parametrize(
    "argv, option",
    [
        (["run", "--tcp-cc", "nosuch"], "--tcp-cc"),
        (["run", "--tcp-wmem-max", "1000"], "--tcp-wmem-max"),
        (["probe", "--tcp-cc", "nosuch"], "--tcp-cc"),
        (["plan", "--tcp-cc", "vegas"], "--tcp-cc"),
        (["plan", "--tcp-wmem-max", "5"], "--tcp-wmem-max"),
        (["sweep", "--tcp-cc", "nosuch", "--dry-run", "--out", "{tmp}/s"], "--tcp-cc"),
    ],
)
def test_bad_tcp_option_is_one_line_exit_2(argv, option, tmp_path: Path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "out")]
    assert option in rejected(argv, capsys)
    assert not (tmp_path / "out").exists()


def test_expected_settings_follow_the_options():
    chosen = expected_tcp_settings(TcpOptions(cc="cubic", wmem_max=8 << 20, slow_start_after_idle=False))
    assert (chosen.cc, chosen.tcp_wmem_max, chosen.tcp_rmem_max, chosen.slow_start_after_idle) == (
        "cubic",
        8 << 20,
        8 << 20,
        False,
    )
    inherited = expected_tcp_settings(TcpOptions())
    assert inherited.cc == Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    assert inherited.tcp_wmem_max == 64 << 20 and inherited.slow_start_after_idle


def test_plan_and_run_predict_with_one_model():
    # The same link, workload and TCP settings give the same step whether the scenario came from
    # `plan`'s options or from a run's cluster (scenario_for): one function path, one set of terms.
    shapes = resolve_shapes("gpt2-small:blocks=2")
    calib = Calibration(software_overhead_s=1e-4)
    scheme = build_scheme("full", SchemeSettings())
    cluster = spec(cc="cubic", wmem_max=8 << 20, slow_start_after_idle=False)
    from_run = scenario_for(cluster, 0.05, calib)
    from_plan = Scenario(
        workers=2, up_bps=1e9, down_bps=1e9, delay_s=0.05, compute_s=0.05, tcp=from_run.tcp, framing=from_run.framing
    )
    run_step, plan_step = (
        GraphModel.star_step(scheme, shapes, from_run, calib),
        GraphModel.star_step(scheme, shapes, from_plan, calib),
    )
    assert run_step.comm_time_s == plan_step.comm_time_s and run_step.wire.tx == plan_step.wire.tx

    # and the TCP settings matter there: bbr's pacing and a 1 MiB buffer (a window below gloo's two 1 MiB segments) each
    # slow it
    def with_tcp(**update):
        return GraphModel.star_step(
            scheme, shapes, from_plan.model_copy(update={"tcp": from_run.tcp.model_copy(update=update)}), calib
        ).comm_time_s

    assert with_tcp(cc="bbr") > plan_step.comm_time_s
    assert with_tcp(tcp_wmem_max=1 << 20, tcp_rmem_max=1 << 20) > plan_step.comm_time_s
    assert STOCK_LINUX.cc == "cubic" and STOCK_LINUX.slow_start_after_idle


def test_plan_states_its_tcp_assumptions():
    out = subprocess.run(
        ["netbench", "plan", "--bw", "1gbit", "--delay", "50ms", "--replicator", "full"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "TCP assumed: cubic" in out and "stock Linux" in out
    doc = json.loads(
        subprocess.run(
            [
                "netbench",
                "plan",
                "--bw",
                "1gbit",
                "--delay",
                "50ms",
                "--replicator",
                "full",
                "--json",
                "--tcp-cc",
                "bbr",
                "--no-slow-start-after-idle",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert doc["tcp"]["cc"] == "bbr" and doc["tcp"]["slow_start_after_idle"] is False


@ROOT
@pytest.mark.netns
def test_cluster_applies_and_reads_back_its_tcp_settings():
    from netbench.emulation.cluster import Cluster

    wanted = spec(cc="cubic", wmem_max=8 << 20, slow_start_after_idle=False)
    with Cluster(wanted) as cluster:
        got = cluster.describe()["tcp"]
        server = cluster.nodes[1].popen(
            [
                sys.executable,
                "-c",
                (
                    "import socket,time; s=socket.socket(); s.bind(('', 5201)); s.listen(); c,_=s.accept(); "
                    "time.sleep(3)"
                ),
            ]
        )
        time.sleep(0.5)
        client = cluster.nodes[0].popen(
            [
                sys.executable,
                "-c",
                (
                    f"import socket,time; c=socket.create_connection(('{cluster.nodes[1].address}', 5201)); "
                    "c.send(b'x'); time.sleep(2)"
                ),
            ]
        )
        time.sleep(1.0)
        ss = cluster.nodes[0].run(["ss", "-tni", "state", "established"]).stdout
        client.wait(timeout=10)
        server.wait(timeout=10)
        cluster.down()
    assert got == expected_tcp_settings(wanted.tcp).model_dump()
    assert (got["cc"], got["tcp_wmem_max"], got["slow_start_after_idle"]) == ("cubic", 8 << 20, False)
    assert " cubic " in ss, ss  # the connection between two nodes really runs cubic (route metric)


@ROOT
@pytest.mark.netns
def test_run_json_records_the_nodes_tcp_settings(tmp_path: Path):
    out = subprocess.run(
        [
            "netbench",
            "run",
            "--nodes",
            "2",
            "--bw",
            "100mbit",
            "--delay",
            "5ms",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--workload",
            "shapes",
            "--shapes",
            SHAPES,
            "--compute-ms",
            "5",
            "--no-capture",
            "--tcp-cc",
            "reno",
            "--tcp-wmem-max",
            "1048576",
            "--no-slow-start-after-idle",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    run_json = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    tcp = run_json["cluster"]["tcp"]
    assert (tcp["cc"], tcp["tcp_wmem_max"], tcp["tcp_rmem_max"], tcp["slow_start_after_idle"]) == (
        "reno",
        1048576,
        1048576,
        False,
    )
    assert run_json["cluster"]["spec"]["tcp"] == {"cc": "reno", "wmem_max": 1048576, "slow_start_after_idle": False}


def test_how_a_run_met_the_kernels_timers_is_no_node_setting():
    # the run's dilation and age are the run's (KernelClock), not what a namespace holds
    for field in ("timer_scale", "expiries_per_window"):
        with pytest.raises(pydantic.ValidationError):
            TcpSettings(cc="bbr", **{field: 0.5})
