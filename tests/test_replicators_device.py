"""Replicators run wherever their tensors live, with no host round trip inside a step (CPU-only tests).

No GPU is needed: the ``meta`` device stands in for an accelerator. A meta tensor has a device
but no data, so anything that reads a value back (``.item()``, ``.tolist()``, ``.cpu()``), and
any op that mixes in a tensor created on the host (a ``torch.arange`` or generator without
``device=``), fails or shows up in the dispatch log below. The step's own ops are recorded by a
dispatch mode; torch's optimizers are left out (AdamW keeps its step counter on the host by
design, outside encode and decode).
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import names
from netbench.replicators.build import build_replicator
from netbench.replicators.comm import GroupComm, needs_host_copy
from netbench.replicators.random_subset import hashed_offsets, stream_seed

SHAPES = [(130, 70), (64,), (3, 5, 7), (), (200, 64)]  # edge tiles, a vector, a 3-D tensor, a scalar
# every periodic exchange on every step, so each code path runs
EVERY_STEP = dict(sync_every=1, params_every=1, m1_every=1, m2_every=1)


class HostOps(TorchDispatchMode):
    """Records every op that touches a tensor off ``device`` (while ``recording``)."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device, self.recording, self.seen = device, True, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.recording:
            leaves = pytree.tree_leaves((args, kwargs, out))
            if any(isinstance(t, torch.Tensor) and t.device.type != self.device for t in leaves):
                self.seen.append(str(func))
        return out


class _Paused:
    """An optimizer stepped with recording off (torch's own bookkeeping is not the codec's)."""

    def __init__(self, optimizer, mode: HostOps) -> None:
        self.optimizer, self.mode = optimizer, mode

    def step(self):
        self.mode.recording = False
        try:
            return self.optimizer.step()
        finally:
            self.mode.recording = True


def _tensors(obj, seen=None):
    """Every tensor reachable from a replicator's attributes (codecs, units, buffers, lists, dicts)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item, seen)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item, seen)
    elif type(obj).__module__.startswith("netbench.replicators"):
        for item in vars(obj).values():
            yield from _tensors(item, seen)


def _build(name: str, device: str, bucket_mb: float = 0.0, **cfg):
    params = [torch.nn.Parameter(torch.zeros(s, device=device)) for s in SHAPES]
    config = ReplicatorConfig(name=name, bucket_mb=bucket_mb, **EVERY_STEP, **cfg)
    return params, build_replicator(params, config, names=[f"layer{i}.weight" for i in range(len(SHAPES))])


@pytest.mark.parametrize("bucket_mb", [0.0, 0.001], ids=["one-bucket", "pipelined"])
@pytest.mark.parametrize("name", names())
def test_step_stays_on_the_tensors_device(name, bucket_mb):
    """On a data-less device every replicator steps without one op on a host tensor, and all its state lives there."""
    params, rep = _build(name, "meta", bucket_mb)
    mode = HostOps("meta")
    rep.optimizer = _Paused(rep.optimizer, mode)
    if hasattr(rep, "outer"):  # diloco's outer Nesterov SGD
        rep.outer = _Paused(rep.outer, mode)
    with mode:
        for _ in range(3):
            for p in params:
                p.grad = torch.zeros_like(p)
            rep.step()
    assert mode.seen == [], f"{name}: ops on host tensors inside a step: {sorted(set(mode.seen))}"
    assert all(p.device.type == "meta" and p.grad.device.type == "meta" for p in params)
    off_device = [tuple(t.shape) for t in _tensors(rep) if t.device.type != "meta"]
    assert off_device == [], f"{name} keeps host tensors: {off_device}"


@pytest.mark.parametrize("value_dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", names())
def test_step_returns_tensors_of_the_parameters_device_and_dtype(name, value_dtype):
    """On the CPU (the device CI has) gradients and parameters keep their device, dtype and shape."""
    params, rep = _build(name, "cpu", value_dtype=value_dtype, grad_dtype=value_dtype)
    torch.manual_seed(0)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn_like(p)
        rep.step()
    for p, shape in zip(params, SHAPES):
        assert (p.device.type, p.dtype, tuple(p.shape)) == ("cpu", torch.float32, shape)
        assert (p.grad.device.type, p.grad.dtype, tuple(p.grad.shape)) == ("cpu", torch.float32, shape)
        assert torch.isfinite(p.detach()).all()


def test_host_copies_only_where_gloo_serves_an_accelerator():
    assert not needs_host_copy("gloo", "cpu")
    assert needs_host_copy("gloo", "cuda")
    assert not needs_host_copy("nccl", "cuda")
    assert not needs_host_copy("cpu:gloo,cuda:nccl", "cuda")
    assert not needs_host_copy("cpu:gloo,cuda:nccl", "cpu")
    assert needs_host_copy("cpu:gloo,cuda:gloo", "cuda")
    assert not needs_host_copy("", "meta")


def test_gloo_on_cpu_tensors_runs_in_place(tmp_path):
    """CPU tensors on gloo go to the collective as they are: no staging buffer, same results."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        comm = GroupComm(dist.group.WORLD)
        x = torch.arange(6, dtype=torch.float32)
        comm.all_reduce_mean(x)
        gathered = comm.all_gather(torch.arange(4, dtype=torch.uint8))
        comm.all_reduce_mean_async(x).wait()
        assert torch.equal(x, torch.arange(6, dtype=torch.float32))
        assert torch.equal(gathered, torch.arange(4, dtype=torch.uint8).view(1, 4))
        assert comm._host == {}
        assert comm.take()[1:] == (6 * 4 * 2 + 4, 3)
    finally:
        dist.destroy_process_group()


def _splitmix_offsets(widths: list[int], seed: int, step: int) -> list[int]:
    """:func:`hashed_offsets` in plain Python integers: the specification the tensor code must meet."""
    mask = (1 << 64) - 1
    stream = stream_seed(seed, step) * 0x9E3779B97F4A7C15 & mask
    out = []
    for i, width in enumerate(widths):
        x = (i * 0x9E3779B97F4A7C15 + stream) & mask
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & mask
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & mask
        x ^= x >> 31
        out.append((x & ((1 << 62) - 1)) % width)
    return out


@pytest.mark.parametrize("seed,step", [(0, 0), (7, 3), (2**40 + 5, 2**33)])
def test_device_draw_is_splitmix_of_seed_step_and_slot(seed, step):
    """The accelerator path's draw is integer arithmetic with one exact answer, whatever the device."""
    widths = [1, 2, 3, 10, 11, 1000, 2**31 + 1] * 5
    got = hashed_offsets(torch.tensor(widths), seed, step)
    assert got.tolist() == _splitmix_offsets(widths, seed, step)


def test_device_draw_is_uniform_inside_each_stratum():
    widths = torch.full((200_000,), 10, dtype=torch.int64)
    counts = torch.bincount(hashed_offsets(widths, 3, 1), minlength=10)
    assert counts.sum() == 200_000 and counts.min() > 19_000 and counts.max() < 21_000  # 5 sigma is about 670
    assert not torch.equal(hashed_offsets(widths, 3, 1), hashed_offsets(widths, 3, 2))
    assert not torch.equal(hashed_offsets(widths, 3, 1), hashed_offsets(widths, 4, 1))
