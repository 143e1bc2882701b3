"""The cache folder is checked before netbench reads, runs or writes anything in it: root runs the native delay line
it finds there, so a folder another user can write into is refused, and a cached program that is a link, not ours
or writable by others is built again rather than run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from netbench import cache
from netbench.calibrate import hostcache
from netbench.emulation import delayline_native
from netbench.model.calibration import CalibrationError

REPO = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(delayline_native.shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(path))
    return path


def test_a_missing_cache_folder_is_made_private(folder: Path) -> None:
    assert cache.checked_cache_dir() == folder and folder.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775, 0o757])
def test_a_cache_folder_others_can_write_is_refused(folder: Path, mode: int) -> None:
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(cache.CacheFolderError, match=r"\$NETBENCH_CACHE_DIR"):
        cache.checked_cache_dir()
    with pytest.raises(delayline_native.NativeUnavailable, match="NETBENCH_CACHE_DIR"):
        delayline_native.binary()
    with pytest.raises(CalibrationError, match="NETBENCH_CACHE_DIR"):
        hostcache.host_calibration()
    assert list(folder.iterdir()) == []  # nothing built, measured or locked there


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_cache_folder_of_another_user_is_refused(folder: Path) -> None:
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    with pytest.raises(cache.CacheFolderError, match="owned by uid 65534"):
        cache.checked_cache_dir()


def test_a_cache_entry_is_not_read_from_an_unsafe_folder(folder: Path) -> None:
    folder.mkdir()
    folder.chmod(0o777)
    (folder / hostcache.cache_path().name).write_text("{}")
    assert hostcache.cached() is None


@pytest.mark.parametrize("env", ["/proc/x", "/dev/null", "/etc/passwd/x"])
def test_a_bad_cache_folder_is_one_line_and_exit_2(env: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "netbench", "plan", "--nodes", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, cache.CACHE_ENV: env, "PYTHONPATH": str(REPO)},
        cwd="/",
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "NETBENCH_CACHE_DIR" in out.stderr


def test_the_lock_file_is_never_followed(folder: Path, tmp_path: Path) -> None:
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    lock = hostcache.cache_path()
    lock.with_name(lock.name + ".lock").symlink_to(victim)
    with pytest.raises(CalibrationError, match="lock"):
        hostcache.host_calibration()
    assert victim.read_text() == "precious"


@needs_cc
@pytest.mark.parametrize("plant", ["link", "group-writable", "not ours"])
def test_a_cached_program_that_is_not_ours_is_built_again_not_run(folder: Path, tmp_path: Path, plant: str) -> None:
    program = delayline_native.binary()
    marker = tmp_path / "ran"
    planted = tmp_path / "planted"
    planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
    planted.chmod(0o755)
    program.unlink()
    if plant == "link":
        program.symlink_to(planted)
    else:
        program.write_bytes(planted.read_bytes())
        program.chmod(0o775 if plant == "group-writable" else 0o755)
        if plant == "not ours":
            if os.geteuid() != 0:
                pytest.skip("chown needs root")
            os.chown(program, 65534, 65534)
    rebuilt = delayline_native.binary()
    assert rebuilt == program and not rebuilt.is_symlink() and cache.trusted_file(rebuilt)
    assert b"delay line" in rebuilt.read_bytes() and not marker.exists()
