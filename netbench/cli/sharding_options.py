"""Sharding options of `netbench run` and `worker` (FlexDeMo): checks of `--gpus-per-node`, `--intra-bw` and
`--shard-within`."""

from __future__ import annotations

from collections.abc import Mapping

from netbench import environment
from netbench.cli.errors import UserError
from netbench.units import UnitError, parse_rate


def intra_rate(text: str | None) -> float | None:
    """``--intra-bw`` in bit/s, or None (unshaped); bad input is one UserError line."""
    if text is None:
        return None
    try:
        bps = parse_rate(text)
    except UnitError as exc:
        raise UserError(f"--intra-bw: {exc}") from None
    if bps <= 0:
        raise UserError(f"--intra-bw: must be positive, got {text!r}")
    return bps


def check_workers(nodes: int, gpus_per_node: int) -> None:
    """Every worker is a process on this host: refuse more than it runs (one line naming the option)."""
    from netbench.orchestrator.config import (  # late: keeps networkx, numpy, psutil, pyroute2 off this module's import
        MAX_GPUS_PER_NODE,
        MAX_WORKERS,
    )  # late: keeps networkx, numpy, psutil, pyroute2 off this module's import

    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise UserError(f"--gpus-per-node: must be between 1 and {MAX_GPUS_PER_NODE}, got {gpus_per_node}")
    if nodes * gpus_per_node > MAX_WORKERS:
        raise UserError(
            f"--gpus-per-node: {nodes} nodes x {gpus_per_node} = {nodes * gpus_per_node} workers; "
            f"this host runs at most {MAX_WORKERS}"
        )


def local_world_size(shard_within: str, world_size: int, environ: Mapping[str, str] | None = None) -> int:
    """G under torchrun: LOCAL_WORLD_SIZE with ``--shard-within host`` (it must divide the world), else 1 (every rank
    is a node)."""

    if shard_within == "site":
        raise UserError("--shard-within site: shards an emulated run's sites (netbench run); choose node or host")
    if shard_within not in ("node", "host"):
        raise UserError("--shard-within: choose node or host")
    if shard_within == "node":
        return 1
    g = local_ranks(environ)
    if world_size % g:
        raise UserError(
            f"--shard-within host: every host needs the same --nproc-per-node; world {world_size} is not a multiple "
            f"of {g}"
        )
    return g


def local_ranks(environ: Mapping[str, str] | None = None) -> int:
    """How many ranks torchrun runs on this host (``$LOCAL_WORLD_SIZE``, 1 where unset); bad values are a UserError."""
    from netbench.orchestrator.config import MAX_WORKERS  # late: keeps networkx, numpy, psutil, pyroute2 off the import

    try:
        return int(environment.whole_number("LOCAL_WORLD_SIZE", low=1, high=MAX_WORKERS, default=1, env=environ))
    except environment.BadEnvironment as exc:
        raise UserError(str(exc)) from None


def check_emulated(shard_within: str) -> None:
    """``netbench run`` emulates its nodes on this host: a torchrun host's local ranks are the worker's to shard."""
    if shard_within == "host":
        raise UserError(
            "--shard-within host: shards the local ranks of torchrun hosts (netbench worker); choose node or site"
        )
