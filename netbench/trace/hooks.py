"""What a launcher calls: start the TCP samplers with the workers, write trace.json once the run directory is written.

A trace never fails a run: a run whose trace cannot be built keeps every file it measured and
says why on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from netbench.trace.sampling import NodeLike, TcpSampling
from netbench.trace.tcp_sampler import DEFAULT_INTERVAL_S


def start_sampling(
    enabled: bool, nodes: Sequence[NodeLike], run_dir: Path, dilation: float = 1.0
) -> TcpSampling | None:
    """The TCP sampler of every node (None with --no-trace), sampling as often per emulated second at any
    ``dilation``."""
    return TcpSampling(nodes, run_dir, DEFAULT_INTERVAL_S * dilation) if enabled else None


def stop_sampling(sampling: TcpSampling | None) -> None:
    if sampling is not None:
        sampling.stop()


def write(
    enabled: bool,
    run_dir: Path,
    node_of_rank: Mapping[int, int],
    pcaps: Mapping[int, Path],
    addresses: Mapping[int, str],
) -> Path | None:
    """trace.json in ``run_dir`` (None with --no-trace, or when it could not be built: the reason goes to stderr).

    A run without a single step has no trace and nothing to say about it: why it has none is its status's business.
    """
    if not enabled:
        return None
    from netbench.trace.build import NoSteps, write_trace  # late: scapy and the readers: only once the run is over

    try:
        return write_trace(run_dir, node_of_rank, pcaps, addresses)
    except NoSteps:
        return None
    except Exception as exc:  # noqa: BLE001 - the run's own results stand without a trace
        print(f"netbench: no trace.json: {exc}", file=sys.stderr)
        return None
