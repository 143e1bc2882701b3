"""Rootless as a user meets it: the installed `netbench` console script, run as user `nobody`.

A forked helper that drops privileges before importing anything proves nothing about the real
command line, where importing the CLI starts threads (OpenBLAS, OpenMP) and unshare(CLONE_NEWUSER)
then refuses. So this installs netbench (not editable) into a virtual environment that `nobody`
can read, and runs its console script as `nobody` through `su` (not setpriv: it keeps root's
capabilities through the uid change, and the process it starts could still read /root).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from netbench import rootless

pytestmark = [
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody"),
]
REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
_PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"}


def as_nobody(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    command = f"cd {shlex.quote(str(cwd))} && HOME={shlex.quote(str(cwd))} exec {shlex.join(argv)}"
    return subprocess.run(
        ["su", "nobody", "-s", "/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout
    )


def _python_nobody_can_run(scratch: Path) -> str | None:
    """This interpreter if `nobody` can run it (not under /root), else the system python3 of the same version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}"):
        if (
            os.path.exists(candidate)
            and as_nobody([candidate, "-c", "import venv, ensurepip"], scratch, 60).returncode == 0
        ):
            return candidate
    return None


@pytest.fixture(scope="module")
def nobody_venv() -> Iterator[tuple[Path, Path]]:
    """(console script, a working folder owned by nobody); removed afterwards."""
    if not rootless.user_namespaces_allowed():
        pytest.skip("unprivileged user namespaces are disabled on this kernel")
    if shutil.which("su") is None or subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c", "true"]).returncode != 0:
        pytest.skip("cannot become user nobody with su")
    top = Path(tempfile.mkdtemp(prefix="netbench-rootless-", dir="/tmp"))
    try:
        top.chmod(0o755)
        work = top / "work"
        work.mkdir()
        os.chown(work, NOBODY, NOBODY)
        python = _python_nobody_can_run(work)
        if python is None:
            pytest.skip(f"no python{sys.version_info.major}.{sys.version_info.minor} that user nobody can run")
        venv = top / "venv"
        env = {**os.environ, **_PIP_ENV}
        subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
        for args in (["torch==2.13.0"], [str(REPO)]):  # torch first, pinned (see scripts/setup.sh)
            done = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", *args],
                env=env,
                cwd=top,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                pytest.fail(f"pip install {args[0]} failed: {done.stderr[-2000:]}")
        yield venv / "bin" / "netbench", work
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_probe_as_nobody_with_the_installed_console_script(nobody_venv) -> None:
    netbench, work = nobody_venv
    done = as_nobody([str(netbench), "probe", "--bw", "100mbit", "--seconds", "2", "--json"], work, 300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["goodput_ratio"] > 0.5, (
        result
    )  # a real cluster carried real traffic (accuracy: scripts/bench_shaping.py)


def test_run_as_nobody_with_the_installed_console_script(nobody_venv) -> None:
    """`run` starts torch workers in the namespaces, delays their packets and captures every port, as a root run does.

    tcpdump's privilege drop calls setgroups(), which the user namespace denies; netbench makes
    that call a no-op for tcpdump (netbench.capture.setgroups_noop), so the capture must be there.
    """
    netbench, work = nobody_venv
    done = as_nobody(
        [
            str(netbench),
            "run",
            "--bw",
            "100mbit",
            "--delay",
            "2ms",
            "--workload",
            "mlp",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--out",
            str(work / "runs"),
            "--json",
        ],
        work,
        600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    run_dir = Path(summary["run_dir"])
    assert (run_dir / "steps.csv").is_file() and (run_dir / "run.json").is_file()
    assert run_dir.stat().st_uid == NOBODY  # written by the caller, mapped back out of the user namespace
    assert summary["wire_tx_bytes_per_step"] > 0, summary  # interface counters measured the wire
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["capture"]["enabled"] and run_json["capture"]["parsed"], run_json["capture"]
    # the delay line cannot raise its priority in a user namespace, so the workers lowered theirs
    assert run_json["cluster"]["delay_engine"] == "delayline" and run_json["cluster"]["worker_nice"] == 10, run_json[
        "cluster"
    ]
    assert summary["capture_wire_bytes_per_step"] > 0 and summary["capture_rx_wire_bytes_per_step"] > 0, summary
    # Two independent measures of the same bytes: the capture and the interface counters agree.
    assert summary["capture_vs_counter_median_rel_diff"] <= 0.02, summary


def test_sweep_as_nobody_runs_its_points_on_one_cluster_with_forked_workers(nobody_venv) -> None:
    """A rootless sweep re-shapes one cluster between its points and forks its workers from the fork server, which
    enters each node's namespace inside the sweep's user namespace; the delayed links make the workers lower
    their priority there as well."""
    netbench, work = nobody_venv
    out = work / "sweep"
    done = as_nobody(
        [
            str(netbench),
            "sweep",
            "--bw",
            "100mbit,1gbit",
            "--delay",
            "2ms",
            "--replicator",
            "full",
            "--nodes",
            "2",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--workload",
            "mlp",
            "--no-calibrate",
            "--no-capture",
            "--out",
            str(out),
        ],
        work,
        600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_docs = [json.loads(p.read_text()) for p in sorted(out.glob("runs/*/run.json"))]
    assert len(run_docs) == 2 and all(d["status"] == "ok" for d in run_docs), [d.get("reason") for d in run_docs]
    assert len({d["cluster"]["run_id"] for d in run_docs}) == 1  # one cluster served both points
    assert all(d["cluster"]["worker_nice"] == 10 for d in run_docs), [d["cluster"] for d in run_docs]
