"""The delay line's counters: a fresh private folder per run, written by rename, read without following links or
blocking, removed by teardown and by `netbench clean`; the kernel's queue drops counted and named by the fidelity
check.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from netbench import untrusted
from netbench.emulation import cleanup, delaystats, naming, tmpfolders
from netbench.orchestrator.run import fidelity

RUN_ID = "0a1b2c"


@pytest.fixture
def parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Counter folders in a temporary directory of this test's own."""
    monkeypatch.setattr(tmpfolders, "parent", lambda: tmp_path)
    return tmp_path


def test_each_run_gets_a_fresh_private_folder(parent: Path) -> None:
    first, second = delaystats.make_folder(RUN_ID), delaystats.make_folder(RUN_ID)
    assert first != second and first.parent == parent and first.name.startswith(f"netbench-{RUN_ID}-delayline-")
    info = first.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()


def test_writing_replaces_a_planted_link_instead_of_following_it(parent: Path) -> None:
    victim = parent / "victim"
    victim.write_text("precious")
    folder = delaystats.make_folder(RUN_ID)
    path = delaystats.stats_file(folder)
    path.symlink_to(victim)
    delaystats.write(path, {"passed": 1})
    assert victim.read_text() == "precious" and not path.is_symlink() and json.loads(path.read_text()) == {"passed": 1}
    assert sorted(p.name for p in folder.iterdir()) == [delaystats.STATS_NAME]  # no temporary file left


@pytest.mark.parametrize("kind", ["fifo", "link", "large", "not json", "a list", "missing"])
def test_reading_refuses_what_is_not_the_counters(parent: Path, kind: str) -> None:
    path = parent / "stats.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        (parent / "forged").write_text('{"passed": 1}')
        path.symlink_to(parent / "forged")
    elif kind == "large":
        path.write_text('{"passed": 1, "pad": "' + "x" * untrusted.COUNTERS.max_bytes + '"}')
    elif kind != "missing":
        path.write_text({"not json": "{", "a list": "[1]"}[kind])
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.append(delaystats.read(path)), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert result == [None]  # and never blocked on the FIFO


def test_python_delay_line_writes_through_delaystats(parent: Path) -> None:
    from netbench.emulation import delayline

    line = delayline.DelayLine({}, {})
    line.passed = 5
    folder = delaystats.make_folder(RUN_ID)
    delayline.write_stats(str(delaystats.stats_file(folder)), line)
    assert delaystats.read(delaystats.stats_file(folder))["passed"] == 5


def test_kernel_queue_counters_come_from_the_queue_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "nfnetlink_queue"
    table.write_text(
        "    3  12345     0 2 65531     0     0        9  1\n    0  23456    17 2 65531    40     7   123456  1\n"
    )
    monkeypatch.setattr(delaystats, "QUEUE_PROC", str(table))
    assert delaystats.kernel_queue_counters(0) == {"queue_dropped": 40, "queue_user_dropped": 7}
    assert delaystats.kernel_queue_counters(5) == {}
    monkeypatch.setattr(delaystats, "QUEUE_PROC", str(tmp_path / "absent"))
    assert delaystats.kernel_queue_counters(0) == {}


def _observed(line: dict) -> dict:
    return {"nodes": 2, "cores": 2, "host_busy": 0.3, "softirq": 0.01, "delay_line": line}


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ({"passed": 1000, "late": 0, "queue_dropped": 0, "queue_user_dropped": 0}, False),
        ({"passed": 1000, "late": 0}, False),  # counters unreadable: nothing to say
        ({"passed": 1000, "late": 0, "queue_dropped": 0, "queue_user_dropped": 3}, True),
        ({"passed": 1000, "late": 0, "queue_dropped": 12, "queue_user_dropped": 0}, True),
    ],
)
def test_fidelity_names_packets_the_kernel_dropped_before_the_delay_line(line: dict, named: bool) -> None:
    verdict = fidelity.judge(_observed(line))
    assert verdict["ok"] is not named
    if named:
        (reason,) = verdict["reasons"]
        total = line["queue_dropped"] + line["queue_user_dropped"]
        assert f"lost {total} packet(s)" in reason and "full kernel queue" in reason and "ENOBUFS" in reason


OWNER = (
    "import sys, time, pathlib; from netbench.emulation import naming; naming.REGISTRY_DIR = "
    "pathlib.Path(sys.argv[2]); "
    "naming.register(naming.RunNames(sys.argv[1])); print('ready', flush=True); time.sleep(600)"
)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_clean_removes_dead_runs_temporary_folders_only(
    parent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = tmp_path / "registry"
    monkeypatch.setattr(naming, "REGISTRY_DIR", registry)
    dead, live, foreign = (secrets.token_hex(3) for _ in range(3))
    dead_folder, live_folder, foreign_folder = (delaystats.make_folder(r) for r in (dead, live, foreign))
    delaystats.write(delaystats.stats_file(dead_folder), {"passed": 1})
    dead_tmp = tmpfolders.make(dead, "tmp")  # the nodes' TMPDIR, with what a program left in it
    (dead_tmp / "torchelastic_x").mkdir()
    os.chown(foreign_folder, 65534, 65534)  # someone else's folder with a netbench-like name: not netbench's to remove
    (parent / f"netbench-{dead}-delayline-link").symlink_to(parent)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, live, str(registry)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert cleanup.find_leftovers(only=[dead, live, foreign]).folders == [dead_folder, dead_tmp]
        found = cleanup.clean(only=[dead, live, foreign])
        assert found.folders == [dead_folder, dead_tmp] and not found.empty
        assert not dead_folder.exists() and not dead_tmp.exists()
        assert live_folder.exists() and foreign_folder.exists() and parent.exists()
        assert cleanup.clean(only=[live], include_live=True).folders == [live_folder] and not live_folder.exists()
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("build", ["native", "python"])
def test_both_delay_lines_keep_their_counters_private(monkeypatch: pytest.MonkeyPatch, build: str) -> None:
    """Counters in a 0700 folder of the run's own, the kernel's queue drops beside them; the folder goes with the
    cluster.
    """
    from leftovers import wait_until

    from netbench.emulation import delayline_native
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.probe import measure_rtt
    from netbench.emulation.spec import ClusterSpec, DirectionSpec

    if build == "native" and delayline_native.shutil.which("cc") is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("NETBENCH_DELAY_LINE", build)
    spec = ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.002), down=DirectionSpec(rate_bps=100e6), engine="delayline"
    )
    with Cluster(spec) as cluster:
        path = cluster.delay_line_stats_path
        folder = path.parent
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700 and folder.name.startswith(
            f"netbench-{cluster.names.run_id}-delayline-"
        )
        measure_rtt(cluster.nodes[0], cluster.nodes[1], count=10)
        assert wait_until(lambda: (cluster.impairment.stats() or {}).get("passed", 0) >= 20, timeout_s=5)
        counted = cluster.impairment.stats()
        assert counted["queue_dropped"] == 0 and counted["queue_user_dropped"] == 0, counted
    assert not folder.exists() and cluster.delay_line_stats_path is None
