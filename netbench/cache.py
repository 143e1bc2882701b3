"""Where netbench keeps what it measures or builds once per host: calibrations, the native delay line.

``$NETBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir"]

CACHE_ENV = "NETBENCH_CACHE_DIR"


def cache_dir() -> Path:
    """``$NETBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "netbench"
