"""Whether torch can be imported, found without importing it (about 2 s): what plan and the training commands ask
before they decide to measure or to run."""

from __future__ import annotations

import importlib.util


def torch_installed() -> bool:
    """True when ``import torch`` would find a package; a finder that refuses torch counts as absent."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False
