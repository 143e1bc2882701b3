"""A user-defined workload for `netbench run --workload python:examples.my_workload:make` (and `sweep`).

netbench's own worker trains it on every node with any replicator: the factory returns the model,
an endless iterator of batches, and how a batch becomes a loss.

    netbench run --workload python:examples.my_workload:make -r dct --nodes 2 --bw 100mbit --steps 10
"""

import itertools

import torch
import torch.nn.functional as F


def make(rank: int = 0, world_size: int = 1):
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    target = torch.nn.Linear(32, 10)  # a fixed random teacher, identical on every rank (same seed)

    def batches():
        for _ in itertools.count():
            x = torch.randn(128, 32)  # the global RNG is seeded by rank: each node draws its own batches
            yield x, target(x).argmax(1).detach()

    return model, batches(), lambda m, batch: F.cross_entropy(m(batch[0]), batch[1])
