"""The emulated cluster's errors: shared by the cluster and its impairment engines (cluster.py re-exports them)."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The cluster could not be built; everything created so far has been removed."""


class DelayLineDied(ClusterError):
    """The delay line exited while the cluster was up: its links drop every packet (no --queue-bypass)."""
