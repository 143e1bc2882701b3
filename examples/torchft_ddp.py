"""torchft's DDP example (pytorch/torchft ``train_ddp.py``) with what this machine lacks taken out, for
`exec --torchft`.

Run it as a replica group per node, through nodes that leave and join (docs/how-to/churn.md):

    netbench exec --nodes 3 --bw 100mbit --delay 10ms --torchft --schedule-clock start --schedule churn.csv \\
        -- python3 examples/torchft_ddp.py 300

Its fault tolerance is the published example's, call for call: a gloo process group (5 s timeout), ``PGTransport``
for a joining node's heal (10 s), a ``Manager`` (``min_replica_size=1``, 30 s) whose state is the model's and
AdamW's, torchft's ``DistributedDataParallel`` and ``Optimizer``, the environment it reads (``REPLICA_GROUP_ID``,
``NUM_REPLICA_GROUPS``, ``TORCHFT_LIGHTHOUSE``, the group's ``MASTER_ADDR``/``MASTER_PORT``, ``RANK``,
``WORLD_SIZE``). What differs: CIFAR-10 through torchvision and torchdata's ``StatefulDataLoader`` become random
images of CIFAR-10's shape, per replica group; the example's 1 GB ``useless`` embedding, the profiler and the GPU
branches are left out; it stops after STEPS committed steps (argument 1, default 300) instead of 10,000.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
from torch import nn, optim
from torchft import DistributedDataParallel, Manager, Optimizer, ProcessGroupGloo
from torchft.checkpointing.pg_transport import PGTransport

BATCH = 64  # as the example's loader


class Net(nn.Module):
    """The example's network, its 1 GB embedding aside: two convolutions and three linear layers for 3x32x32 images."""

    def __init__(self) -> None:
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 6, 5),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.cnn(x), 1))


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    replica_group_id = int(os.environ.get("REPLICA_GROUP_ID", 0))
    generator = torch.Generator().manual_seed(replica_group_id)  # each group its own shard of the data

    def load_state_dict(state_dict: dict) -> None:
        m.load_state_dict(state_dict["model"])
        optimizer.load_state_dict(state_dict["optim"])

    def state_dict() -> dict:
        return {"model": m.state_dict(), "optim": optimizer.state_dict()}

    pg = ProcessGroupGloo(timeout=timedelta(seconds=5))
    transport = PGTransport(pg, timeout=timedelta(seconds=10), device="cpu")
    manager = Manager(
        pg=pg,
        min_replica_size=1,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"train_ddp_{replica_group_id}",
        timeout=timedelta(seconds=30),
        checkpoint_transport=transport,
    )
    m = DistributedDataParallel(manager, Net())
    optimizer = Optimizer(manager, optim.AdamW(m.parameters()))
    criterion = nn.CrossEntropyLoss()
    print(f"Total number of parameters: {sum(p.numel() for p in m.parameters())}", flush=True)

    while manager.current_step() < steps:
        inputs = torch.rand(BATCH, 3, 32, 32, generator=generator) * 2 - 1  # ToTensor then Normalize(0.5, 0.5)
        labels = torch.randint(0, 10, (BATCH,), generator=generator)
        optimizer.zero_grad()  # starts the quorum
        loss = criterion(m(inputs), labels)
        loss.backward()  # the gradients' all-reduce
        optimizer.step()  # steps only if the step committed
        if manager.current_step() % 20 == 0:
            print(f"[{manager.current_step()}] loss = {loss.item():.4f} participants = {manager.num_participants()}")


if __name__ == "__main__":
    main()
