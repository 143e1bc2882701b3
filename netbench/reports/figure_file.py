"""Writing a matplotlib figure as a PNG the way every netbench figure is written: safely, as root."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt  # noqa: E402

from netbench import safe_files  # noqa: E402

DPI = 110


def save(fig, path: Path) -> Path:
    """Draw ``fig`` into memory, then write it under a fresh name renamed over ``path`` (never through a link planted
    there).
    """
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    safe_files.write_bytes(path, buffer.getvalue())
    return path
