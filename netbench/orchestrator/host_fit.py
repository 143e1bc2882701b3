"""Whether this host can hold a run: its memory and a writable, safe ``out_dir``.

Kept out of :class:`~netbench.orchestrator.config.RunConfig`'s validation, which looks at the values
only: a stored run's config must read back on any host. A run checks these when it is prepared,
before anything is created (`netbench run` and friends check them earlier still, beside their
other input checks, so a refusal is one line and exit code 2).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import psutil

from netbench import environment, safe_files
from netbench.orchestrator.config import BYTES_PER_PARAM, RunConfig

__all__ = ["HostUnfit", "check_host", "check_memory", "check_out_dir"]


class HostUnfit(ValueError):
    """This host cannot run the config: ``field`` is the config field at fault, ``problem`` what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def named(self, names: Mapping[str, str]) -> str:
        """The one-line error, the field spelled as the option the user typed (``--out``) where ``names`` knows it."""
        return f"{names.get(self.field, self.field)}: {self.problem}"


def check_out_dir(out_dir: Path) -> None:
    """HostUnfit unless ``out_dir`` (or its nearest existing parent) is a directory root can write a file in,
    and safe to write under (:func:`netbench.safe_files.check_folder`)."""
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    try:  # root passes os.access() everywhere, /proc included: try a real file instead
        if not probe.is_dir():
            raise OSError
        tempfile.TemporaryFile(dir=probe).close()
    except OSError:
        raise HostUnfit("out_dir", f"{str(out_dir)!r} is not a writable directory") from None
    try:
        safe_files.check_folder(out_dir)
    except safe_files.UnsafeOutput as exc:
        raise HostUnfit("out_dir", str(exc)) from None


def check_memory(config: RunConfig, environ: Mapping[str, str] | None = None) -> None:
    """HostUnfit unless every worker on this host can hold the workload: refuse before a cluster is built, not
    when a worker is OOM-killed. Under torchrun only ``$LOCAL_WORLD_SIZE`` of the workers run here."""
    workers = config.cluster.nodes * config.gpus_per_node
    try:
        here = int(environment.whole_number("LOCAL_WORLD_SIZE", low=1, high=workers, default=workers, env=environ))
    except environment.BadEnvironment:
        here = workers  # a malformed value is torchrun's to refuse; count every worker
    params = config.workload.param_count()
    need = params * BYTES_PER_PARAM * here
    have = psutil.virtual_memory().total
    if need > have:
        raise HostUnfit(
            "workload",
            f"{params:.3g} parameters on {here} workers need about {need / 2**30:.0f} GiB of memory; "
            f"this host has {have / 2**30:.0f} GiB",
        )


def check_host(config: RunConfig, environ: Mapping[str, str] | None = None) -> None:
    """Every check of this host against ``config`` (HostUnfit, the first problem found)."""
    check_out_dir(config.out_dir)
    check_memory(config, environ)
