"""Element types by the names options and configs use (``fp32``, ``bf16``, ``int16``...): bytes each, and torch's dtype.

Declared once for both sides of the wire: the model counts payload bytes with :data:`DTYPE_BYTES`
without importing torch (``plan`` runs anywhere), and the replicators allocate and send the torch
dtypes :func:`torch_dtypes` looks up in the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPE_BYTES", "torch_dtypes"]

# name: (torch's attribute for it, bytes per element)
_DTYPES: dict[str, tuple[str, int]] = {
    "fp32": ("float32", 4),
    "bf16": ("bfloat16", 2),
    "fp16": ("float16", 2),
    "int16": ("int16", 2),
    "int32": ("int32", 4),
    "int64": ("int64", 8),
}
DTYPE_BYTES: dict[str, int] = {name: size for name, (_, size) in _DTYPES.items()}


def torch_dtypes(*names: str) -> dict[str, torch.dtype]:
    """``{name: torch dtype}`` for ``names`` (torch is imported here, on first use)."""
    import torch  # late: keeps torch off this module's import

    return {name: getattr(torch, _DTYPES[name][0]) for name in names}
