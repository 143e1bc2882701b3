"""A plain torch.distributed program: all-reduce a 10 MB tensor 5 times (no netbench needed to run it).

Under `netbench exec` it finds RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment
(init_method env://). The three netbench lines are optional: they add per-step records, and the
declared payload puts the model's prediction beside the measurement.

    netbench exec --nodes 2 --bw 100mbit -- python examples/allreduce.py
"""

import torch
import torch.distributed as dist

import netbench

NUMEL = 2_500_000  # fp32: 10 MB

dist.init_process_group("gloo")  # env://: rank, world size and rendezvous from the environment
tensor = torch.full((NUMEL,), float(dist.get_rank() + 1))
netbench.declare_payload(
    {"tensor": (NUMEL,)}, replicator="full"
)  # an all-reduce of fp32 tensors, like the full replicator
for _ in range(5):
    with netbench.step(), netbench.phase("comm"):
        dist.all_reduce(tensor)
expected = sum(range(1, dist.get_world_size() + 1)) * dist.get_world_size() ** 4
assert torch.all(tensor == expected), f"rank {dist.get_rank()}: got {tensor[0].item()}, expected {expected}"
print(f"rank {dist.get_rank()}: 5 all-reduces of {NUMEL * 4 / 1e6:.0f} MB done")
dist.destroy_process_group()
