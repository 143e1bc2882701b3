"""Bad input to every command: one line naming the option (or scenario field), exit code 2, and
nothing created -- no cluster registered, no namespace, no output folder.

Each case runs the real entry point (:func:`netbench.cli.app.main`, what the `netbench` script
calls) in this process, so a table of forty costs a second rather than forty interpreter starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import leftovers
import pytest

from netbench.cli.app import main
from netbench.emulation import naming, netns
from netbench.shapes import MAX_SHAPES_FILE_BYTES
from netbench.workloads.config import WorkloadConfig

# argv (``{tmp}`` is the test's folder, ``{text}`` a file there that is not JSON), and what the line must name.
CASES: list[tuple[list[str], str]] = [
    (["run", "--bw", "0"], "--bw"),
    (["run", "--bw", "5zbit"], "--bw"),
    (["run", "--bw", "20gbit"], "--bw"),
    (["run", "--up", "5mbit"], "--up"),
    (["run", "--down", "50gbit"], "--down"),
    (["run", "--delay", "-1ms"], "--delay"),
    (["run", "--delay", "2s"], "--delay"),
    (["run", "--jitter", "abc"], "--jitter"),
    (["run", "--loss", "90%"], "--loss"),
    (["run", "--loss", "abc"], "--loss"),
    (["run", "--nodes", "1"], "--nodes"),
    (["run", "--nodes", "65"], "--nodes"),
    (["run", "--steps", "0"], "--steps"),
    (["run", "--steps", "abc"], "--steps"),
    (["run", "--warmup", "-1"], "--warmup"),
    (["run", "--timeout", "0"], "--timeout"),
    (["run", "--threads", "0"], "--threads"),
    (["run", "--topk", "100", "--chunk", "8"], "--topk"),
    (["run", "-r", "random", "--rate", "0"], "--rate"),
    (["run", "-r", "random", "--rate", "1.5"], "--rate"),
    (["run", "-r", "diloco", "--sync-every", "0"], "--sync-every"),
    (["run", "--index-dtype", "int16", "--chunk", "200"], "--index-dtype"),
    (["run", "--lr", "inf"], "--lr"),
    (["run", "--replicator", "foo"], "--replicator"),
    (["run", "--workload", "foo"], "--workload"),
    (["run", "--workload", "shapes", "--compute-ms", "-5"], "--compute-ms"),
    (["run", "--workload", "shapes", "--shapes", "nosuch"], "--shapes"),
    (["run", "--shapes", "nosuch"], "--shapes"),  # unused by the default workload, still a mistake
    (["run", "--workload", "shapes", "--shapes", "{tmp}/missing.json"], "--shapes"),
    (["run", "--workload", "shapes", "--shapes", "{text}"], "--shapes"),
    (["run", "--out", "/proc/netbench-runs"], "--out"),
    (["run", "--out", "{text}"], "--out"),
    (["run", "--offload", "maybe"], "--offload"),
    (["run", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["run", "--gpus-per-node", "17"], "--gpus-per-node"),
    (["run", "--nodes", "8", "--gpus-per-node", "16"], "--gpus-per-node"),  # 128 worker processes on this host
    (
        [
            "run",
            "-w",
            "shapes",
            "--shapes",
            "llama:d_model=1024,layers=8,ffn=2816,vocab=32000",
            "--gpus-per-node",
            "16",
        ],
        "workload",
    ),  # 2 nodes fit, 32 workers do not
    (["run", "--intra-bw", "fast"], "--intra-bw"),
    (["run", "--intra-bw", "0"], "--intra-bw"),
    (["run", "--intra-bw", "-5mbit"], "--intra-bw"),
    (["run", "--shard-within", "rack"], "--shard-within"),
    (["run", "--shard-within", "site"], "--shard-within"),  # the star is one site: nothing to replicate between
    (["run", "--shard-within", "host"], "--shard-within"),  # a torchrun host's local ranks: netbench worker's
    (["run", "--compression", "2"], "--compression"),
    (["run", "--compression", "1/0"], "--compression"),
    (["run", "-r", "full", "--compression", "1/16"], "--compression"),
    (["run", "--optimizer", "lamb"], "--optimizer"),
    # Streaming DiLoCo and quantized outer exchanges: the transformer workload has 2 layers
    (["run", "-r", "streaming", "--sync-every", "12", "--fragments", "3"], "--fragments"),  # 3 does not divide 2
    (["run", "-r", "streaming", "--fragments", "11"], "--fragments"),  # more than sync_every 10
    (["run", "-r", "streaming", "--fragment-sync-delay", "10"], "--fragment-sync-delay"),  # tau >= H
    (["run", "-r", "streaming", "--fragments", "2", "--fragment-sync-delay", "5"], "--fragment-sync-delay"),
    (["run", "-r", "streaming", "--fragment-update-alpha", "1.5"], "--fragment-update-alpha"),
    (["run", "-r", "streaming", "--fragment-pattern", "zigzag"], "--fragment-pattern"),
    (["run", "-r", "diloco", "--quant-bits", "3"], "--quant-bits"),
    (["run", "-r", "mtdao", "--quant-bits", "16"], "--quant-bits"),
    (["run", "-r", "sparseloco", "--quant-block", "0"], "--quant-block"),
    (["run", "-r", "sparseloco", "--error-decay", "1"], "--error-decay"),
    (
        ["plan", "-r", "streaming", "--sync-every", "10", "--fragments", "5", "--shapes", "gpt2-small:blocks=2"],
        "--fragments",
    ),
    (["plan", "-r", "streaming", "--fragment-sync-delay", "10"], "--fragment-sync-delay"),
    (["plan", "-r", "diloco", "--quant-bits", "1"], "--quant-bits"),
    (["probe", "--bw", "0"], "--bw"),
    (["probe", "--bw", "20gbit"], "--bw"),
    (["probe", "--up", "5mbit"], "--up"),
    (["probe", "--delay", "-1ms"], "--delay"),
    (["probe", "--nodes", "1000"], "--nodes"),
    (["probe", "--loss", "60%"], "--loss"),
    (["probe", "--seconds", "0"], "--seconds"),
    (["plan", "--nodes", "1"], "--nodes"),
    (["plan", "--bw", "0"], "--bw"),
    (["plan", "--delay", "-1ms"], "--delay"),
    (["plan", "--shapes", "nosuch"], "--shapes"),
    (["plan", "--replicator", "foo"], "--replicator"),
    (["plan", "--topk", "5000", "--chunk", "8"], "--topk"),
    (["plan", "--rate", "2", "--replicator", "random"], "--rate"),
    (["plan", "--algorithm", "foo"], "--algorithm"),
    (["sweep", "--bw", "100mbit", "--out", "/proc/netbench-sweep"], "--out"),
    (["sweep", "{tmp}/missing.toml"], "cannot be read"),
    (["clean", "not-a-run"], "RUN_ID"),
    # unbounded input: one parameter cap (shapes.MAX_PARAMS), bounded files, strict names, sane times
    (
        ["run", "--shapes", "llama:d_model=inf,layers=16,ffn=5632,vocab=32000"],
        "--shapes",
    ),  # was an OverflowError traceback
    (
        ["run", "-w", "shapes", "--shapes", "llama:d_model=8192,layers=400,ffn=28672,vocab=128256"],
        "--shapes",
    ),  # 3.4e11 parameters
    (["run", "-w", "shapes", "--shapes", "llama:d_model=4096,layers=100000000000,ffn=11008,vocab=32000"], "--shapes"),
    (["run", "-w", "shapes", "--shapes", "llama:d_model=1.5,layers=1,ffn=1,vocab=1"], "--shapes"),
    (["run", "-w", "shapes", "--shapes", "{huge}"], "--shapes"),  # a shapes file of 1e13 parameters
    (["run", "-w", "shapes", "--shapes", "{booleans}"], "--shapes"),
    (["run", "-w", "shapes", "--shapes", "/dev/zero"], "--shapes"),  # read forever
    (["run", "-w", "shapes", "--shapes", "{fifo}"], "--shapes"),  # would block forever
    (["run", "-w", "shapes", "--shapes", "{oversized}"], "--shapes"),
    (["run", "-w", "shapes", "--shapes", "llama-7b"], "workload"),  # under the cap, but no 2 nodes of it fit in memory
    (["run", "-w", "shapes", "--compute-ms", "1e300"], "--compute-ms"),
    (["run", "--timeout", "1e-6"], "--timeout"),
    (["run", "--out", "{foreign}"], "--out"),  # a folder another user owns: they could plant symlinks in it
    (["run", "--out", "{world}/runs"], "--out"),  # world-writable, no sticky bit
    (["plan", "--shapes", "llama:d_model=inf,layers=1,ffn=1,vocab=1"], "--shapes"),
    (["plan", "--shapes", "/dev/zero"], "--shapes"),
    (["plan", "--params", "inf"], "--params"),
    (["plan", "--params", "1e12"], "--params"),
    (["sweep", "--bw", "100mbit", "--name", "..", "--dry-run"], "--name"),  # would write outside reports/sweeps
    (["sweep", "--bw", "100mbit", "--name", "a/b", "--dry-run"], "--name"),
    (["sweep", "--bw", "100mbit", "-w", "shapes", "--compute-ms", "1e300", "--dry-run"], "--compute-ms"),
    (["sweep", "--bw", "100mbit", "-w", "shapes", "--shapes", "/dev/zero", "--dry-run"], "--shapes"),
    (["sweep", "--bw", "100mbit", "--out", "{foreign}/sweep"], "--out"),
    (["sweep", "--bw", "100mbit", "--out", "{world}/sweep", "--dry-run"], "--out"),
    (["calibrate", "--iters", "100000000000", "--out", "{tmp}/calib.json"], "--iters"),
    (["calibrate", "--steps", "100000", "--out", "{tmp}/calib.json"], "--steps"),
    (["calibrate", "--shapes", "/dev/zero", "--out", "{tmp}/calib.json"], "--shapes"),
    (["calibrate", "--out", "{foreign}/calib.json"], "--out"),
    (["report", "{world}"], "FOLDER"),
]

# A scenario file's text, and the field the line must name.
SCENARIOS: list[tuple[str, str]] = [
    ("grid = [", "invalid TOML"),
    ("bogus = 1", "bogus"),
    ('[grid]\nbw = ["100mbit", "5zbit"]', "grid.bw[1]"),
    ('[grid]\nbw = ["1mbit"]', "grid.bw"),
    ("[grid]\nnodes = [1]", "grid.nodes"),
    ("[grid]\ngpus_per_node = [1, 0]", "grid.gpus_per_node[1]"),
    ('[grid]\nintra_bw = ["fast"]', "grid.intra_bw"),
    ('[grid]\ndelay = ["2s"]', "grid.delay"),
    ('[grid]\nreplicator = ["foo"]', "grid.replicator"),
    ("steps = 0", "steps"),
    ("timeout_s = 0", "timeout_s"),
    ("[replicator]\ntopk = 100\nchunk = 8", "topk"),
    ("[replicator]\nrate = 0", "replicator.rate"),
    ("[replicator]\nsync_every = 0", "replicator.sync_every"),
    ('[workload]\nkind = "shapes"\nshapes = "nosuch"', "unknown shapes preset"),
    ('name = ".."', "name"),
    ("timeout_s = 1e-6", "timeout_s"),
    ('[workload]\nkind = "shapes"\ncompute_ms = 1e300', "compute_ms"),
    ('[workload]\nkind = "shapes"\nshapes = "/dev/zero"', "regular file"),
    ('[workload]\nkind = "shapes"\nshapes = "llama:d_model=inf,layers=1,ffn=1,vocab=1"', "whole number"),
    ("[workload]\nd_model = 100000\nn_heads = 1", "parameters"),
    ('[grid]\nreplicator = ["streaming"]\n[replicator]\nsync_every = 12\nfragments = 3', "replicator.fragments"),
    ('[grid]\nreplicator = ["streaming"]\n[replicator]\nfragment_sync_delay = 10', "fragment_sync_delay"),
    ("[replicator]\nquant_bits = 3", "replicator.quant_bits"),
]


def rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``netbench ARGV``; check exit code 2, one line on stderr, nothing built; return the line."""
    namespaces_before = set(netns.list_netns())
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netbench: error: "), err
    assert out == ""
    assert leftovers.run_id_of_pid(os.getpid()) is None  # no cluster was registered
    new = set(netns.list_netns()) - namespaces_before  # anything new must belong to another live run
    assert all(naming.owner_alive(naming.run_id_of(n) or "") for n in new), new
    return lines[0]


def placeholders(tmp_path: Path, argv: list[str]) -> dict[str, str]:
    """The files and folders a case's argv names, made only when named: text that is not JSON, shapes
    files too big in two ways, a FIFO, a folder another user owns and one every user may write to."""
    wanted = " ".join(argv)
    made = {"{tmp}": tmp_path}
    for key, name in (
        ("{text}", "notes.txt"),
        ("{huge}", "huge.json"),
        ("{booleans}", "booleans.json"),
        ("{oversized}", "big.json"),
        ("{fifo}", "shapes.json"),
        ("{foreign}", "foreign"),
        ("{world}", "world"),
    ):
        if key in wanted:
            made[key] = tmp_path / name
    contents = {
        "{text}": "not json\n",
        "{huge}": json.dumps({"shapes": {"a": [100_000_000, 100_000]}}),
        "{booleans}": json.dumps({"shapes": {"a": [True, 3]}}),
        "{oversized}": " " * MAX_SHAPES_FILE_BYTES + json.dumps({"shapes": {"a": [1]}}),
    }  # valid JSON, just too long
    for key, path in made.items():
        if key in contents:
            path.write_text(contents[key])
    if "{fifo}" in made:
        os.mkfifo(made["{fifo}"])
    if "{foreign}" in made:
        made["{foreign}"].mkdir()
        os.chown(made["{foreign}"], 65534, 65534)  # nobody
    if "{world}" in made:
        made["{world}"].mkdir()
        made["{world}"].chmod(0o777)
        (made["{world}"] / "summary.csv").write_text("key,status,run_dir\n")
    return {key: str(path) for key, path in made.items()}


@pytest.mark.parametrize("argv, option", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_option_is_one_line_exit_2(
    argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if any("{foreign}" in a for a in argv) and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    names = placeholders(tmp_path, argv)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for key, value in names.items():
        argv = [a.replace(key, value) for a in argv]
    out_dir = tmp_path / "out"
    if argv[0] == "run" and "--out" not in argv:
        argv += ["--out", str(out_dir)]
    assert option in rejected(argv, capsys)
    assert not out_dir.exists()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created, wherever it pointed


@pytest.mark.parametrize(
    "workload",
    [
        WorkloadConfig(),
        WorkloadConfig(d_model=64, n_layers=3, seq_len=32),
        WorkloadConfig(kind="mlp"),
        WorkloadConfig(kind="mlp", in_dim=3, hidden=7, mlp_layers=1, classes=5),
    ],
    ids=["transformer", "transformer-small", "mlp", "mlp-tiny"],
)
def test_the_parameter_cap_counts_what_the_workers_build(workload: WorkloadConfig) -> None:
    """The cap and the memory check use WorkloadConfig.param_count(): it must match the model a worker builds."""
    from netbench.workloads.mlp import make_mlp
    from netbench.workloads.transformer import TinyGPT

    if workload.kind == "transformer":
        model = TinyGPT(workload.d_model, workload.n_layers, workload.n_heads, workload.seq_len)
    else:
        model = make_mlp(workload.in_dim, workload.hidden, workload.mlp_layers, workload.classes)
    assert workload.param_count() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("toml, field", SCENARIOS, ids=[t.splitlines()[-1] for t, _ in SCENARIOS])
def test_bad_scenario_file_is_one_line_exit_2(
    toml: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml + "\n")
    line = rejected(["sweep", str(path), "--out", str(tmp_path / "sweep")], capsys)
    assert str(path) in line and field in line, line
    assert not (tmp_path / "sweep").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="probing the kernel's qdiscs needs root")
def test_engine_the_kernel_lacks_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from netbench.emulation.capabilities import detect

    if detect().netem:
        pytest.skip("this kernel has sch_netem: --engine netem is valid here")
    line = rejected(["run", "--engine", "netem", "--delay", "10ms", "--out", str(tmp_path / "out")], capsys)
    assert "--engine" in line and not (tmp_path / "out").exists()


def test_the_shell_sees_exit_2_and_one_line(tmp_path: Path) -> None:
    """The same path through the installed entry point, as a user's shell runs it."""
    out = subprocess.run(
        [sys.executable, "-m", "netbench", "run", "--loss", "90%", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == ["netbench: error: --loss: must be between 0% and 50%, got 90%"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "command",
    [["run", "--delay", "5ms"], ["sweep", str(Path(__file__).resolve().parents[1] / "scenarios" / "ci.toml")]],
    ids=["run", "sweep"],
)
def test_a_bad_delay_line_setting_is_bad_input(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad $NETBENCH_DELAY_LINE is refused before anything is built, by every command that reads it."""
    monkeypatch.setenv("NETBENCH_DELAY_LINE", "fast")
    line = rejected([*command, "--out", str(tmp_path / "out")], capsys)
    assert "NETBENCH_DELAY_LINE" in line and "fast" not in line and not (tmp_path / "out").exists()


# Topologies on the emulating commands: a bad file, a preset that does not fit, too many nodes for this host.
TOPOLOGY_CASES: list[tuple[list[str], str, str]] = [
    (["run", "--topology", "{tmp}/missing.toml"], "", "missing.toml"),
    (["run", "--topology", "{tmp}/bad.toml"], "[[sites]]\nname = 'a'\nnodes = 0\nlan_bw = '1gbit'\n", "bad.toml"),
    (
        ["run", "--topology", "{tmp}/big.toml"],
        "[racks]\nracks = 13\nnodes_per_rack = 5\nbw = '1gbit'\noversubscription = 2\n",
        "may emulate",
    ),
    (["run", "--topology", "sites", "--nodes", "3", "--sites", "2"], "", "--sites"),
    (
        ["run", "--topology", "sites", "--nodes", "4", "--wan-bw", "5kbit"],
        "",
        "--wan-bw",
    ),  # 2 sites by default: the rate is what is wrong
    (["run", "--sites", "2"], "", "--sites"),
    (
        ["run", "--topology", "sites", "--nodes", "4", "--sites", "2", "--wan-bw", "100mbit", "--rank-order", "0,1,2"],
        "",
        "--rank-order",
    ),
    (
        ["probe", "--topology", "racks", "--nodes", "4", "--racks", "2", "--oversubscription", "0"],
        "",
        "--oversubscription",
    ),
    (["exec", "--topology", "{tmp}/missing.toml", "--", "true"], "", "missing.toml"),
]


@pytest.mark.parametrize("argv, toml, named", TOPOLOGY_CASES, ids=[" ".join(a) for a, _, _ in TOPOLOGY_CASES])
def test_bad_topology_is_one_line_exit_2_before_anything_is_built(
    argv: list[str], toml: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("bad.toml", "big.toml"):
        if toml and f"{{tmp}}/{name}" in argv:
            (tmp_path / name).write_text(toml)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] in ("run", "exec"):
        argv[1:1] = ["--out", str(tmp_path / "out")]
    assert named in rejected(argv, capsys)
    assert not (tmp_path / "out").exists()


# ---- plan --topology: every bad topology file and preset option is one line, exit 2, before any calibration
_SITE = '[[sites]]\nname = "{name}"\nnodes = 2\nlan_bw = "1gbit"\n'
_TWO_SITES = _SITE.format(name="a") + _SITE.format(name="b")
BAD_TOPOLOGIES: list[tuple[str, str]] = [
    (_TWO_SITES + '[[wan]]\nbetween = ["a", "zz"]\nbw = "100mbit"\n', "unknown site 'zz'"),
    (_TWO_SITES + _SITE.format(name="c") + '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n', "is not listed"),
    (_TWO_SITES, "is not listed"),  # two sites and no WAN link: disconnected
    (_TWO_SITES + '[[wan]]\nbetween = ["a", "b"]\nbw = "100gbit"\n', "between 10mbit and 10gbit"),
    (_TWO_SITES + '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n[nodes.9]\ncompute_scale = 2\n', "nodes.9"),
    (_TWO_SITES + '[[wan]]\nbetween = ["a", "b"]\nbw = "100mbit"\n[nodes.1]\ncompute_scale = 0\n', "compute_scale"),
    ("[[sites]\nname = ", "invalid TOML"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_TOPOLOGIES, ids=[n for _, n in BAD_TOPOLOGIES])
def test_plan_with_a_bad_topology_file_is_one_line_exit_2(
    text: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "absent.json"))
    path = tmp_path / "topology.toml"
    path.write_text(text)
    line = rejected(["plan", "--topology", str(path)], capsys)
    assert needle in line and str(path) in line, line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--topology", "sites", "--sites", "3", "--nodes", "4", "--wan-bw", "1gbit"], "--sites"),
        (["--topology", "sites", "--sites", "2", "--nodes", "4", "--wan-bw", "fast"], "--wan-bw"),
        (["--topology", "star", "--wan-bw", "1gbit"], "--wan-bw"),
        (["--topology", "racks", "--racks", "2", "--nodes", "4", "--oversubscription", "0.5"], "--oversubscription"),
        (
            ["--topology", "sites", "--sites", "2", "--nodes", "4", "--wan-bw", "1gbit", "--rank-order", "0,0,1,2"],
            "--rank-order",
        ),
        (
            [
                "--topology",
                "sites",
                "--sites",
                "2",
                "--nodes",
                "4",
                "--wan-bw",
                "1gbit",
                "--gpus-per-node",
                "2",
                "--intra-bw",
                "10gbit",
            ],
            "--topology",
        ),
        (["--rank-order", "interleaved"], "--rank-order"),
        (["--topology", "{tmp}/missing.toml"], "missing.toml"),
        (["--topology", "{tmp}/missing.toml", "--nodes", "4"], "--nodes"),
    ],
)
def test_plan_with_bad_topology_options_is_one_line_exit_2(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETBENCH_CALIBRATION", str(tmp_path / "absent.json"))
    line = rejected(["plan", *(a.replace("{tmp}", str(tmp_path)) for a in argv)], capsys)
    assert needle in line, line


# ---- --schedule: a schedule or trace file that cannot be used is one line, exit 2, before anything is built
SCHEDULE_CASES: list[tuple[list[str], str, str]] = [
    ([], "time_s,link,rate\n0,n9,20mbit\n", "change 1: unknown link (this network has"),
    ([], "time_s,link,rate\n5,*,20mbit\n1,*,50mbit\n", "times out of order"),
    ([], "time_s,link,rate\n0,*,-20mbit\n", "rate"),
    ([], "time_s,link,delay\n0,*,-5ms\n", "delay"),
    ([], "0\n12\nnot-a-time\n", "line 3"),
    ([], "time_s,link,delay\n0,*,20ms\n", "--delay"),  # delay changes need the delay line running from the start
    (
        ["--topology", "sites", "--nodes", "4", "--sites", "2", "--wan-bw", "100mbit"],
        "time_s,link,rate\n0,n9,20mbit\n",
        "unknown link",
    ),
]


@pytest.mark.parametrize(
    "extra, text, needle", SCHEDULE_CASES, ids=[t.splitlines()[-1] + " ".join(e) for e, t, _ in SCHEDULE_CASES]
)
def test_bad_schedule_is_one_line_exit_2_before_anything_is_built(
    extra: list[str], text: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.csv").write_text(text)
    line = rejected(["run", "--out", str(tmp_path / "out"), *extra, "--schedule", str(tmp_path / "s.csv")], capsys)
    assert "--schedule" in line and needle in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, text, needle",
    [
        (
            ["exec", "--schedule", "{s}", "--", "true"],
            "time_s,link,compute_scale\n5,n0,3\n",
            "compute_scale",
        ),  # exec runs no netbench worker
        (["probe", "--schedule", "{s}"], "time_s,link,rate\n0,n9,20mbit\n", "unknown link"),
        (["probe", "--schedule", "{s}"], "time_s,link,delay\n0,*,20ms\n", "--delay"),
        (["exec", "--schedule", "{s}", "--", "true"], "time_s,link,rate\n1,*,20mbit\n0,*,30mbit\n", "out of order"),
    ],
)
def test_exec_and_probe_refuse_a_bad_schedule_in_one_line(
    argv: list[str], text: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.csv").write_text(text)
    argv = [a.replace("{s}", str(tmp_path / "s.csv")) for a in argv]
    if argv[0] == "exec":
        argv[1:1] = ["--out", str(tmp_path / "out")]
    line = rejected(argv, capsys)
    assert "--schedule" in line and needle in line, line
    assert not (tmp_path / "out").exists()


def test_a_missing_or_binary_schedule_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "cannot be read" in rejected(
        ["run", "--out", str(tmp_path / "out"), "--schedule", str(tmp_path / "nope.csv")], capsys
    )
    os.mkfifo(tmp_path / "fifo.csv")  # would block a plain read forever
    assert "FIFO" in rejected(["run", "--out", str(tmp_path / "out"), "--schedule", str(tmp_path / "fifo.csv")], capsys)
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00time")
    assert "not UTF-8" in rejected(
        ["run", "--out", str(tmp_path / "out"), "--schedule", str(tmp_path / "bin.csv")], capsys
    )
