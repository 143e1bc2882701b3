"""Your own model and loop, synchronised by a netbench replicator, measured per step under `netbench exec`.

netbench exec --nodes 2 --bw 100mbit -- python examples/train_replicator.py dct
"""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import netbench
from netbench.declarations.config import ReplicatorConfig
from netbench.replicators.build import build_replicator

dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment
torch.manual_seed(0)  # identical initial weights on every node
model = torch.nn.Sequential(
    torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
)
replicator = build_replicator(
    list(model.parameters()), ReplicatorConfig(name=sys.argv[1] if len(sys.argv) > 1 else "dct")
)
data = torch.Generator().manual_seed(dist.get_rank())  # each node its own batches
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10):
    with netbench.step() as step:  # records this step's time and bytes (a no-op outside netbench exec)
        x = torch.randn(256, 32, generator=data)
        loss = F.cross_entropy(model(x), (x[:, :10] > 0).sum(1) % 10)
        model.zero_grad()
        loss.backward()
        replicator.step()  # synchronise the gradients across nodes and apply them; reports its phases and payload
        if step:
            step.loss = loss.item()
dist.destroy_process_group()
