"""The accelerators netbench plans for, as data: one table each in ``data/accelerators.toml``, every figure sourced.

A profile holds what the planner needs from a datasheet: dense bf16 tensor throughput (compute time from a
model's FLOPs), HBM bandwidth (a codec's time where no measured profile exists), memory (whether a replica fits)
and the intra-node link per GPU (NVLink, PCIe, Infinity Fabric: the collectives' intra-node bandwidth; on an
NVSwitch, NCCL's NVLS algorithms). Adding
one is adding a table; ``tests/test_model_accelerators.py`` checks every table names its source.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Accelerator", "accelerators", "accelerator", "NCCL_GENERATIONS"]

# The NCCL tuning tables are indexed by GPU generation (src/graph/tuning.cc: Volta, Ampere, Hopper, Blackwell);
# Ada (sm_89) falls in NCCL's Ampere row; AMD's RCCL keeps NCCL's cost model, and CDNA3 is given Hopper's row.
NCCL_GENERATIONS = {"volta": 0, "ampere": 1, "ada": 1, "hopper": 2, "blackwell": 3, "cdna3": 2}


class Accelerator(BaseModel):
    """One accelerator's datasheet figures (SI units), with the page they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    label: str
    bf16_flops: float = Field(gt=0, description="dense bf16 tensor throughput, FLOP/s")
    hbm_Bps: float = Field(gt=0, description="device memory bandwidth, bytes/s")
    memory_bytes: float = Field(gt=0, description="device memory, bytes")
    intra_link: Literal["nvlink", "pcie", "infinity-fabric"]
    intra_Bps: float = Field(gt=0, description="intra-node link per GPU, bytes/s in one direction")
    nvswitch: bool = Field(False, description="the node's GPUs share an NVSwitch (NVLS where the generation has it)")
    generation: str
    source: str = Field(min_length=8, description="the public page every figure comes from")
    note: str = ""

    @property
    def nccl_generation(self) -> int:
        """The row of NCCL's per-generation tuning tables this accelerator uses."""
        return NCCL_GENERATIONS[self.generation]


def _from_table(name: str, table: dict) -> Accelerator:
    return Accelerator(
        name=name,
        label=table["label"],
        bf16_flops=float(table["bf16_dense_tflops"]) * 1e12,
        hbm_Bps=float(table["hbm_tb_per_s"]) * 1e12,
        memory_bytes=float(table["memory_gb"]) * 1e9,
        intra_link=table["intra_link"],
        intra_Bps=float(table["intra_gb_per_s"]) * 1e9,
        nvswitch=bool(table.get("nvswitch", False)),
        generation=table["generation"],
        source=table["source"],
        note=table.get("note", ""),
    )


@lru_cache(maxsize=1)
def accelerators() -> dict[str, Accelerator]:
    """Every declared accelerator by name, in the data file's order."""
    text = resources.files("netbench.model").joinpath("data/accelerators.toml").read_text(encoding="utf-8")
    return {name: _from_table(name, table) for name, table in tomllib.loads(text).items()}


def accelerator(name: str) -> Accelerator:
    """The accelerator called ``name``; ValueError naming the choices otherwise."""
    found = accelerators().get(name.strip().lower())
    if found is None:
        raise ValueError(f"unknown accelerator {name!r} (choose from {', '.join(accelerators())})")
    return found
