"""FlexDeMo options of `netbench run` and `worker`: `--shard-in-host`; checks of `--gpus-per-node` and `--intra-bw`."""

from __future__ import annotations

import typer

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
    from netbench.orchestrator.config import MAX_GPUS_PER_NODE, MAX_WORKERS

    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise UserError(f"--gpus-per-node: must be between 1 and {MAX_GPUS_PER_NODE}, got {gpus_per_node}")
    if nodes * gpus_per_node > MAX_WORKERS:
        raise UserError(
            f"--gpus-per-node: {nodes} nodes x {gpus_per_node} = {nodes * gpus_per_node} workers; "
            f"this host runs at most {MAX_WORKERS}"
        )


ShardInHostOpt = typer.Option(
    False,
    "--shard-in-host",
    help="FlexDeMo on real hosts: the local ranks of a host (torchrun "
    "--nproc-per-node G) shard the model and replicate between hosts; default: every rank is a node.",
)


def local_world_size(shard_in_host: bool, world_size: int, environ: dict | None = None) -> int:
    """G under torchrun: LOCAL_WORLD_SIZE with --shard-in-host (it must divide the world), else 1."""
    import os

    if not shard_in_host:
        return 1
    env = os.environ if environ is None else environ
    try:
        g = int(env.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        raise UserError(f"--shard-in-host: LOCAL_WORLD_SIZE is not a number: {env.get('LOCAL_WORLD_SIZE')!r}") from None
    if g < 1 or world_size % g:
        raise UserError(
            f"--shard-in-host: every host needs the same --nproc-per-node; world {world_size} is not a multiple of {g}"
        )
    return g
