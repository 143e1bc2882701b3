"""`netbench clean` takes only dead netbench runs: exactly netbench's names, judged alive by the run's lock."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench.emulation import cleanup, naming, netns

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="creating namespaces needs root")]
REPO = Path(__file__).resolve().parents[1]
OWNER = (
    "import sys, time; from pathlib import Path; from netbench.emulation import naming; naming.REGISTRY_DIR = "
    "Path(sys.argv[2]); "
    "naming.register(naming.RunNames(sys.argv[1])); print('ready', flush=True); time.sleep(600)"
)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry of this test's own, so no other run on the host is judged by it."""
    monkeypatch.setattr(naming, "REGISTRY_DIR", tmp_path / "registry")
    return tmp_path / "registry"


@pytest.fixture
def namespaces():
    made: list[str] = []

    def make(name: str) -> str:
        netns.create(name)
        made.append(name)
        return name

    yield make
    for name in made:
        netns.remove(name)


def owner(run_id: str, registry: Path) -> subprocess.Popen:
    """Another process that registers ``run_id`` (takes its lock) and stays alive."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, run_id, str(registry)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_netbench_like_foreign_names_are_left_alone(registry: Path, namespaces) -> None:
    run_id = secrets.token_hex(3)
    foreign = [namespaces(f"netbench-{run_id}-{suffix}") for suffix in ("foo", "n0-extra", "n64", "n01")]
    found = cleanup.clean(only=[run_id])
    assert found.namespaces == [] and all(name in netns.list_netns() for name in foreign)
    assert [naming.run_id_of(n) for n in foreign] == [None] * 4


def test_a_live_run_is_left_alone_without_its_registry_entry(registry: Path, namespaces) -> None:
    run_id = secrets.token_hex(3)
    proc = owner(run_id, registry)
    try:
        mine = namespaces(f"netbench-{run_id}-n0")
        (registry / f"{run_id}.json").unlink()  # gone ...
        assert naming.owner_alive(run_id) and cleanup.clean(only=[run_id]).empty and mine in netns.list_netns()
        (registry / f"{run_id}.json").write_text("{corrupt")  # ... or corrupt: the lock still says alive
        assert naming.owner_alive(run_id) and cleanup.clean(only=[run_id]).empty and mine in netns.list_netns()
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_run_is_cleaned(registry: Path, namespaces) -> None:
    run_id = secrets.token_hex(3)
    proc = owner(run_id, registry)
    mine = [namespaces(f"netbench-{run_id}-sw"), namespaces(f"netbench-{run_id}-n1")]
    assert json.loads((registry / f"{run_id}.json").read_text())["pid"] == proc.pid
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not naming.owner_alive(run_id)  # the kernel released the lock with the process
    found = cleanup.clean(only=[run_id])
    assert sorted(found.namespaces) == sorted(mine) and found.stale_registrations == [run_id]
    assert not any(name in netns.list_netns() for name in mine) and naming.registered_run_ids() == []


def test_registering_an_id_another_live_run_holds_fails(registry: Path) -> None:
    run_id = secrets.token_hex(3)
    proc = owner(run_id, registry)
    try:
        with pytest.raises(RuntimeError, match="already held"):
            naming.register(naming.RunNames(run_id))
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.05)
    naming.register(naming.RunNames(run_id))  # free again once its owner died
    assert naming.owner_alive(run_id)
    naming.unregister(naming.RunNames(run_id))
    assert naming.registered_run_ids() == []


def test_traces_of_a_gone_run_ignore_a_namespace_that_reuses_its_inode(namespaces) -> None:
    """The kernel gives a freed namespace's inode to the next one created, often another run's at once:
    that run's processes are not traces of the gone one (this made fault tests fail when others ran clusters)."""
    gone, other = secrets.token_hex(3), secrets.token_hex(3)
    theirs = namespaces(f"netbench-{other}-n0")
    reused = netns.inode_of(theirs)  # as if it had been the gone run's inode, recorded while that run was alive
    sleeper = subprocess.Popen(["ip", "netns", "exec", theirs, "sleep", "60"])
    try:
        assert wait_for(lambda: sleeper.pid in cleanup.processes_of(other))  # inside: found for its own run
        assert cleanup.processes_of(gone, known_inodes={reused}) == []
        assert cleanup.traces_of(gone, {reused}) == {"namespaces": [], "registered": False, "processes": []}
    finally:
        sleeper.kill()
        sleeper.wait()


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_registry_is_not_moved_by_the_environment(tmp_path: Path) -> None:
    """`netbench exec` hands its workloads NETBENCH_RUN_DIR (their run directory): the registry never follows it."""
    code = "from netbench.emulation import naming; print(naming.REGISTRY_DIR)"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NETBENCH_RUN_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "/run/netbench"


def test_a_registry_folder_open_to_others_or_a_link_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = tmp_path / "open"
    opened.mkdir(mode=0o777)
    opened.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    for folder in (opened, link):
        monkeypatch.setattr(naming, "REGISTRY_DIR", folder)
        with pytest.raises(naming.RegistryError, match="refusing"):
            naming.register(naming.RunNames(secrets.token_hex(3)))
    assert not list(tmp_path.glob("*/*.lock")) and not list(tmp_path.glob("*.lock"))


def test_a_cluster_whose_run_id_is_taken_fails_and_leaves_the_other_run_alone(registry: Path, namespaces) -> None:
    """The other run keeps its lock, its registry entry and its namespaces; this one leaves nothing."""
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec

    run_id = secrets.token_hex(3)
    proc = owner(run_id, registry)
    try:
        theirs = [namespaces(f"netbench-{run_id}-sw"), namespaces(f"netbench-{run_id}-n0")]
        spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=1e9), down=DirectionSpec(rate_bps=1e9))
        with pytest.raises(naming.RegistryError, match="already held"):
            with Cluster(spec, names=naming.RunNames(run_id)):
                pass
        assert all(name in netns.list_netns() for name in theirs)
        assert naming.owner_alive(run_id) and json.loads((registry / f"{run_id}.json").read_text())["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_cluster_never_adopts_a_namespace_that_exists(registry: Path, namespaces) -> None:
    """A dead run's namespace with this run's name: building fails, and teardown removes only what this cluster made."""
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec

    run_id = secrets.token_hex(3)
    left = namespaces(f"netbench-{run_id}-n1")
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=1e9), down=DirectionSpec(rate_bps=1e9))
    with pytest.raises(OSError, match=left):
        with Cluster(spec, names=naming.RunNames(run_id)):
            pass
    assert left in netns.list_netns()
    assert not any(name in netns.list_netns() for name in (f"netbench-{run_id}-sw", f"netbench-{run_id}-n0"))
    assert naming.registered_run_ids() == []


def test_unregistering_a_dead_run_spares_a_live_one_that_took_its_id_again(registry: Path) -> None:
    run_id = secrets.token_hex(3)
    proc = owner(run_id, registry)
    try:
        naming.unregister(naming.RunNames(run_id))  # what `clean` does for a run it judged dead a moment ago
        assert (
            naming.owner_alive(run_id)
            and (registry / f"{run_id}.lock").exists()
            and (registry / f"{run_id}.json").exists()
        )
    finally:
        proc.kill()
        proc.wait()
