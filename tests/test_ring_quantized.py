"""The quantized ring all-reduce across real gloo ranks: its sum against the exact and the gathered sums, agreement,
the bytes it hands over, and its chunking."""

from __future__ import annotations

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.quant_wire import quantized_bytes, ring_chunks, ring_quantized_bytes
from netbench.replicators.base import StepTimer
from netbench.replicators.comm import GroupComm
from netbench.replicators.outer_mean import OuterMean
from netbench.replicators.quantize import Quantizer
from netbench.replicators.ring_quantized import QuantizedRing, error_bound

NUMEL = 10_007  # not a multiple of any world size or block
BLOCK = 64
SLACK = 1e-4  # fp32 rounding of (c + 1/2) step - A can put a level a hair past the bound


def _values(rank: int, round_: int = 0) -> torch.Tensor:
    """Different values on every rank, a few blocks far larger than the rest (the scales must follow them)."""
    gen = torch.Generator().manual_seed(100 * rank + round_ + 1)
    values = torch.randn(NUMEL, generator=gen) * 1e-3
    values[:BLOCK] *= 50
    return values


def _sums(rank: int, world: int, bits: int) -> dict:
    """Rank body: the ring's sum of two rounds, the gathered sum and the exact sum, and the bytes booked."""
    import torch.distributed as dist

    comm = GroupComm()
    ring = QuantizedRing(comm, NUMEL, bits, BLOCK, torch.device("cpu"))
    timer = StepTimer()
    out = {"ring": [], "exact": [], "gathered": [], "absmax": []}
    for round_ in range(2):  # the buffers are reused: a second round must not see the first
        values = _values(rank, round_)
        ring.start(values, timer)
        out["ring"].append(ring.finish(torch.zeros(NUMEL), timer).clone())
        exact = values.clone()
        dist.all_reduce(exact)
        out["exact"].append(exact)
        q = Quantizer(NUMEL, bits, BLOCK)
        rows = torch.zeros((world, q.nbytes), dtype=torch.uint8)
        dist.all_gather_into_tensor(rows.view(-1), q.encode(values, torch.zeros(q.nbytes, dtype=torch.uint8)))
        out["gathered"].append(sum(q.decode(row, torch.zeros(NUMEL)) for row in rows))
        out["absmax"].append(torch.stack([_values(r, round_).abs() for r in range(world)]))  # every rank's values
    out["booked"] = comm.take()[1:]
    return out


def _ring_bound(absmax: torch.Tensor, world: int, bits: int) -> torch.Tensor:
    """:func:`error_bound` for every value from every rank's magnitudes (``absmax``, world x numel): per chunk c, per
    block of that chunk (the blocks restart at every chunk), ranks in ring order from rank c."""
    bound = torch.zeros(NUMEL)
    start = 0
    for c, size in enumerate(ring_chunks(NUMEL, world)):
        part = absmax[:, start : start + size]
        blocks = -(-size // BLOCK)
        padded = torch.zeros((world, blocks * BLOCK))
        padded[:, :size] = part
        per_block = padded.view(world, blocks, BLOCK).amax(dim=2)
        order = [(c + k) % world for k in range(world)]
        chunk_bound = error_bound(per_block[order], bits).repeat_interleave(BLOCK)[:size]
        bound[start : start + size] = chunk_bound
        start += size
    return bound


def _gather_bound(absmax: torch.Tensor, bits: int) -> torch.Tensor:
    """Half a level per rank: the gathered sum's bound, on the blocks of the whole buffer."""
    blocks = -(-NUMEL // BLOCK)
    padded = torch.zeros((absmax.shape[0], blocks * BLOCK))
    padded[:, :NUMEL] = absmax
    per_block = padded.view(absmax.shape[0], blocks, BLOCK).amax(dim=2)
    return (per_block.sum(dim=0) * 2.0**-bits).repeat_interleave(BLOCK)[:NUMEL]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_at_8_bits_the_ring_is_within_its_bound_of_the_exact_sum_and_agrees_with_the_gathered_sum(world):
    ranks = run_ranks(_sums, world, 8, timeout=60)
    for round_ in range(2):
        ring, exact, gathered = (ranks[0][k][round_] for k in ("ring", "exact", "gathered"))
        for other in ranks[1:]:
            assert torch.equal(other["ring"][round_], ring)  # every rank decodes the owners' same bytes
        absmax = ranks[0]["absmax"][round_]
        ring_bound = _ring_bound(absmax, world, 8)
        assert torch.all((ring - exact).abs() <= ring_bound * (1 + SLACK))
        both = ring_bound + _gather_bound(absmax, 8)  # the ring quantizes partial sums, the gather each rank's values
        assert torch.all((ring - gathered).abs() <= both * (1 + SLACK))
        assert (ring - exact).norm() / exact.norm() < 0.02


def test_the_bound_is_not_loose_by_orders_of_magnitude():
    ranks = run_ranks(_sums, 4, 4, timeout=60)
    ring, exact = ranks[0]["ring"][0], ranks[0]["exact"][0]
    bound = _ring_bound(ranks[0]["absmax"][0], 4, 4)
    assert torch.all((ring - exact).abs() <= bound * (1 + SLACK))
    assert float(((ring - exact).abs() / bound).max()) > 0.2


def test_each_sum_books_the_declared_buffer_once():
    ranks = run_ranks(_sums, 3, 8, timeout=60)
    for rank in ranks:
        assert rank["booked"] == (2 * ring_quantized_bytes(NUMEL, 8, BLOCK, 3), 2)


def _means(rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank body: OuterMean's quantized mean, started and finished around other work, and the exact mean."""
    import torch.distributed as dist

    mean = OuterMean(GroupComm(), NUMEL, "fp32", 8, BLOCK, torch.device("cpu"))
    timer = StepTimer()
    values = _values(rank)
    mean.start(values, timer)
    torch.randn(1000, 1000).matmul(torch.randn(1000, 100))  # training on while the ring travels
    got = mean.finish(timer).clone()
    exact = values.clone()
    dist.all_reduce(exact)
    return got, exact / world


def test_an_outer_mean_travels_the_ring_while_the_caller_works_on():
    ranks = run_ranks(_means, 3, timeout=60)
    assert torch.equal(ranks[0][0], ranks[1][0]) and torch.equal(ranks[0][0], ranks[2][0])
    got, exact = ranks[0]
    assert (got - exact).norm() / exact.norm() < 0.02


def test_one_rank_quantizes_once_and_books_its_buffer():
    comm = GroupComm()
    ring = QuantizedRing(comm, NUMEL, 8, BLOCK, torch.device("cpu"))
    values = _values(0)
    ring.start(values, StepTimer())
    got = ring.finish(torch.zeros(NUMEL), StepTimer())
    q = Quantizer(NUMEL, 8, BLOCK)
    assert torch.equal(got, q.decode(q.encode(values, torch.zeros(q.nbytes, dtype=torch.uint8)), torch.zeros(NUMEL)))
    assert comm.take()[1:] == (quantized_bytes(NUMEL, 8, BLOCK), 1)


def test_a_second_start_before_the_finish_is_refused():
    ring = QuantizedRing(GroupComm(), 10, 8, 4, torch.device("cpu"))
    ring.start(torch.ones(10), StepTimer())
    with pytest.raises(RuntimeError, match="already in flight"):
        ring.start(torch.ones(10), StepTimer())
    ring.finish(torch.zeros(10), StepTimer())


@pytest.mark.parametrize("numel, world", [(10, 3), (7, 7), (3, 4), (1_000_003, 14)])
def test_the_chunks_cover_the_values_and_differ_by_at_most_one(numel, world):
    sizes = ring_chunks(numel, world)
    assert len(sizes) == world and sum(sizes) == numel
    assert max(sizes) - min(sizes) <= 1


def test_each_node_sends_two_n_minus_one_over_n_of_the_buffer_on_average():
    """Rank r sends every chunk but r + 1 in the reduce-scatter and every chunk but r + 2 in the all-gather."""
    world, bits = 5, 4
    per_chunk = [quantized_bytes(n, bits, BLOCK) for n in ring_chunks(NUMEL, world)]
    sent = [2 * sum(per_chunk) - per_chunk[(r + 1) % world] - per_chunk[(r + 2) % world] for r in range(world)]
    total = ring_quantized_bytes(NUMEL, bits, BLOCK, world)
    assert sum(sent) / world == pytest.approx(2 * (world - 1) / world * total)
    assert total - quantized_bytes(NUMEL, bits, BLOCK) <= world * 5  # at most a scale and a byte more per chunk


def _subgroup_sums(rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank body: ranks {0, 2} and {1, 3} each sum over their own group (as sharded nodes' replication groups do)."""
    import torch.distributed as dist

    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    comm = GroupComm(groups[rank % 2])
    ring = QuantizedRing(comm, NUMEL, 8, BLOCK, torch.device("cpu"))
    values = _values(rank)
    ring.start(values, StepTimer())
    got = ring.finish(torch.zeros(NUMEL), StepTimer()).clone()
    partner = _values((rank + 2) % 4)
    return got, values + partner


def test_a_ring_over_a_subgroup_addresses_its_members_by_their_global_ranks():
    ranks = run_ranks(_subgroup_sums, 4, timeout=60)
    for r in range(4):
        got, exact = ranks[r]
        assert torch.equal(got, ranks[(r + 2) % 4][0])
        assert (got - exact).norm() / exact.norm() < 0.02


def test_a_quantized_full_step_refuses_buckets_in_one_line(tmp_path):
    import subprocess
    import sys

    from pydantic import ValidationError

    from netbench.declarations.config import ReplicatorConfig

    with pytest.raises(ValidationError, match="bucket_mb 0"):
        ReplicatorConfig(name="full", quant_bits=8, bucket_mb=4)
    ReplicatorConfig(name="dct", quant_bits=8, bucket_mb=4)  # settings another replicator ignores are not checked
    args = ["run", "-n", "2", "-r", "full", "--quant-bits", "8", "--bucket-mb", "4", "--out", str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "bucket_mb" in done.stderr
    assert not any(tmp_path.iterdir())
