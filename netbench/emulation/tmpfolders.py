"""A run's private folders in the temporary directory: made fresh, removed by teardown, found by `netbench clean`.

Two kinds, both written as root while the cluster is up: the delay line's counters (``delayline``,
:mod:`netbench.emulation.delaystats`) and the nodes' own temporary directory (``tmp``: ``$TMPDIR`` of every process
a namespace starts, so that what a program leaves there, such as torchrun's ``torchelastic_*`` log folders, goes
with the cluster). A name another user can predict in a shared folder (the run id is world-readable under
/run/netns) would let them plant a symlink there, which root would then write through; so each folder is made by
``mkdtemp`` (a random name, mode 0700, owned by netbench) as ``netbench-<run_id>-<kind>-XXXXXXXX``, and
:func:`leftovers` finds those of runs killed before their teardown by that name.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Literal

__all__ = ["Kind", "parent", "make", "leftovers", "remove"]

Kind = Literal["delayline", "tmp"]
_NAME = re.compile(r"netbench-(?P<run>[0-9a-f]{6})-(?P<kind>delayline|tmp)-[A-Za-z0-9_]+")


def parent() -> Path:
    """The folder the runs' folders live in (netbench's own temporary directory)."""
    return Path(tempfile.gettempdir())


def make(run_id: str, kind: Kind) -> Path:
    """A fresh folder of ``kind`` for ``run_id``: a name no one could have planted, mode 0700."""
    return Path(tempfile.mkdtemp(prefix=f"netbench-{run_id}-{kind}-", dir=parent()))


def leftovers(run_ids: set[str] | None = None, kind: Kind | None = None) -> dict[str, list[Path]]:
    """Folders in :func:`parent` by run id (of ``run_ids`` only, and of ``kind`` only, if given): real folders
    netbench's user owns, never a link or someone else's folder with a netbench-like name.
    """
    found: dict[str, list[Path]] = {}
    try:
        entries = sorted(os.scandir(parent()), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if match is None or (run_ids is not None and match["run"] not in run_ids) or kind not in (None, match["kind"]):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            found.setdefault(match["run"], []).append(Path(entry.path))
    return found


def remove(folder: Path | None) -> None:
    """Remove one of these folders and what is in it (nothing else: it is netbench's own, mode 0700)."""
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
