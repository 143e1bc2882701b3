"""Output files a privileged netbench can write into folders a user names, without being redirected.

netbench runs as root. A folder that another user owns, or that anyone may write to without the
sticky bit, lets that user plant a symlink where netbench is about to write (``steps.csv ->
/etc/shadow``), and a plain ``open(path, "w")`` would follow it. So output folders are checked
first (:func:`check_folder`, refused with :class:`UnsafeOutput`), and every file is written to a
fresh temporary name that no one can pre-create (``mkstemp``: O_CREAT|O_EXCL) and renamed into
place: a rename replaces a planted symlink instead of writing through it, and a reader (or an
interrupted run) sees either the old file or the whole new one, never half of it.

Reading what others wrote has its own module, :mod:`netbench.untrusted`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from netbench import environment, untrusted

# What netbench accepts as a name that becomes a file or folder name (sweep names, run ids): no
# separators, no leading dot (so never "." or ".."), at most 64 characters.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_UID = 2**32 - 2  # the kernel's largest uid ((uid_t) -1 means "no user")

__all__ = [
    "NAME_PATTERN",
    "UnsafeOutput",
    "check_folder",
    "make_folder",
    "write_text",
    "write_bytes",
    "replace_from",
    "create_new",
]


class UnsafeOutput(ValueError):
    """An output folder another user could redirect netbench's writes from."""


def _in_user_namespace() -> bool:
    """True inside a user namespace that maps only part of the host's uids (netbench's rootless one)."""
    try:
        rows = [line.split() for line in Path("/proc/self/uid_map").read_text().splitlines()]
    except OSError:
        return False
    return rows != [["0", "0", "4294967295"]]


def _overflow_uid() -> int:
    try:
        return int(Path("/proc/sys/kernel/overflowuid").read_text())
    except (OSError, ValueError):
        return 65534


def _trusted_owners() -> set[int]:
    """root, the invoking user, and under sudo the user who ran sudo.

    Rootless (inside the user namespace netbench made, where the caller is uid 0), every host
    owner but the caller shows as the overflow uid: host root's /tmp and / included. There
    netbench has no more power over those folders than the unprivileged caller, so the kernel
    already keeps it out of what the caller may not write; the world-writable check still applies.
    """
    owners = {0, os.getuid(), os.geteuid()}
    try:
        sudo_uid = environment.whole_number("SUDO_UID", low=0, high=MAX_UID)
    except environment.BadEnvironment:
        sudo_uid = None  # not a user sudo could have been run by: no one more is trusted
    if sudo_uid is not None:
        owners.add(sudo_uid)
    if _in_user_namespace():
        owners.add(_overflow_uid())
    return owners


def _problem(path: Path) -> str | None:
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid not in _trusted_owners():
        return f"is owned by uid {info.st_uid}, not by you or root"
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        return "is writable by every user (and has no sticky bit)"
    return None


def check_folder(folder: str | Path) -> None:
    """Raise UnsafeOutput unless ``folder`` and every existing folder above it are safe to write into.

    Safe: owned by root or the invoking user, and not world-writable unless sticky (as /tmp).
    The folder may not exist yet; its existing ancestors are what a stranger could swap.
    """
    resolved = Path(os.path.realpath(Path(folder).expanduser()))
    for part in [resolved, *resolved.parents]:
        if not os.path.lexists(part):
            continue
        why = _problem(part)
        if why:
            where = "" if part == resolved else f" (its parent {str(part)!r})"
            raise UnsafeOutput(f"output folder {str(folder)!r}{where} {why}: refusing to write there")


def make_folder(folder: str | Path, exist_ok: bool = True) -> Path:
    """Create ``folder`` (and parents), then check it: also catches a folder a stranger created first, or a link
    planted where netbench names a folder (``OUT/RUNID.partial``); a link the command line names is the user's own.
    """
    path = Path(folder)
    check_folder(path)
    path.mkdir(parents=True, exist_ok=exist_ok)
    if path.is_symlink() and not untrusted.named(path):
        raise UnsafeOutput(f"output folder {str(folder)!r} is a symbolic link: refusing to write through it")
    check_folder(path)
    return path


@contextlib.contextmanager
def replace_from(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Yield a fresh temporary file beside ``path``; on success it atomically becomes ``path``.

    On any exception (Ctrl-C included) the temporary file is removed and ``path`` is untouched. A folder at ``path``
    is :class:`UnsafeOutput` before anything is written.
    """
    target = Path(path)
    if os.path.isdir(target) and not os.path.islink(target):  # a rename onto a folder fails only after the writing
        raise UnsafeOutput(f"output file {str(path)!r} is a folder: refusing to write there")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Atomically replace ``path`` with ``text`` (never through a symlink planted at ``path``)."""
    with replace_from(path) as fh:
        fh.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    with replace_from(path, "wb") as fh:
        fh.write(data)


def create_new(path: str | Path, flags: int = os.O_WRONLY, mode: int = 0o644) -> int:
    """Open a file that must not exist yet (O_EXCL), never following a symlink; returns the fd."""
    return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def append_own(path: str | Path) -> int:
    """Open an existing regular file of this user's, with one link, to append to it (never through a symlink): a
    record file a program that started again goes on writing. OSError otherwise; returns the fd."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise OSError(f"{Path(path).name}: not a record file of this user's to append to")
    return fd
