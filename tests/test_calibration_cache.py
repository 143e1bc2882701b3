"""First-use calibration: measured once per host key, cached atomically, reused; stale or corrupt entries
re-measured.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import netbench.calibrate.measure as measure_mod
from netbench.calibrate import hostcache
from netbench.calibrate.hostcache import cache_dir, cache_path, cached, host_calibration, host_key
from netbench.declarations.registry import names
from netbench.model.calibration import ENV_VAR, Calibration, CalibrationError, save_calibration


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(hostcache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(ENV_VAR, raising=False)
    return tmp_path / "cache"


@pytest.fixture
def fake_measure(monkeypatch) -> list[int]:
    """Replace the (seconds-long, torch-spawning) measurement by a counter; the cache logic is what is tested here."""
    calls: list[int] = []

    def measure(opts) -> Calibration:
        calls.append(1)
        return Calibration(
            source="measured",
            host="h",
            software_overhead_s=1e-4 * len(calls),
            encode_s_per_param={name: 1e-8 for name in names()},
            decode_s_per_param={"dct": 5e-9},
        )

    monkeypatch.setattr(measure_mod, "measure", measure)
    return calls


def test_cache_dir_precedence(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(hostcache.CACHE_ENV, str(tmp_path / "a"))
    assert cache_dir() == tmp_path / "a"
    monkeypatch.delenv(hostcache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "netbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "netbench"


def test_key_names_what_the_constants_depend_on() -> None:
    key = host_key()
    assert {"hostname", "cpu_model", "cpus", "torch", "netbench", "threads"} <= key.keys() and all(key.values())
    changed = {**key, "torch": key["torch"] + "+other"}
    assert cache_path(changed) != cache_path(key) and cache_path(changed).parent == cache_path(key).parent


def test_first_use_measures_then_reuses(cache, fake_measure) -> None:
    told: list[Path] = []
    first = host_calibration(on_measure=told.append)
    assert first.measured_now and first.origin == "measured" and told == [first.path] and fake_measure == [1]
    saved = json.loads(first.path.read_text())
    assert saved["host_key"] == host_key() and first.path.parent == cache
    second = host_calibration(on_measure=told.append)
    assert not second.measured_now and second.origin == "cache" and fake_measure == [1] and len(told) == 1
    assert second.calibration == first.calibration and second.identity()["digest"] == first.calibration.digest()
    assert not list(cache.glob("*.tmp"))  # written atomically: no temporary left behind


def test_changed_key_measures_again(cache, fake_measure, monkeypatch) -> None:
    host_calibration()
    key = host_key()
    monkeypatch.setattr(hostcache, "host_key", lambda threads=1: {**key, "netbench": "99.0"})
    again = host_calibration()
    assert again.measured_now and fake_measure == [1, 1] and len(list(cache.glob("calibration-*.json"))) == 2


@pytest.mark.parametrize("damage", ["{truncated", json.dumps({"source": "measured", "bogus": 1}), ""])
def test_corrupt_entry_measures_again(cache, fake_measure, damage) -> None:
    first = host_calibration()
    first.path.write_text(damage)
    assert cached() is None
    again = host_calibration()
    assert again.measured_now and fake_measure == [1, 1] and cached() == again.calibration


def test_entry_for_another_key_inside_the_file_is_not_used(cache, fake_measure) -> None:
    first = host_calibration()
    save_calibration(
        first.calibration.model_copy(update={"host_key": {**host_key(), "cpu_model": "other"}}), first.path
    )
    assert host_calibration().measured_now and fake_measure == [1, 1]


def test_entry_missing_a_replicator_measures_again(cache, fake_measure) -> None:
    first = host_calibration()
    partial = first.calibration.model_copy(
        update={"encode_s_per_param": {"dct": 1e-8}}
    )  # as `calibrate --replicator dct` leaves it
    save_calibration(partial, first.path)
    assert host_calibration().measured_now and fake_measure == [1, 1]


def test_explicit_and_env_files_are_used_as_they_are(cache, fake_measure, tmp_path, monkeypatch) -> None:
    mine = save_calibration(Calibration(source="measured", software_overhead_s=3e-4), tmp_path / "mine.json")
    assert host_calibration(mine).calibration.software_overhead_s == 3e-4
    with pytest.raises(CalibrationError, match="does not exist"):
        host_calibration(tmp_path / "absent.json")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent.json"))
    assert host_calibration().calibration.source == "defaults"  # the user chose a file: no measurement
    assert fake_measure == []


@pytest.mark.slow  # spawns torch processes: run under nb-shared on the shared machine
def test_plan_on_a_fresh_host_measures_once_in_seconds(tmp_path) -> None:
    """The installed console script: the first plan measures (every compressing replicator > 0), the second reuses."""
    env = {**os.environ, hostcache.CACHE_ENV: str(tmp_path / "cache")}
    env.pop(ENV_VAR, None)

    def plan() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["netbench", "plan", "--replicator", "all", "--nodes", "2", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    first = plan()
    assert first.returncode == 0, first.stderr
    assert "measuring this host's model constants" in first.stderr
    doc = json.loads(first.stdout)
    assert doc["calibration"]["source"] == "measured" and doc["calibration"]["host"]
    compressing = {"dct", "random", "striding", "lowrank", "full", "diloco"}
    assert compressing <= set(doc["calibration"]["measured"])
    for row in doc["rows"]:
        if row["replicator"] in ("dct", "random", "striding", "lowrank"):
            assert row["compression_time_s"] > 0, row["replicator"]
    second = plan()
    assert second.returncode == 0 and "measuring" not in second.stderr
    assert json.loads(second.stdout)["calibration"]["digest"] == doc["calibration"]["digest"]


def test_a_measurement_held_by_another_process_is_waited_for_a_bounded_time(cache, fake_measure, monkeypatch) -> None:
    """A command that finds another holding this host's measurement waits at most LOCK_WAIT_S, then says so."""
    import fcntl
    import time

    monkeypatch.setattr(hostcache, "LOCK_WAIT_S", 0.5)
    hostcache.checked_cache_dir()
    lock = cache_path(host_key())
    lock = lock.with_name(lock.name + ".lock")
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        began = time.monotonic()
        with pytest.raises(CalibrationError, match="another netbench process"):
            host_calibration()
        assert time.monotonic() - began < 5
    assert fake_measure == []
    host_calibration()  # released: measured now
    assert fake_measure == [1]


def test_settings_a_calibration_adds_leave_the_cost_key_alone() -> None:
    """What a declaration's ``calibrated_with`` sets is a setting of the config and none of its cost settings, so a
    run's cost key finds the figure the calibration timed."""
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import spec

    added = {name: spec(name).calibrated_with for name in names() if spec(name).calibrated_with}
    assert "muloco" in added  # its inner Muon is no part of its codec
    for name, settings in added.items():
        assert not set(settings) & set(spec(name).cost_settings), name
        assert set(settings) <= set(ReplicatorConfig.model_fields), name
        ReplicatorConfig(name=name, **settings)
