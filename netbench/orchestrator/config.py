"""Everything one `netbench run` needs, validated before anything is created."""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.emulation.spec import ClusterSpec
from netbench.replicators.config import ReplicatorConfig
from netbench.workloads.config import WorkloadConfig

DEFAULT_REPORTS = Path("reports/runs")
RENDEZVOUS_PORT = 29500


class RunConfig(BaseModel):
    """A run: the cluster, what each node trains and how it replicates, and where results go."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf or nan would pass every range check

    cluster: ClusterSpec
    replicator: ReplicatorConfig = Field(default_factory=ReplicatorConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    steps: int = Field(20, ge=1, le=100_000, description="measured optimizer steps")
    warmup_steps: int = Field(2, ge=0, le=1000, description="steps run first and left out of the summary")
    timeout_s: float | None = Field(None, gt=0, le=3600, description="collective timeout (s): a dead peer fails the run within it; "
                                    "None: from the model's slowest collective on these links (orchestrator.timeouts)")
    capture: bool = Field(True, description="capture packet headers on every switch port")
    keep_pcap: bool = Field(False, description="keep the pcap files in the run directory")
    out_dir: Path = Field(DEFAULT_REPORTS, description="parent of the run directory")
    threads: int = Field(1, ge=1, le=64, description="torch threads per worker")

    @field_validator("out_dir")
    @classmethod
    def _writable(cls, v: Path) -> Path:
        probe = v
        while not probe.exists():
            probe = probe.parent
        try:  # root passes os.access() everywhere, /proc included: try a real file instead
            if not probe.is_dir():
                raise OSError
            tempfile.TemporaryFile(dir=probe).close()
        except OSError:
            raise ValueError(f"{str(v)!r} is not a writable directory") from None
        return v
