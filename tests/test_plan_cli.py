"""``netbench plan``: JSON fields, derived answers that hold, and one-line errors with exit 2."""

import json
import subprocess
import sys

import pytest

from netbench.cli.app import main
from netbench.model.calibration import Calibration, save_calibration

EVERY_STEP = ("--params-every", "1", "--m1-every", "1", "--m2-every", "1")  # mtdao: three dense all-reduces a step
ROW_FIELDS = {
    "payload_bytes_per_step",
    "wire_bytes_per_step",
    "comm_time_s",
    "step_time_s",
    "comm_fraction",
    "compression_time_s",
    "framing_bytes_per_step",
    "replicator",
    "nodes",
}


@pytest.fixture(autouse=True)
def _no_user_calibration(tmp_path, monkeypatch):
    """Never read the developer's own calibration file."""
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "absent.json"))


def plan_json(capsys, *args: str) -> dict:
    main(["plan", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def plan_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("netbench: error:") and "\n" not in err
    return err


def test_json_rows_and_fields(capsys):
    doc = plan_json(capsys, "--replicator", "lowrank,mtdao", "--nodes", "2,8", "--bw", "1gbit", "--compute-ms", "50")
    assert doc["calibration"]["source"] == "defaults"
    assert [(r["replicator"], r["nodes"]) for r in doc["rows"]] == [
        ("lowrank", 2),
        ("lowrank", 8),
        ("mtdao", 2),
        ("mtdao", 8),
    ]
    for r in doc["rows"]:
        assert ROW_FIELDS <= r.keys()
        assert r["wire_bytes_per_step"]["tx"] > r["payload_bytes_per_step"] * 0  # present and numeric
        assert r["step_time_s"] == pytest.approx(r["compute_time_s"] + r["compression_time_s"] + r["comm_time_s"])
        assert 0 < r["comm_fraction"] < 1
    assert {"comm_equals_compute_bw", "doubling_nodes", "crossover_bw"} <= doc["derived"].keys()


def test_wire_exceeds_payload_by_framing(capsys):
    doc = plan_json(capsys, "--replicator", "mtdao", "--nodes", "4", *EVERY_STEP)
    r = doc["rows"][0]
    sent = r["payload_wire_bytes_per_step"]["tx"]
    assert sent == pytest.approx(2 * 3 / 4 * r["payload_bytes_per_step"])
    assert r["wire_bytes_per_step"]["tx"] == pytest.approx(sent + r["framing_bytes_per_step"]["tx"])
    assert 0.93 < r["wire_efficiency"] < 1448 / 1514


def test_reported_comm_equals_compute_bandwidth_holds(capsys):
    doc = plan_json(capsys, "--replicator", "mtdao", "--nodes", "4", "--compute-ms", "80", "--delay", "1ms")
    ans = doc["derived"]["comm_equals_compute_bw"][0]
    assert ans["reason"] is None
    bw = f"{ans['bw_bps']:.10g}bit"
    again = plan_json(
        capsys, "--replicator", "mtdao", "--nodes", "4", "--compute-ms", "80", "--delay", "1ms", "--bw", bw
    )
    assert again["rows"][0]["comm_time_s"] == pytest.approx(0.080, rel=1e-5)


def test_reported_crossover_holds(capsys, tmp_path, monkeypatch):
    calib = tmp_path / "calib.json"
    save_calibration(Calibration(source="measured", encode_s_per_param={"lowrank": 5e-8, "mtdao": 0.0}), calib)
    args = (
        "--replicator",
        "lowrank,mtdao",
        *EVERY_STEP,
        "--nodes",
        "4",
        "--compute-ms",
        "10",
        "--calibration",
        str(calib),
    )
    doc = plan_json(capsys, *args)
    cross = doc["derived"]["crossover_bw"][0]["crossovers"]
    assert len(cross) == 1 and cross[0]["faster_below"] == "lowrank"
    at = plan_json(capsys, *args, "--bw", f"{cross[0]['bw_bps']:.12g}bit")["rows"]
    assert at[0]["step_time_s"] == pytest.approx(at[1]["step_time_s"], rel=1e-6)
    assert at[0]["compression_calibrated"] is True


def test_doubling_answer_holds(capsys):
    doc = plan_json(
        capsys,
        "--replicator",
        "mtdao",
        *EVERY_STEP,
        "--nodes",
        "2",
        "--delay",
        "2ms",
        "--bw",
        "10gbit",
        "--compute-ms",
        "20",
    )
    ans = doc["derived"]["doubling_nodes"][0]
    n = ans["nodes"]
    rows = plan_json(
        capsys,
        "--replicator",
        "mtdao",
        *EVERY_STEP,
        "--nodes",
        f"{n - 1},{n}",
        "--delay",
        "2ms",
        "--bw",
        "10gbit",
        "--compute-ms",
        "20",
    )["rows"]
    assert rows[0]["step_time_s"] < 2 * ans["baseline_step_time_s"] <= rows[1]["step_time_s"]


def test_params_and_hierarchy_and_asymmetry(capsys):
    doc = plan_json(
        capsys,
        "--params",
        "1.5e9",
        "--replicator",
        "lowrank",
        "--nodes",
        "8",
        "--gpus-per-node",
        "8",
        "--intra-bw",
        "3200gbit",
        "--up",
        "1gbit",
        "--down",
        "10gbit",
    )
    r = doc["rows"][0]
    assert doc["params"] == 1_500_000_000
    assert (r["machines"], r["gpus_per_node"], r["up_bps"], r["down_bps"]) == (8, 8, 1e9, 1e10)
    assert r["intra_time_s"] > 0


def test_table_output(capsys):
    main(["plan", "--replicator", "lowrank", "--nodes", "2,4", "--compute-ms", "10"])
    out = capsys.readouterr().out
    assert (
        "lowrank" in out
        and "comm %" in out
        and "model constants: defaults" in out
        and "encode/decode of lowrank taken as 0" in out
    )
    assert "bandwidth where communication = compute" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--nodes", "1"], "--nodes: gloo plans 2 nodes or more"),
        (["--nodes", "0"], "--nodes: must be whole numbers between 1 and 100000"),
        (["--nodes", "2,100001"], "--nodes"),
        (["--nodes", "two"], "--nodes"),
        (["--bw", "100furlongs"], "--bw: unknown rate unit"),
        (["--bw", "100"], "--bw: rate '100' needs a unit"),
        (["--up", "0bit"], "--up: must be between"),
        (["--delay", "5parsecs"], "--delay"),
        (["--delay", "20s"], "--delay: must be between"),
        (["--shapes", "gpt5-huge"], "--shapes: unknown shapes preset"),
        (["--shapes", "gpt2-small", "--params", "1e9"], "--shapes and --params"),
        (["--params", "-5"], "--params"),
        (["--replicator", "zip"], "--replicator: unknown replicator"),
        (["--replicator", "lowrank", "--rank", "2.5"], "--rank"),
        (["--replicator", "mtdao", "--m1-every", "0"], "--m1-every"),
        (["--replicator", "lowrank", "--rank", "0"], "--rank"),
        (["--replicator", "mtdao", "--grad-dtype", "fp8"], "--grad-dtype"),
        (["--gpus-per-node", "4", "--nodes", "8"], "--intra-bw"),
        (["--gpus-per-node", "4", "--intra-bw", "100gbit", "--nodes", "50000"], "--gpus-per-node: 50000 nodes x 4"),
        (["--algorithm", "butterfly"], "--algorithm"),
        (["--acks-per-segment", "3"], "--acks-per-segment"),
        (["--compute-ms", "-1"], "--compute-ms"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, args, needle):
    base = [] if "--replicator" in args else ["--replicator", "lowrank"]
    assert needle in plan_error(capsys, *base, *args)


def test_option_type_error_one_line_exit_2(capsys):
    assert "--topk" in plan_error(capsys, "--replicator", "lowrank", "--topk", "x")


def test_broken_calibration_file_is_a_user_error(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert "--calibration" in plan_error(capsys, "--replicator", "lowrank", "--calibration", str(bad))


def test_console_entry_point_exit_code(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "plan", "--nodes", "0"],
        capture_output=True,
        text=True,
        env={"NETBENCH_CALIBRATION": str(tmp_path / "x.json"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--nodes" in done.stderr


def test_replicator_payloads_come_from_their_declarations(capsys):
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload
    from netbench.shapes import resolve_shapes

    shapes = resolve_shapes("gpt2-small:blocks=2")
    doc = plan_json(
        capsys,
        "--replicator",
        "full,dct,random,diloco",
        "--nodes",
        "4",
        "--sync-every",
        "5",
        "--grad-dtype",
        "bf16",
        "--index-dtype",
        "int32",
        "--topk",
        "16",
    )
    rows = {r["replicator"]: r for r in doc["rows"]}
    for name in ("full", "dct", "random"):
        cfg = ReplicatorConfig(name=name, grad_dtype="bf16", index_dtype="int32", topk=16, sync_every=5)
        decl = declared_payload(shapes, cfg, 4)
        assert rows[name]["payload_bytes_per_step"] == decl.bytes_per_step
        assert rows[name]["exchanges"][0]["collective"] == decl.collective
    dense_bf16 = sum(s.numel for s in shapes) * 2
    assert rows["diloco"]["payload_bytes_per_step"] == pytest.approx(dense_bf16 / 5)  # averaged over the period
    assert rows["dct"]["exchanges"][0]["collective"] == "all_gather"
    # all_gather: each node forwards N-1 contributions; all_reduce: 2(N-1)/N of the buffer
    assert rows["dct"]["payload_wire_bytes_per_step"]["tx"] == pytest.approx(3 * rows["dct"]["payload_bytes_per_step"])
    assert rows["full"]["payload_wire_bytes_per_step"]["tx"] == pytest.approx(
        1.5 * rows["full"]["payload_bytes_per_step"]
    )


def test_dct_matches_demo_chunking_on_divisible_shapes(capsys, tmp_path):
    """The published DeMo (detonation 0.5.2) picks, per dimension, the largest divisor <= chunk and sends
    min(topk, chunk area) int32 indices + fp32 values per chunk. On gpt2-small:blocks=2 every dimension
    is a multiple of 64, so plan -- from a shapes file, explicit wire dtypes -- must match to the byte."""
    dct_transform = pytest.importorskip("detonation.util.dct_transform")
    from netbench.shapes import resolve_shapes

    shapes = {s.name: list(s.shape) for s in resolve_shapes("gpt2-small:blocks=2")}
    split = dct_transform.DCTTransform._get_smaller_split
    coefficients = 0
    for dims in shapes.values():
        chunks = [split(d, 64) for d in dims]
        tiles = 1
        for d, c in zip(dims, chunks):
            tiles *= d // c
        area = chunks[0] * (chunks[1] if len(chunks) > 1 else 1)
        coefficients += tiles * min(32, area)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"shapes": shapes}))
    doc = plan_json(
        capsys,
        "--shapes",
        str(path),
        "--replicator",
        "dct",
        "--topk",
        "32",
        "--chunk",
        "64",
        "--index-dtype",
        "int32",
        "--value-dtype",
        "fp32",
    )
    assert doc["rows"][0]["payload_bytes_per_step"] == coefficients * (4 + 4)


THREE_SITES = """
[[sites]]
name = "us-east"
nodes = 2
lan_bw = "1gbit"
[[sites]]
name = "eu-west"
nodes = 2
lan_bw = "1gbit"
[[wan]]
between = ["us-east", "eu-west"]
bw = "100mbit"
delay = "20ms"
reverse = { bw = "50mbit" }
[nodes.1]
compute_scale = 1.5
"""


def test_plan_on_a_topology_file_and_a_runs_prediction_agree(capsys, tmp_path):
    """One function: plan --topology FILE and the model step a run on that cluster predicts."""
    from netbench.declarations.config import ReplicatorConfig
    from netbench.emulation.spec import ClusterSpec
    from netbench.emulation.tcpsettings import TcpOptions
    from netbench.orchestrator.config import RunConfig
    from netbench.orchestrator.prediction import model_step
    from netbench.shapes import resolve_shapes
    from netbench.topology import load_topology
    from netbench.workloads.config import WorkloadConfig

    path = tmp_path / "sites.toml"
    path.write_text(THREE_SITES)
    doc = plan_json(
        capsys,
        "--topology",
        str(path),
        "--replicator",
        "full",
        "--compute-ms",
        "100",
        "--tcp-cc",
        "cubic",
        "--tcp-wmem-max",
        "67108864",
        "--acks-per-segment",
        "0.5",
    )
    flat = next(r for r in doc["rows"] if r["layout"] == "flat")
    topo = load_topology(path)
    cluster = ClusterSpec(
        nodes=4,
        up={"rate_bps": 1e9},
        down={"rate_bps": 1e9},
        topology=topo,
        tcp=TcpOptions(cc="cubic", wmem_max=67108864, slow_start_after_idle=True),
    )
    config = RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="full"),
        capture=False,
        workload=WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2", compute_ms=100),
    )
    est = model_step(
        config, resolve_shapes("gpt2-small:blocks=2"), 0.1 * 1.5, Calibration()
    )  # measured: the slowest node's
    assert flat["step_time_s"] == pytest.approx(est.step.step_time_s, rel=1e-9)
    assert flat["bottleneck"]["name"] == est.bottleneck.name == "eu-west to us-east"  # the 50mbit direction
    assert {r["layout"] for r in doc["rows"]} == {"flat", "sites"}
    assert doc["derived"]["sites_vs_flat"][0]["replicator"] == "full"


def test_plan_on_site_presets_names_the_wan_and_answers_its_rate(capsys):
    doc = plan_json(
        capsys,
        "--topology",
        "sites",
        "--sites",
        "2",
        "--nodes",
        "4,8",
        "--bw",
        "1gbit",
        "--wan-bw",
        "100mbit",
        "--wan-delay",
        "10ms",
        "--replicator",
        "diloco",
        "--compute-ms",
        "2000",
        "--rank-order",
        "interleaved",
    )
    rows = [r for r in doc["rows"] if r["layout"] == "flat"]
    assert [r["nodes"] for r in rows] == [4, 8]
    assert rows[1]["bottleneck"]["text"].startswith("the site0 to site1 link carries 4 ring hops")
    wan = doc["derived"]["wan_comm_equals_compute_bw"][0]
    assert wan["wan_bps"] is not None
    main(
        [
            "plan",
            "--topology",
            "sites",
            "--sites",
            "2",
            "--nodes",
            "4",
            "--bw",
            "1gbit",
            "--wan-bw",
            f"{wan['wan_bps']:.6g}bit",
            "--wan-delay",
            "10ms",
            "--replicator",
            "diloco",
            "--compute-ms",
            "2000",
            "--rank-order",
            "interleaved",
            "--json",
        ]
    )
    at = json.loads(capsys.readouterr().out)["rows"][0]
    assert at["comm_time_s"] == pytest.approx(2.0, rel=1e-3)
