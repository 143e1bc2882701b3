"""Bad input to every command: one line naming the option (or scenario field), exit code 2, and
nothing created -- no cluster registered, no namespace, no output folder.

Each case runs the real entry point (:func:`netbench.cli.app.main`, what the `netbench` script
calls) in this process, so a table of forty costs a second rather than forty interpreter starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import leftovers
from netbench.cli.app import main
from netbench.emulation import naming, netns

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
    (["sweep", "{tmp}/missing.toml"], "cannot read"),
    (["clean", "not-a-run"], "RUN_ID"),
]

# A scenario file's text, and the field the line must name.
SCENARIOS: list[tuple[str, str]] = [
    ("grid = [", "invalid TOML"),
    ("bogus = 1", "bogus"),
    ('[grid]\nbw = ["100mbit", "5zbit"]', "grid.bw[1]"),
    ('[grid]\nbw = ["1mbit"]', "grid.bw"),
    ("[grid]\nnodes = [1]", "grid.nodes"),
    ('[grid]\ndelay = ["2s"]', "grid.delay"),
    ('[grid]\nreplicator = ["foo"]', "grid.replicator"),
    ("steps = 0", "steps"),
    ("timeout_s = 0", "timeout_s"),
    ("[replicator]\ntopk = 100\nchunk = 8", "topk"),
    ("[replicator]\nrate = 0", "replicator.rate"),
    ("[replicator]\nsync_every = 0", "replicator.sync_every"),
    ('[workload]\nkind = "shapes"\nshapes = "nosuch"', "nosuch"),
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


@pytest.mark.parametrize("argv, option", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_option_is_one_line_exit_2(argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not json\n")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{text}", str(text)) for a in argv]
    out_dir = tmp_path / "out"
    if argv[0] == "run" and "--out" not in argv:
        argv += ["--out", str(out_dir)]
    assert option in rejected(argv, capsys)
    assert not out_dir.exists()


@pytest.mark.parametrize("toml, field", SCENARIOS, ids=[t.splitlines()[-1] for t, _ in SCENARIOS])
def test_bad_scenario_file_is_one_line_exit_2(toml: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    out = subprocess.run([sys.executable, "-m", "netbench", "run", "--loss", "90%", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == ["netbench: error: --loss: must be between 0% and 50%, got 90%"]
    assert not (tmp_path / "out").exists()
