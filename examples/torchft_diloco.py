"""torchft's DiLoCo example (pytorch/torchft ``train_diloco.py``) with what this machine lacks taken out, for
`exec --torchft`.

Run it as a replica group per node, through nodes that leave and join (docs/how-to/churn.md):

    netbench exec --nodes 3 --bw 100mbit --delay 10ms --torchft --schedule-clock start --schedule churn.csv \\
        -- python3 examples/torchft_diloco.py 60

Its fault tolerance is the published example's, call for call: a gloo process group (10 s timeout), ``HTTPTransport``
for a joining node's heal (10 s, unchunked), a ``Manager`` (``use_async_quorum=False``, ``min_replica_size=1``,
30 s) whose state is the model's, AdamW's (inner) and Nesterov SGD's (outer), torchft's ``DiLoCo`` over the whole
model syncing every 20 steps, the environment it reads (``REPLICA_GROUP_ID``, ``TORCHFT_LIGHTHOUSE``, the group's
``MASTER_ADDR``/``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``). What differs: no TensorBoard writer (this copy needs torchft
alone), no torchdata import (the example imports ``StatefulDataLoader`` and never uses it), the model's 500 MB
``useless`` embedding, the profiler, the pipeline split (used only with ``USE_STREAMING``) and the GPU branches left
out, the loader in the main process (``num_workers=0``, not 2: three nodes share two cores), and it stops after SYNCS
outer syncs (argument 1, default 15, as the example's ``current_step() >= 15``).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
from torch import nn
from torchft import Manager, ProcessGroupGloo
from torchft.checkpointing.http_transport import HTTPTransport
from torchft.local_sgd import DiLoCo

D_HID, LAYERS, CLASSES, BATCH, SYNC_EVERY = 128, 2, 10, 64, 20  # as the example


class DummyDataset(torch.utils.data.Dataset):
    """The example's: random feature vectors and labels."""

    def __init__(self, size: int = 10000, feature_dim: int = D_HID, num_classes: int = CLASSES) -> None:
        self.size, self.feature_dim, self.num_classes = size, feature_dim, num_classes

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, int]:
        return torch.rand(self.feature_dim), int(torch.randint(0, self.num_classes, (1,)).item())


class MLPModule(nn.Module):
    """The example's layer, its 500 MB embedding aside."""

    def __init__(self, d_hid: int) -> None:
        super().__init__()
        self.net1, self.relu, self.net2 = nn.Linear(d_hid, d_hid), nn.ReLU(), nn.Linear(d_hid, d_hid)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net2(self.relu(self.net1(x)))


class MultiMLP(nn.Module):
    """The example's model: ``n_layers`` MLP layers and a classifier."""

    def __init__(self, d_hid: int = D_HID, n_layers: int = LAYERS, num_classes: int = CLASSES) -> None:
        super().__init__()
        self.layers = nn.ModuleList([MLPModule(d_hid) for _ in range(n_layers)])
        self.classifier = nn.Linear(d_hid, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x)


def main() -> None:
    syncs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    replica_group_id = int(os.environ.get("REPLICA_GROUP_ID", 0))

    def load_state_dict(state_dict: dict) -> None:
        m.load_state_dict(state_dict["model"])
        inner_optimizer.load_state_dict(state_dict["inner_optim"])
        outer_optimizer.load_state_dict(state_dict["outer_optim"])

    def state_dict() -> dict:
        return {
            "model": m.state_dict(),
            "inner_optim": inner_optimizer.state_dict(),
            "outer_optim": outer_optimizer.state_dict(),
        }

    pg = ProcessGroupGloo(timeout=timedelta(seconds=10))
    transport = HTTPTransport(timeout=timedelta(seconds=10), num_chunks=0)
    manager = Manager(
        pg=pg,
        use_async_quorum=False,
        min_replica_size=1,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"train_diloco_{replica_group_id}",
        timeout=timedelta(seconds=30),
        checkpoint_transport=transport,
    )
    m = MultiMLP()
    trainloader = torch.utils.data.DataLoader(DummyDataset(), batch_size=BATCH, num_workers=0, shuffle=True)
    inner_optimizer = torch.optim.AdamW(m.parameters(), lr=4e-4, weight_decay=0.1, betas=(0.9, 0.95))
    outer_optimizer = torch.optim.SGD(m.parameters(), lr=0.7, momentum=0.9, nesterov=True)
    criterion = nn.CrossEntropyLoss()
    print(f"Total number of parameters: {sum(p.numel() for p in m.parameters())}", flush=True)

    with DiLoCo(
        manager, [m], inner_optimizer, outer_optimizer, backup_device=torch.device("cpu"), sync_every=SYNC_EVERY
    ):
        while True:
            for inputs, labels in trainloader:
                inner_optimizer.zero_grad()
                loss = criterion(m(inputs), labels)
                loss.backward()
                inner_optimizer.step()  # every SYNC_EVERY steps, DiLoCo's outer sync
                if manager.current_step() >= syncs:
                    print(f"[{manager.current_step()}] loss = {loss.item():.4f}", flush=True)
                    return


if __name__ == "__main__":
    main()
