"""This host's calibration, measured once and cached: what a first ``run``, ``sweep`` or ``plan`` does.

The constants depend on the machine and the software that runs the collectives and codecs, so
the cache is keyed by hostname, CPU model, core count, torch and netbench versions and the
torch threads per worker. A changed key, a missing entry or an unreadable entry is measured
again (a few seconds, :func:`netbench.calibrate.measure.quick_options`) and written atomically; an
exclusive lock makes concurrent first runs measure once.

Cache folder: ``$NETBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench``; checked
before anything in it is read or written (:func:`netbench.cache.checked_cache_dir`): a folder another user could
write into is a one-line error, and an entry that is a link or not this user's counts as absent.
An explicit file (``--calibration FILE`` or ``$NETBENCH_CALIBRATION``) is used as it is.

Encode/decode costs depend on the replicator's settings (:func:`netbench.model.calibration.cost_key`):
the first measurement times every replicator at its defaults; a run, sweep or plan with other
settings (``--topk 8``, ``--rate 0.01``...) has those timed once more and added to the same cache
entry under their own keys. An explicit file is never changed: settings it lacks fall back to the
replicator's default-settings cost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from netbench.cache import CACHE_ENV, CacheFolderError, cache_dir, checked_cache_dir, trusted_file
from netbench.calibrate import measure as measuring
from netbench.calibrate.host import host_key
from netbench.declarations.registry import names
from netbench.model.calibration import (
    Calibration,
    CalibrationError,
    cost_key,
    default_path,
    read_calibration,
    save_calibration,
)
from netbench.torch_presence import torch_installed

if TYPE_CHECKING:
    from netbench.declarations.config import ReplicatorConfig

__all__ = [
    "CACHE_ENV",
    "HostCalibration",
    "host_key",
    "cache_dir",
    "cache_path",
    "cached",
    "load_calibration",
    "host_calibration",
    "missing_keys",
    "merge_costs",
]


def cache_path(key: dict[str, str] | None = None) -> Path:
    """This host's cache entry: one file per key, named by the key's hash."""
    key = key or host_key()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"calibration-{digest}.json"


def cached(key: dict[str, str] | None = None) -> Calibration | None:
    """The cached calibration for ``key`` (this host), or None when absent, unreadable, for another key, or
    missing a replicator (``netbench calibrate --replicator NAME`` measures only some)."""

    key = key or host_key()
    path = cache_path(key)
    try:
        checked_cache_dir(create=False)
    except CacheFolderError:
        return None  # missing, or another user could have written it: nothing cached to trust
    if not trusted_file(path):  # a link, or an entry another user owns or may write: not this host's measurement
        return None
    try:
        calib = read_calibration(path)
    except CalibrationError:
        return None
    complete = all(calib.measured(name) for name in names())
    return calib if calib.source == "measured" and calib.host_key == key and complete else None


def load_calibration(path: str | Path | None = None) -> Calibration:
    """The calibration at ``path`` (else ``$NETBENCH_CALIBRATION``, else this host's cache entry), or defaults when
    absent.

    Never measures (see :func:`host_calibration` for that); a broken explicit file is an error, a broken cache entry
    counts as absent.
    """
    target = Path(path).expanduser() if path else default_path()
    if target is None:
        return cached() or Calibration()
    if not target.exists():
        return Calibration()
    return read_calibration(target)


@dataclass(frozen=True)
class HostCalibration:
    """The calibration a command uses, where it lives, and whether this call measured it."""

    calibration: Calibration
    path: Path
    measured_now: bool
    origin: str  # "file" (explicit), "cache", "measured" or "defaults" (no torch to measure with)

    def identity(self) -> dict[str, str | None]:
        return {**self.calibration.identity(self.path), "origin": self.origin}


def missing_keys(calibration: Calibration, replicators: Sequence[ReplicatorConfig]) -> list[ReplicatorConfig]:
    """The configs among ``replicators`` whose cost key ``calibration`` has not measured (one per key, in order)."""
    out: dict[str, ReplicatorConfig] = {}
    for config in replicators:
        key = cost_key(config)
        if not calibration.measured(key) and key not in out:
            out[key] = config
    return list(out.values())


# how long a command waits for another's measurement of this host: the longest a measurement may take, and a margin
LOCK_WAIT_S = measuring.MeasureOptions.model_fields["timeout_s"].default + 60.0

_COST_TABLES = (
    "compression_s_per_param",
    "encode_s_per_param",
    "decode_s_per_param",
    "encode_s_per_tensor",
    "decode_s_per_tensor",
    "encode_s_per_param_large",
    "decode_s_per_param_large",
)


def merge_costs(base: Calibration, extra: Calibration) -> Calibration:
    """``base`` with ``extra``'s encode/decode tables and their notes added (``base``'s collective constants are
    kept).
    """
    update: dict[str, dict[str, float | str]] = {t: {**getattr(base, t), **getattr(extra, t)} for t in _COST_TABLES}
    update["notes"] = {**base.notes, **{k: v for k, v in extra.notes.items() if k.startswith("compression.")}}
    return base.model_copy(update=update)


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock`` (created if missing, never through a link; in the checked cache folder)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        raise CalibrationError(f"cannot open the cache's lock {str(lock)!r}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CalibrationError(f"the cache's lock {str(lock)!r} is not a regular file")
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CalibrationError(
                        f"another netbench process has been measuring this host's calibration for over "
                        f"{LOCK_WAIT_S:g} s; wait for it, or pass --calibration FILE"
                    ) from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def host_calibration(
    explicit: Path | None = None,
    on_measure: Callable[[Path], None] | None = None,
    replicators: Sequence[ReplicatorConfig] = (),
) -> HostCalibration:
    """The calibration ``run``/``sweep``/``plan`` use: ``explicit`` (must exist), else ``$NETBENCH_CALIBRATION``
    as it is (defaults when that file is absent: the user chose a file, ``netbench calibrate`` fills it),
    else this host's cache entry, measured first when missing, for another key, or corrupt.

    ``on_measure(path)`` is called before a measurement starts (to tell the user why they wait).
    ``replicators``: the settings the command will predict; a cache entry lacking one's cost key has it
    measured and added. A broken explicit file raises CalibrationError.
    """
    if explicit is not None:
        if not explicit.exists():
            raise CalibrationError(f"calibration file {str(explicit)!r} does not exist")
        return HostCalibration(read_calibration(explicit), explicit, False, "file")
    env = default_path()
    if env is not None:
        return HostCalibration(load_calibration(env), env, False, "file")
    key = host_key()
    path = cache_path(key)
    try:
        checked_cache_dir()
    except CacheFolderError as exc:
        raise CalibrationError(str(exc)) from None
    with _locked(
        path.with_name(path.name + ".lock")
    ):  # a concurrent first run waits, then reuses this one's measurement
        hit = cached(key)
        if hit is not None and not missing_keys(hit, replicators):
            return HostCalibration(hit, path, False, "cache")
        if not torch_installed():
            return HostCalibration(hit or Calibration(), path, False, "defaults")  # nothing to measure with (plan)

        if on_measure:
            on_measure(path)
        if hit is None:
            hit = measuring.measure(measuring.quick_options()).model_copy(update={"host_key": key})
        extra = missing_keys(hit, replicators)
        if extra:
            hit = merge_costs(
                hit,
                measuring.measure(
                    measuring.quick_options().model_copy(update={"schemes": (), "configs": tuple(extra)})
                ),
            )
        save_calibration(hit, path)
        return HostCalibration(hit, path, True, "measured")
