"""netbench's child processes (workers, the delay line, the traffic tool, the shaping guard) import netbench's own
code only: never a module planted in the working directory or in $PYTHONPATH, which as root would run as root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import netbench
from netbench.child import NETBENCH_ROOT, netbench_module_argv

PLANTED = ("pydantic", "torch", "netbench", "json", "runpy")


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory full of modules that leave a marker file when imported; the test runs from there."""
    folder = tmp_path / "planted"
    folder.mkdir()
    for name in PLANTED:
        (folder / f"{name}.py").write_text(f"open({str(tmp_path / ('MARKER-' + name))!r}, 'w').close()\n")
    monkeypatch.chdir(folder)
    return folder


def markers(planted: Path) -> list[str]:
    return sorted(p.name for p in planted.parent.glob("MARKER-*"))


def test_the_child_runs_the_netbench_the_parent_runs() -> None:
    assert Path(NETBENCH_ROOT) == Path(netbench.__file__).resolve().parents[1]
    argv = netbench_module_argv("netbench.worker", "--help")
    assert (
        argv[:2] == [sys.executable, "-I"] and argv[4] == NETBENCH_ROOT and argv[-2:] == ["netbench.worker", "--help"]
    )


def test_the_child_imports_from_the_folder_named_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree of its own put first wins over the installed netbench: what makes a development tree's children its
    own.
    """
    fake = tmp_path / "tree" / "netbench"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "whoami.py").write_text("import os, sys\nprint(__file__, os.getcwd(), sys.argv[1:])\n")
    monkeypatch.setattr("netbench.child.NETBENCH_ROOT", str(tmp_path / "tree"))
    out = subprocess.run(
        netbench_module_argv("netbench.whoami", "a", "b c"), capture_output=True, text=True, check=True
    ).stdout
    assert out.split()[:2] == [str(fake / "whoami.py"), "/"] and out.strip().endswith("['a', 'b c']")


def test_only_netbench_modules_are_started() -> None:
    with pytest.raises(ValueError, match="not a netbench module"):
        netbench_module_argv("pydantic")


def test_a_worker_ignores_modules_planted_in_its_working_directory(planted: Path) -> None:
    for workdir in ("/", str(planted)):  # a python: workload's worker runs in the user's folder
        out = subprocess.run(
            netbench_module_argv("netbench.worker", "--help", workdir=workdir), capture_output=True, text=True
        )
        assert out.returncode == 0 and "--spec" in out.stdout, out.stderr
    assert markers(planted) == []


def test_pythonpath_is_not_honoured_by_children(planted: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(planted), "PYTHONSTARTUP": str(planted / "torch.py")}
    out = subprocess.run(
        netbench_module_argv("netbench.emulation.traffic", "no-such-mode"),
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    assert out.returncode == 1 and "unknown mode" in out.stderr, out.stderr
    assert markers(planted) == []


def test_a_python_workload_is_imported_only_once_named_for_a_run_and_only_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one exception: a python: workload the user named for a run is imported from the folder it was named in;
    that folder joins sys.path for the import alone, and a workload nobody named for a run is never imported."""
    from netbench.workloads.python import FactoryError, load_factory, name_for_run

    (tmp_path / "mywl_named.py").write_text("def make():\n    return 'made here'\n")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    with pytest.raises(FactoryError, match="only for a run you start"):
        load_factory("mywl_named:make")
    assert "mywl_named" not in sys.modules
    name_for_run("mywl_named:make", tmp_path)
    assert load_factory("mywl_named:make")() == "made here"
    assert sys.path == before


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("build", ["python", "native"])
def test_cluster_children_ignore_planted_modules(planted: Path, monkeypatch: pytest.MonkeyPatch, build: str) -> None:
    """The delay line and the traffic tool, started inside a real cluster from a folder full of planted modules."""
    from netbench.emulation import delayline_native
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.probe import measure_goodput, measure_rtt
    from netbench.emulation.spec import ClusterSpec, DirectionSpec

    if build == "native" and delayline_native.shutil.which("cc") is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("NETBENCH_DELAY_LINE", build)
    monkeypatch.setenv("PYTHONPATH", f"{planted}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    spec = ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.005), down=DirectionSpec(rate_bps=100e6), engine="delayline"
    )
    with Cluster(spec) as cluster:
        assert cluster.describe()["delay_line"] == build
        rtt = measure_rtt(cluster.nodes[0], cluster.nodes[1], count=10)
        assert rtt["rtt_ms"] == pytest.approx(10.0, rel=0.3)
        measure_goodput(cluster.nodes[0], cluster.nodes[1], seconds=1)
    assert markers(planted) == []


def test_python_m_netbench_drops_the_working_directory_before_loading_its_cli(planted: Path) -> None:
    """``python -m`` puts the working directory first; netbench removes it once it is itself imported.
    (A planted ``netbench`` there would still win: ``python -m`` finds the package before any netbench code runs.)"""
    (planted / "netbench.py").unlink()
    out = subprocess.run(
        [sys.executable, "-m", "netbench", "plan", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": NETBENCH_ROOT},
    )
    assert out.returncode == 0, out.stderr
    assert markers(planted) == []


def _spawned(rank: int) -> None:
    """What a spawned calibration child runs: nothing; importing its way here is what is tested."""


def test_spawned_children_import_nothing_planted_in_the_working_directory_or_pythonpath(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.multiprocessing as mp

    from netbench.child import spawning_safely

    (planted / "multiprocessing.py").write_text(
        f"open({str(planted.parent / 'MARKER-multiprocessing')!r}, 'w').close()\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(planted))
    with spawning_safely():
        mp.start_processes(_spawned, nprocs=1, join=True, start_method="spawn")
    assert markers(planted) == [] and Path.cwd() == planted and os.environ["PYTHONPATH"] == str(planted)
