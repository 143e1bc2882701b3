"""Where netbench keeps what it measures or builds once per host: calibrations, the native delay line.

``$NETBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench``.

netbench runs as root and *runs* a program it finds there (the native delay line), so the folder is
checked before anything in it is read, run or written (:func:`checked_cache_dir`): it and every
folder above it must pass :func:`netbench.safe_files.check_folder`, and the folder itself must be
writable by its owner alone. Otherwise another user could plant a program root would run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from netbench.safe_files import UnsafeOutput, check_folder

__all__ = ["CACHE_ENV", "CacheFolderError", "cache_dir", "checked_cache_dir", "trusted_file"]

CACHE_ENV = "NETBENCH_CACHE_DIR"


class CacheFolderError(ValueError):
    """The cache folder cannot be used (another user could write into it, or it cannot be made); one line."""


def cache_dir() -> Path:
    """``$NETBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench`` (unchecked: a name to
    show).
    """
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "netbench"


def _named(folder: Path) -> str:
    return f"${CACHE_ENV} {str(folder)!r}" if os.environ.get(CACHE_ENV) else f"cache folder {str(folder)!r}"


def checked_cache_dir(create: bool = True) -> Path:
    """The cache folder (made, mode 0700, where ``create`` and missing) once known to be safe; CacheFolderError if
    not.
    """
    folder = cache_dir()
    try:
        check_folder(folder)
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            check_folder(folder)  # also catches a folder a stranger made first
        info = folder.stat()
    except UnsafeOutput as exc:
        raise CacheFolderError(f"{_named(folder)}: {exc}") from None
    except OSError as exc:
        raise CacheFolderError(f"{_named(folder)} cannot be used: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CacheFolderError(f"{_named(folder)} is not a directory")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheFolderError(
            f"{_named(folder)} is writable by other users (netbench runs programs it keeps there): "
            f"chmod go-w it or name another folder"
        )
    return folder


def trusted_file(path: Path) -> bool:
    """True for a regular file (not a link) that this user owns and no one else may write: safe to read or run."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )
