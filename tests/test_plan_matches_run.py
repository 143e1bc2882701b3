"""`plan` and `run` take the network and replicator options with one meaning: for the same options, plan's step
is the step the model predicts for the run those options configure (the same function, no training)."""

from __future__ import annotations

import json

import pytest

from netbench.cli import cluster_options as copt
from netbench.cli.app import app, main
from netbench.cli.run_config import build_run_config
from netbench.declarations.config import ReplicatorConfig
from netbench.model.calibration import Calibration
from netbench.model.overlap import pipelined
from netbench.orchestrator.prediction import model_step, predict, workload_shapes
from netbench.workloads.config import WorkloadConfig

SHAPES = "gpt2-small:blocks=2"  # plan's default shapes
TCP = ("--tcp-cc", "cubic", "--tcp-wmem-max", str(64 << 20))  # what a run's nodes get by default, said for both


@pytest.fixture(autouse=True)
def _no_user_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "absent.json"))


def planned(capsys, *args: str) -> dict:
    main(["plan", *args, *TCP, "--json"])
    return json.loads(capsys.readouterr().out)


def run_config(tmp_path, replicator: str, nodes: int, bw: str, delay: str, **kw):
    """The RunConfig `netbench run` builds from these options (its own builders, so its own meanings)."""
    cluster = copt.cluster_spec({"nodes": nodes, "bw": bw, "delay": delay, "tcp_cc": "cubic", "tcp_wmem_max": 64 << 20})
    return build_run_config(
        cluster=cluster,
        replicator=ReplicatorConfig(name=replicator),
        workload=WorkloadConfig(kind="shapes", shapes=SHAPES, compute_ms=0.0),
        out_dir=tmp_path / "runs",
        auto_bucket=True,
        **kw,
    )


@pytest.mark.parametrize("delay", ["0ms", "20ms", "150ms"])
@pytest.mark.parametrize("replicator", ["dct", "full"])
def test_plan_predicts_the_step_the_model_predicts_for_the_run(tmp_path, capsys, replicator, delay) -> None:
    row = planned(capsys, "-r", replicator, "--nodes", "4", "--bw", "100mbit", "--delay", delay)["rows"][0]
    config = run_config(tmp_path, replicator, 4, "100mbit", delay)
    shapes = workload_shapes(config.workload, 4)
    est = pipelined(model_step(config, shapes, 0.0, Calibration()).step, config.replicator, shapes)
    assert row["nodes"] == 4
    assert row["step_time_s"] == pytest.approx(est.step_time_s, rel=1e-9)
    assert row["intra_time_s"] == pytest.approx(est.intra_time_s, rel=1e-9)  # the node's link, shared by its 4
    assert row["comm_time_s"] == pytest.approx(est.comm_time_s, rel=0.01)  # the run's view: its workers' own slices


def test_delay_is_one_way_between_two_nodes_in_both(tmp_path, capsys) -> None:
    """On the star --delay is each uplink's, so the model's one-way delay between two nodes is --delay itself."""
    config = run_config(tmp_path, "full", 2, "1gbit", "20ms")
    assert config.cluster.one_way_delay_s() == pytest.approx(0.02)
    slow = planned(capsys, "-r", "full", "--nodes", "2", "--bw", "1gbit", "--delay", "20ms")["rows"][0]
    fast = planned(capsys, "-r", "full", "--nodes", "2", "--bw", "1gbit", "--delay", "0ms")["rows"][0]
    shapes = workload_shapes(config.workload, 2)
    est = pipelined(model_step(config, shapes, 0.0, Calibration()).step, config.replicator, shapes)
    assert slow["step_time_s"] == pytest.approx(est.step_time_s, rel=1e-9) and slow["step_time_s"] > fast["step_time_s"]


def test_nodes_count_machines_of_gpus_per_node_workers(tmp_path, capsys) -> None:
    """`plan --nodes 2 --gpus-per-node 4` plans two machines of four workers, 8 ranks, as `run` builds them; the
    node's --intra-bw is shared by its workers in both."""
    row = planned(
        capsys, "-r", "dct", "--nodes", "2", "--gpus-per-node", "4", "--intra-bw", "800gbit", "--bw", "1gbit"
    )["rows"][0]
    assert (row["nodes"], row["machines"], row["gpus_per_node"]) == (8, 2, 4)
    config = run_config(tmp_path, "dct", 2, "1gbit", "0ms", gpus_per_node=4, intra_bw_bps=800e9)
    assert config.cluster.nodes * config.gpus_per_node == 8
    shapes = workload_shapes(config.workload, 2)
    est = predict(config, shapes, 0.0, Calibration(), cpus=1024)  # cores enough that no codec is slowed
    assert row["intra_time_s"] == pytest.approx(est.intra_time_s, rel=1e-9)  # the node's link, shared by its 4
    assert row["comm_time_s"] == pytest.approx(est.comm_time_s, rel=0.01)  # the run's view: its workers' own slices


def test_plan_takes_run_s_network_options_from_the_same_declarations() -> None:
    import typer.main
    from rich.markup import escape

    commands = dict(typer.main.get_command(app).commands)
    for name in ("--nodes", "--bw", "--up", "--down", "--delay", "--topology", "--sites", "--racks", "--rank-order"):
        run, plan = ([p for p in commands[c].params if name in p.opts] for c in ("run", "plan"))
        assert run and plan, name
        assert run[0].opts == plan[0].opts, name  # the same short flags
        shared = escape(next(s for t in copt.CLUSTER_SETTINGS for s in t.values() if s.name == name).help_for())
        assert run[0].help.startswith(shared.removesuffix(".")), name
        assert plan[0].help.startswith(shared.removesuffix(".")), name
    for name in ("--replicator", "--gpus-per-node", "--intra-bw"):
        run, plan = ([p for p in commands[c].params if name in p.opts] for c in ("run", "plan"))
        assert run[0].opts == plan[0].opts, name
