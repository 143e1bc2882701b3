"""`netbench sweep`: scenario validation (one line, exit 2), grid expansion, and resuming (real runs need root)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netbench.orchestrator.sweep.scenario import ScenarioError, load_scenario, points, scenario_from_dict
from netbench.orchestrator.sweep.sweep import done_keys, read_summary, run_sweep

REPO = Path(__file__).resolve().parent.parent
TINY = {"kind": "shapes", "shapes": "llama:d_model=32,layers=1,ffn=64,vocab=64", "compute_ms": 5}


@pytest.fixture
def cli(capsys):
    """Run the CLI in this process (no torch import per call); returns (exit code, stdout, stderr)."""
    from netbench.cli.app import main

    def call(*args: str) -> subprocess.CompletedProcess:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    return call


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "toml, expected",
    [
        ('[grid]\nbw = ["10mbit", "fast"]\n', "grid.bw[1]: cannot read rate"),
        ('[grid]\nreplicator = ["full", "zip"]\n', "grid.replicator: unknown replicator 'zip'"),
        ('[grid]\ndelay = ["5parsecs"]\n', "grid.delay[0]: unknown time unit"),
        ('[grid]\nbw = ["100gbit"]\n', "grid.bw: must be between 10mbit and 10gbit"),
        ("[grid]\nnodes = [1]\n", "grid.nodes: must be between 2 and 64"),
        ("stepz = 3\n", "stepz: Extra inputs are not permitted"),
        ("[replicator]\ntopk = 0\n", "replicator.topk:"),
        ('[workload]\nkind = "shapes"\nshapes = "nope"\n', "workload: unknown shapes preset (choose from"),
        ("steps = [\n", "invalid TOML"),
        ('[grid]\nshard = ["none", "zero2"]\n', "grid.shard[1]: choose none, zero3, hsdp, fsdp, got 'zero2'"),
        ('[grid]\nshard = "fsdp"\nreplicator = "dct"\nnodes = 4\n', "--shard zero3: nothing is replicated"),
        ('[grid]\nshard = "fsdp"\nreplicator = "full"\nnodes = 2\ngpus_per_node = 2\n', "(--gpus-per-node 1, not 2)"),
    ],
)
def test_bad_scenario_is_one_line_exit_2(cli, tmp_path, toml: str, expected: str) -> None:
    path = write(tmp_path, toml)
    done = cli("sweep", str(path), "--dry-run")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netbench: error: {path}: ") and expected in lines[0], lines


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--bw", "10mbit,fast"], "--bw: cannot read rate 'fast'"),
        (["--replicator", "full,zip"], "--replicator: unknown replicator 'zip'"),
        (["--nodes", "2,x"], "--nodes: "),
        (["--delay", "1lightyear"], "--delay: unknown time unit"),
        (["--replicator", "lowrank", "--rank", "2.5"], "--rank: must be an integer >= 1 or a fraction below 1"),
        (["--replicator", "mtdao", "--m2-every", "0"], "--m2-every: "),
        (["--shard", "none,zero2"], "--shard: choose none, zero3, hsdp, fsdp, got 'zero2'"),
    ],
)
def test_bad_option_names_the_option(cli, args: list[str], expected: str) -> None:
    done = cli("sweep", *args, "--dry-run")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netbench: error: {expected}"), lines


def test_options_override_the_file_and_expand_the_grid(cli, tmp_path) -> None:
    path = write(tmp_path, 'steps = 3\n[grid]\nbw = ["10mbit"]\nreplicator = ["full"]\n')
    done = cli("sweep", str(path), "--bw", "10mbit,1gbit", "--nodes", "2,4", "--dry-run")
    assert done.returncode == 0, done.stderr
    labels = [line.split(None, 1)[1] for line in done.stdout.splitlines()]
    assert labels == ["full 2n 10mbit 0ms", "full 2n 1gbit 0ms", "full 4n 10mbit 0ms", "full 4n 1gbit 0ms"]


def test_the_weights_sharding_is_an_axis_of_the_scenario_and_the_command(cli, tmp_path) -> None:
    """``shard`` in a scenario's grid and ``--shard`` on the command line expand to one point per value (fsdp is
    zero3), each a run of its own sharding with a label and key of its own."""
    scenario = scenario_from_dict(
        {"workload": {"kind": "mlp"}, "grid": {"replicator": "full", "nodes": 4, "shard": ["none", "fsdp", "zero3"]}}
    )
    plan = points(scenario, tmp_path)
    assert [p.config.shard for p in plan] == ["none", "zero3"]
    assert [p.label for p in plan] == ["full 4n 100mbit 0ms", "full 4n zero3 100mbit 0ms"]
    assert [p.variant for p in plan] == ["", "zero3"] and len({p.key for p in plan}) == 2
    path = write(tmp_path, '[workload]\nkind = "mlp"\n[grid]\nreplicator = "full"\nnodes = 4\n')
    done = cli("sweep", str(path), "--shard", "none,fsdp", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert [line.split(None, 1)[1] for line in done.stdout.splitlines()] == [p.label for p in plan]


def test_ci_scenario_is_valid_and_sized() -> None:
    scenario = load_scenario(REPO / "scenarios" / "ci.toml")
    plan = points(scenario, Path("/tmp"))
    assert len(plan) == 20 and len({p.key for p in plan}) == 20  # 18 without delay, 2 at 100mbit + 20 ms
    assert {p.config.replicator.name for p in plan} == {"full", "dct", "random"}
    assert sum(p.config.cluster.up.delay_s > 0 for p in plan) == 2
    assert scenario.calibrate and scenario.workload.kind == "shapes"


def test_sparse_grid_is_the_union_of_its_products() -> None:
    scenario = scenario_from_dict(
        {
            "grid": {"replicator": ["full"], "nodes": [2]},
            "more": [
                {"replicator": ["full", "dct"], "nodes": [2, 4], "delay": ["20ms"]},
                {"replicator": ["full"], "nodes": [2]},
            ],
        }
    )  # a repeat of grid: counted once
    labels = [p.label for p in points(scenario, Path("/tmp"))]
    assert labels == [
        "full 2n 100mbit 0ms",
        "full 2n 100mbit 20ms",
        "dct 2n 100mbit 20ms",
        "full 4n 100mbit 20ms",
        "dct 4n 100mbit 20ms",
    ]
    fidelity = points(load_scenario(REPO / "scenarios" / "fidelity.toml"), Path("/tmp"))
    names = {p.config.replicator.name for p in fidelity}
    assert names == {"full", "dct", "random", "striding", "diloco", "lowrank", "mtdao"}
    assert {p.config.cluster.nodes for p in fidelity} == {2, 4, 8} and len(fidelity) < 60
    rates = {p.config.cluster.up.rate_bps for p in fidelity}
    delays = {p.config.cluster.up.delay_s for p in fidelity}
    assert min(rates) == 10e6 and max(rates) == 10e9 and min(delays) == 0 and max(delays) == pytest.approx(0.1)


def test_scenario_tcp_settings_reach_every_point() -> None:
    scenario = scenario_from_dict({"tcp": {"cc": "reno", "slow_start_after_idle": False}})
    assert all(
        p.config.cluster.tcp.cc == "reno" and p.config.cluster.tcp.slow_start_after_idle is False
        for p in points(scenario, Path("/tmp"))
    )


def test_a_scenario_setting_under_its_former_name_reaches_each_replicator_as_its_own_field() -> None:
    """``beta`` named DeMo's momentum decay and MT-DAO's beta1 alike: each point reads it as its replicator's."""
    scenario = scenario_from_dict(
        {"grid": {"replicator": ["dct", "mtdao", "full"]}, "replicator": {"beta": 0.9}, "steps": 3}
    )
    read = {p.config.replicator.name: p.config.replicator for p in points(scenario, Path("/tmp"))}
    assert (read["dct"].momentum_decay, read["dct"].beta1) == (0.9, 0.999)
    assert (read["mtdao"].momentum_decay, read["mtdao"].beta1) == (0.999, 0.9)
    assert (read["full"].momentum_decay, read["full"].beta1) == (0.999, 0.999)


def test_point_key_changes_with_what_runs() -> None:
    a = points(scenario_from_dict({"grid": {"replicator": ["full"]}, "steps": 3}), Path("/tmp"))[0]
    b = points(scenario_from_dict({"grid": {"replicator": ["full"]}, "steps": 4}), Path("/tmp"))[0]
    c = points(scenario_from_dict({"grid": {"replicator": ["full"]}, "steps": 3}), Path("/elsewhere"))[0]
    assert a.key != b.key and a.key == c.key  # results' location is not part of a point's identity


def test_done_means_ok_and_still_on_disk(tmp_path) -> None:
    kept = tmp_path / "runs" / "a"
    kept.mkdir(parents=True)
    (kept / "run.json").write_text("{}")
    frame = pd.DataFrame(
        [
            {"key": "a", "status": "ok", "run_dir": "runs/a"},
            {"key": "b", "status": "failed", "run_dir": "runs/a"},
            {"key": "c", "status": "ok", "run_dir": "runs/gone"},
        ]
    )
    assert done_keys(frame, tmp_path) == {"a"}


def test_scenario_error_is_a_value_error() -> None:
    with pytest.raises(ScenarioError, match=r"^x.toml: steps: "):
        scenario_from_dict({"steps": 0}, "x.toml")


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_resume_runs_only_missing_points(tmp_path) -> None:
    """An interrupted sweep (here: one of two points done) re-runs only the other; a third run does nothing.

    Each point's prediction is the one its run stored in run.json, made with the sweep's calibration.
    """
    from netbench.calibrate.hostcache import HostCalibration
    from netbench.model.calibration import Calibration

    calib = Calibration(
        source="measured",
        encode_s_per_param={"dct": 2e-7, "random": 1e-7},
        decode_s_per_param={"dct": 1e-7, "random": 0.0},
    )
    given = HostCalibration(calib, tmp_path / "given.json", False, "file")
    scenario = scenario_from_dict(
        {
            "grid": {"bw": ["100mbit"], "replicator": ["dct", "random"]},
            "steps": 2,
            "warmup": 1,
            "capture": False,
            "workload": TINY,
        }
    )
    plan = points(scenario, tmp_path / "runs")
    first = run_sweep(plan[:1], tmp_path, given)  # the sweep "interrupted" after one point
    assert (first.ran, first.skipped) == (1, 0)
    second = run_sweep(plan, tmp_path, given)
    assert (second.ran, second.skipped) == (1, 1) and not second.failed
    third = run_sweep(plan, tmp_path, given)
    assert (third.ran, third.skipped) == (0, 2)
    summary = read_summary(tmp_path)
    assert list(summary["key"]) == [p.key for p in plan] and set(summary["status"]) == {"ok"}
    assert summary["pred_step_time_s"].notna().all()
    for row in summary.itertuples():
        stored = json.loads((tmp_path / row.run_dir / "run.json").read_text())["summary"]["predicted"]
        assert stored["calibration"]["digest"] == calib.digest() and stored["calibration"]["path"] == str(
            tmp_path / "given.json"
        )
        assert row.pred_step_time_s == pytest.approx(
            stored["step_time_s"]
        ) and row.pred_compress_time_s == pytest.approx(stored["compress_time_s"])
        assert row.pred_compress_time_s > 0 and isinstance(row.fidelity_ok, (bool, np.bool_))


def test_a_points_results_are_written_before_the_next_points_steps_begin(tmp_path) -> None:
    """Points on one cluster: each point's run directory is written while the next one starts its workers, and
    complete (run.json, trace.json) before that point's first step; every row is in summary.csv."""
    from netbench.calibrate.hostcache import HostCalibration
    from netbench.model.calibration import Calibration

    given = HostCalibration(Calibration(source="measured"), tmp_path / "given.json", False, "file")
    scenario = scenario_from_dict(
        {
            "grid": {"bw": ["100mbit", "1gbit", "50mbit"], "replicator": ["full"]},
            "steps": 2,
            "warmup": 1,
            "capture": False,
            "workload": TINY,
        }
    )
    plan = points(scenario, tmp_path / "runs")
    outcome = run_sweep(plan, tmp_path, given, fresh=True)
    assert (outcome.ran, outcome.failed) == (3, [])
    summary = read_summary(tmp_path)
    assert list(summary["key"]) == [p.key for p in plan] and set(summary["status"]) == {"ok"}
    runs = [tmp_path / run_dir for run_dir in summary["run_dir"]]
    for earlier, later in zip(runs, runs[1:]):
        first_step = pd.read_csv(later / "steps.csv")["t_start"].min()
        written = max((earlier / name).stat().st_mtime for name in ("run.json", "trace.json", "steps.csv"))
        assert written < first_step


# ------------------------------------------------------------------------------------------- topologies

TWO_SITES = """[[sites]]
name = "east"
nodes = 2
lan_bw = "1gbit"
[[sites]]
name = "west"
nodes = 2
lan_bw = "1gbit"
[[wan]]
between = ["east", "west"]
bw = "50mbit"
delay = "10ms"
"""


def test_topology_axes_name_every_point_and_leave_out_what_a_topology_does_not_take() -> None:
    scenario = scenario_from_dict(
        {
            "grid": {
                "replicator": "full",
                "nodes": 4,
                "bw": "1gbit",
                "topology": ["star", "sites", "racks"],
                "wan_bw": ["10mbit", "100mbit"],
                "wan_delay": ["5ms"],
                "oversubscription": 4,
                "rank_order": ["topology", "interleaved"],
            }
        }
    )
    plan = points(scenario, Path("/tmp"))
    labels = [p.label for p in plan]
    assert labels == [
        "full 4n 1gbit 0ms",  # the star takes neither the WAN axes nor an interleaving (its nodes are alike)
        "full 4n 1gbit 0ms sites2 wan 10mbit 5ms",
        "full 4n 1gbit 0ms sites2 wan 10mbit 5ms ranks interleaved",
        "full 4n 1gbit 0ms sites2 wan 100mbit 5ms",
        "full 4n 1gbit 0ms sites2 wan 100mbit 5ms ranks interleaved",
        "full 4n 1gbit 0ms racks2 4:1",
        "full 4n 1gbit 0ms racks2 4:1 ranks interleaved",
    ]
    assert len({p.key for p in plan}) == len(plan)
    sites = plan[1].config.cluster
    assert sites.topology.kind == "sites" and {t.forward.rate_bps for t in sites.topology.trunks} == {10e6}
    assert plan[2].config.cluster.placement == (0, 2, 1, 3)
    racks = plan[5].config.cluster.topology
    assert {t.forward.rate_bps for t in racks.trunks} == {0.5e9}  # 2 nodes x 1gbit / 4
    assert (plan[1].topology, plan[1].wan_bw, plan[1].wan_delay, plan[2].rank_order) == (
        "sites",
        "10mbit",
        "5ms",
        "interleaved",
    )


def test_explicit_points_take_grids_axes_and_files_beside_the_scenario(tmp_path) -> None:
    (tmp_path / "topologies").mkdir()
    (tmp_path / "topologies" / "two.toml").write_text(TWO_SITES)
    path = write(
        tmp_path,
        'steps = 3\n[grid]\nreplicator = ["full", "dct"]\nnodes = [4]\n'
        '[[points]]\ntopology = "topologies/two.toml"\nrank_order = "0,2,1,3"\n'
        '[[points]]\ntopology = "sites"\nsites = 2\nwan_bw = "20mbit"\nreplicator = "diloco"\n',
    )
    plan = points(load_scenario(path), Path("/tmp"))
    assert [p.label for p in plan] == [
        "full 4n 100mbit 0ms",
        "dct 4n 100mbit 0ms",
        "full 4n 100mbit 0ms two ranks 0,2,1,3",
        "dct 4n 100mbit 0ms two ranks 0,2,1,3",
        "diloco 4n 100mbit 0ms sites2 wan 20mbit 0ms",
    ]
    on_file = plan[2].config.cluster
    assert on_file.topology.kind == "file" and on_file.placement == (0, 2, 1, 3) and plan[2].topology == "two"


@pytest.mark.parametrize(
    "toml, expected",
    [
        ('[grid]\ntopology = "sites"\nnodes = 3\n', "grid.sites: 3 nodes do not divide into 2 equal sites"),
        ('[grid]\ntopology = "sites"\nwan_bw = ["1gbit", "warp"]\n', "grid.wan_bw[1]: cannot read rate"),
        ('[grid]\ntopology = "sites"\nwan_delay = "1parsec"\n', "grid.wan_delay[0]: unknown time unit"),
        (
            '[grid]\ntopology = "racks"\noversubscription = 0.5\n',
            "grid.oversubscription[0]: must be between 1 and 1000",
        ),
        ('[grid]\nrank_order = "sideways"\n', "grid.rank_order[0]: expected topology or interleaved"),
        ('[grid]\nrank_order = "0,0"\n', "grid.rank_order: must list every node 0-1 once"),
        ('[grid]\ntopology = "nowhere.toml"\n', "grid.topology: "),
        ('[[points]]\nwan_bw = "fast"\n', "points[0].wan_bw[0]: cannot read rate"),
        (
            '[[points]]\ntopology = "sites"\nsites = 3\nnodes = 4\n',
            "points[0].sites: 4 nodes do not divide into 3 equal sites",
        ),
        ('[[points]]\ncolour = "red"\n', "points[0].colour: Extra inputs are not permitted"),
    ],
)
def test_bad_topology_axis_is_one_line_naming_the_field(cli, tmp_path, toml: str, expected: str) -> None:
    path = write(tmp_path, toml)
    done = cli("sweep", str(path), "--dry-run")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netbench: error: {path}: ") and expected in lines[0], lines


def test_topology_options_expand_the_grid_and_name_themselves(cli) -> None:
    done = cli(
        "sweep",
        "--replicator",
        "full",
        "--nodes",
        "4",
        "--topology",
        "sites",
        "--wan-bw",
        "10mbit,1gbit",
        "--wan-delay",
        "20ms",
        "--rank-order",
        "topology,interleaved",
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    labels = [line.split(None, 1)[1] for line in done.stdout.splitlines()]
    assert labels == [
        "full 4n 100mbit 0ms sites2 wan 10mbit 20ms",
        "full 4n 100mbit 0ms sites2 wan 10mbit 20ms ranks interleaved",
        "full 4n 100mbit 0ms sites2 wan 1gbit 20ms",
        "full 4n 100mbit 0ms sites2 wan 1gbit 20ms ranks interleaved",
    ]
    bad = cli("sweep", "--topology", "sites", "--sites", "3", "--nodes", "4", "--dry-run")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "netbench: error: --sites: 4 nodes do not divide into 3 equal sites (--nodes must be a multiple of --sites)"
    ]
    one_order = cli(
        "sweep", "--nodes", "4", "--topology", "sites", "--rank-order", "0,2,1,3", "--replicator", "full", "--dry-run"
    )
    assert one_order.returncode == 0 and one_order.stdout.count("\n") == 1 and "ranks 0,2,1,3" in one_order.stdout


def test_topology_scenario_is_valid_and_sized() -> None:
    scenario = load_scenario(REPO / "scenarios" / "topology.toml")
    plan = points(scenario, Path("/tmp"))
    kinds = {p.config.cluster.topology.kind if p.config.cluster.topology else "star" for p in plan}
    assert kinds == {"star", "sites", "racks", "file"}
    assert {p.config.replicator.name for p in plan} == {"full", "dct", "random", "diloco"}
    assert {p.config.cluster.nodes for p in plan} <= set(range(4, 9))
    assert {p.rank_order for p in plan} >= {"topology", "interleaved"}
    assert any(n.compute_scale == 2 for p in plan for n in p.config.cluster.topology.nodes)
    assert len({p.label for p in plan}) == len(plan) and len(plan) <= 16
