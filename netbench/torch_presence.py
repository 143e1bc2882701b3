"""Whether torch (or torchft) can be imported, found without importing it (about 2 s): what plan and the training
commands ask before they decide to measure or to run."""

from __future__ import annotations

import importlib.util

TORCHFT_INSTALL = "pip install 'netbench[churn]', which pins torchft"  # how a user gets torchft


def installed(package: str) -> bool:
    """True when ``import package`` would find it; a finder that refuses it counts as absent."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def torch_installed() -> bool:
    """True when ``import torch`` would find a package (:func:`installed`)."""
    return installed("torch")
