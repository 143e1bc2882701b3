"""Output written as root never goes through a symlink someone planted, and folders a stranger
controls are refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from netbench import safe_files
from netbench.model.calibration import Calibration, save_calibration
from netbench.orchestrator.sweep.sweep import SUMMARY, write_summary

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("precious\n")
    return path


def plant(folder: Path, name: str, victim: Path) -> Path:
    folder.mkdir(exist_ok=True)
    link = folder / name
    link.symlink_to(victim)
    return link


def test_write_text_replaces_a_planted_symlink_instead_of_following_it(tmp_path: Path, victim: Path) -> None:
    link = plant(tmp_path / "out", "run.json", victim)
    safe_files.write_text(link, "{}\n")
    assert victim.read_text() == "precious\n" and not link.is_symlink() and link.read_text() == "{}\n"


def test_the_sweep_summary_never_writes_through_its_temporary_name(tmp_path: Path, victim: Path) -> None:
    """The old writer used the fixed name summary.csv.tmp: whoever could plant it there chose the target."""
    out = tmp_path / "sweep"
    plant(out, SUMMARY + ".tmp", victim)
    write_summary(out, pd.DataFrame({"key": ["a"], "status": ["ok"], "run_dir": ["runs/x"]}))
    assert victim.read_text() == "precious\n" and pd.read_csv(out / SUMMARY)["key"].tolist() == ["a"]


def test_the_calibration_never_writes_through_its_temporary_name(tmp_path: Path, victim: Path) -> None:
    plant(tmp_path / "calib", "host.json.tmp", victim)
    save_calibration(Calibration(), tmp_path / "calib" / "host.json")
    assert victim.read_text() == "precious\n" and Calibration.model_validate_json(
        (tmp_path / "calib" / "host.json").read_text()
    )


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with safe_files.replace_from(path) as fh:
            fh.write("half of the new")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["steps.csv"]


def test_world_writable_folders_are_refused_unless_sticky(tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(safe_files.UnsafeOutput, match="writable by every user"):
        safe_files.check_folder(open_folder / "runs")  # its parent is what a stranger could swap
    open_folder.chmod(0o1777)  # sticky, like /tmp: others cannot rename or remove what is not theirs
    safe_files.make_folder(open_folder / "runs")
    assert (open_folder / "runs").is_dir()


@needs_root
def test_foreign_owned_folders_are_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(safe_files.UnsafeOutput, match="owned by uid 65534"):
        safe_files.make_folder(theirs / "reports")
    assert not (theirs / "reports").exists()


def test_create_new_refuses_existing_files_and_symlinks(tmp_path: Path, victim: Path) -> None:
    link = plant(tmp_path / "w", "rank0.jsonl", victim)
    with pytest.raises(FileExistsError):
        safe_files.create_new(link)
    os.close(safe_files.create_new(tmp_path / "w" / "rank1.jsonl"))
    with pytest.raises(FileExistsError):
        safe_files.create_new(tmp_path / "w" / "rank1.jsonl")
