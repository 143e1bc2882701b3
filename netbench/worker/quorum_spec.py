"""What a worker that trains through churn needs to find its peers (torch-free: the orchestrator writes it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["QuorumSpec", "QUORUM_REPLICATORS"]

QUORUM_REPLICATORS = ("full", "diloco")  # the replicators that train on with the nodes present (torchft)


class QuorumSpec(BaseModel):
    """One node's place in a training whose nodes may leave and join: its replica group, its lighthouse."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lighthouse: str = Field(..., min_length=1, description="the lighthouse's URL (http://address:port)")
    node: int = Field(..., ge=0, description="the node's index: its replica group's id")
    address: str = Field(
        ..., min_length=1, description="the node's address: its group's store and the address its peers reach it at"
    )
    store_port: int = Field(..., ge=1, le=65535, description="the port of the node's own group store")
    min_replicas: int = Field(2, ge=2, description="the fewest nodes a step's quorum may hold")
    first_step: int = Field(
        0, ge=0, description="the number of the worker's first step: after the steps the node's earlier workers ran"
    )
    joining: bool = Field(
        False,
        description="the node joins a run in progress: it asks for the next quorum at once (healed in it), rather "
        "than training a DiLoCo window alone first",
    )
    exchange_timeout_s: float = Field(
        ...,
        gt=0.0,
        description="how long one of torchft's waits on peers may take (a collective, the process group's "
        "configuration, a heal): a peer that left is found out by it where no connection of its was reset",
    )
    quorum_lost_s: float = Field(
        ..., gt=0.0, description="no committed step for this long: the quorum is lost and the worker fails"
    )
