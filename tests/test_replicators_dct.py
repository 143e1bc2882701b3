"""The DCT (DeMo) replicator's pieces in one process: transform, selection, momentum, wire format, tiling."""

from __future__ import annotations

import math

import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.declarations.tiling import TilePlan, matrix_shape
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator
from netbench.replicators.dct_codec import DCTCodec, dct_basis
from netbench.replicators.topk import topk_indices
from netbench.replicators.wire import WireLayout, index_dtype_for

SHAPES = [(13, 7), (70, 9), (5,), (3, 2), (16, 16), (4, 3, 5), (1, 40), (), (24, 32)]


def _grads(shapes, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen) for s in shapes]


def _replicator(shapes, **cfg):
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    return params, build_replicator(params, ReplicatorConfig(name="dct", **cfg))


def _dense_sent(rep) -> list[torch.Tensor]:
    """What the packed buffer carries, scattered back into dense per-bucket coefficient matrices."""
    values, indices = rep.wire.unpack(rep.send.view(1, -1))
    dense = []
    for b, bucket in enumerate(rep.codec.plan.buckets):
        v = rep.wire.bucket(values, b).view(bucket.tiles, bucket.k).float()
        i = rep.wire.bucket(indices, b).view(bucket.tiles, bucket.k).long()
        dense.append(torch.zeros(bucket.tiles, bucket.tile_numel).scatter_(1, i, v))
    return dense


def test_dct_basis_is_the_orthonormal_dct_ii():
    for n in (1, 2, 7, 8, 64):
        f = dct_basis(n).double()
        torch.testing.assert_close(f @ f.T, torch.eye(n, dtype=torch.float64), atol=1e-6, rtol=0)
        x = torch.arange(n, dtype=torch.float64)
        for k in range(n):
            scale = math.sqrt((1 if k == 0 else 2) / n)
            expected = scale * torch.cos(math.pi * (2 * x + 1) * k / (2 * n))
            torch.testing.assert_close(f[k], expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("chunk", [4, 8])
def test_encode_decode_reconstructs_exactly_when_k_is_the_whole_tile(chunk):
    codec = DCTCodec(SHAPES, chunk, chunk * chunk)
    grads = _grads(SHAPES, 1)
    codec.accumulate(grads, beta=0.0)
    out = [torch.full(s, float("nan")) for s in SHAPES]
    codec.decode(codec.select(), out, sign=False)
    for g, o in zip(grads, out):
        torch.testing.assert_close(o, g, atol=1e-5, rtol=1e-5)


def test_replicator_with_full_k_and_no_sign_applies_the_gradient_itself():
    """Through the wire format and the optimizer too: lr 1 SGD moves params by -grad."""
    params, rep = _replicator(SHAPES, chunk=8, topk=64, sign=False, optimizer="sgd", lr=1.0, momentum_decay=0.5)
    grads = _grads(SHAPES, 2)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    rep.step()
    for p, g in zip(params, grads):
        torch.testing.assert_close(p.detach(), -g, atol=1e-5, rtol=1e-5)
    for m in rep.codec.momentum:  # everything was sent, nothing is left behind
        assert m.abs().max() < 1e-6


def test_selection_takes_the_k_largest_magnitudes_of_every_tile():
    codec = DCTCodec(SHAPES, 8, 5)
    codec.accumulate(_grads(SHAPES, 3), beta=0.0)
    for (indices, values), m, bucket in zip(codec.select(), codec.momentum, codec.plan.buckets):
        assert indices.shape == (bucket.tiles, bucket.k)
        torch.testing.assert_close(values, m.gather(1, indices), rtol=0, atol=0)
        best = m.abs().topk(bucket.k, dim=1).values
        torch.testing.assert_close(values.abs().sort(dim=1, descending=True).values, best, rtol=0, atol=0)
        assert all(len(set(row.tolist())) == bucket.k for row in indices)


@pytest.mark.parametrize("value_dtype", ["fp32", "bf16"])
def test_momentum_loses_exactly_what_was_sent(value_dtype):
    params, rep = _replicator(SHAPES, chunk=8, topk=6, value_dtype=value_dtype, momentum_decay=0.9)
    for step in range(3):
        grads = _grads(SHAPES, 10 + step)
        rep.codec.accumulate(grads, rep.config.momentum_decay)
        before = [m.clone() for m in rep.codec.momentum]
        rep.pack()
        for b, (m_before, m_after, sent) in enumerate(zip(before, rep.codec.momentum, _dense_sent(rep))):
            assert torch.equal(m_before - m_after, sent), f"bucket {b}, step {step}"
            changed = m_before != m_after
            assert (
                changed.sum() <= sent.count_nonzero() <= rep.codec.plan.buckets[b].tiles * rep.codec.plan.buckets[b].k
            )
        if value_dtype == "fp32":
            for m, sent in zip(rep.codec.momentum, _dense_sent(rep)):
                assert not m[sent != 0].any()  # fp32 sends the value exactly: nothing remains there


@pytest.mark.parametrize("value_dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("index_dtype", ["auto", "int16", "int32", "int64"])
def test_packed_wire_format_carries_the_selection_bit_for_bit(value_dtype, index_dtype):
    shapes = SHAPES + [(3,)]
    params, rep = _replicator(shapes, chunk=8, topk=7, value_dtype=value_dtype, index_dtype=index_dtype)
    rep.codec.accumulate(_grads(shapes, 4), 0.0)
    selection = [(i.clone(), v.clone()) for i, v in rep.codec.select()]
    rep.pack()
    assert rep.send.numel() == declared_payload(param_shapes(params), rep.config, 1).bytes_per_step
    # Two ranks' buffers back to back: the second row starts at an offset that is not a
    # multiple of 4 whenever the coefficient count is odd, as here.
    assert rep.wire.total % 2 == 1
    gathered = torch.stack([rep.send, rep.send])
    values, indices = rep.wire.unpack(gathered)
    expected_index = torch.int16 if index_dtype == "auto" else getattr(torch, index_dtype)
    assert indices.dtype == expected_index
    for b, (idx, val) in enumerate(selection):
        for row in range(2):
            got_i = rep.wire.bucket(indices[row], b).view_as(idx)
            got_v = rep.wire.bucket(values[row], b).view_as(val)
            assert torch.equal(got_i.long(), idx)
            wire_v = val.to(got_v.dtype)
            bits = torch.int32 if got_v.dtype == torch.float32 else torch.int16
            assert torch.equal(got_v.view(bits), wire_v.view(bits))


@pytest.mark.parametrize(
    "value_dtype,index_dtype",
    [
        (torch.float32, torch.int16),
        (torch.bfloat16, torch.int64),
        (torch.bfloat16, torch.int16),
        (torch.float32, torch.int64),
    ],
)
def test_wire_layout_round_trips_arbitrary_bits(value_dtype, index_dtype):
    counts = [3, 5, 1]
    layout = WireLayout(counts, value_dtype, index_dtype)
    assert layout.nbytes == sum(counts) * (value_dtype.itemsize + index_dtype.itemsize)  # no padding
    gen = torch.Generator().manual_seed(5)
    buffers, raw = [], []
    for _ in range(3):
        send = torch.empty(layout.nbytes, dtype=torch.uint8)
        bits_v = torch.randint(0, 256, (layout.total * value_dtype.itemsize,), generator=gen, dtype=torch.uint8)
        bits_i = torch.randint(0, 256, (layout.total * index_dtype.itemsize,), generator=gen, dtype=torch.uint8)
        layout.values(send).view(torch.uint8).copy_(bits_v)  # NaN payloads, -0.0, subnormals included
        layout.indices(send).view(torch.uint8).copy_(bits_i)
        buffers.append(send)
        raw.append((bits_v, bits_i))
    values, indices = layout.unpack(torch.stack(buffers))
    for rank, (bits_v, bits_i) in enumerate(raw):
        assert torch.equal(values[rank].contiguous().view(torch.uint8), bits_v)
        assert torch.equal(indices[rank].contiguous().view(torch.uint8), bits_i)


def test_decode_averages_each_coefficient_over_the_ranks_that_sent_it():
    codec = DCTCodec([(8, 8)], 8, 2)
    # rank 0 sends positions 0 and 9, rank 1 sends 9 and 20
    indices = torch.tensor([[0, 9, 9, 20]])
    values = torch.tensor([[4.0, 1.0, 3.0, -2.0]])
    out = [torch.empty(8, 8)]
    codec.decode([(indices, values)], out, sign=False)
    coeff = torch.zeros(64)
    coeff[0], coeff[9], coeff[20] = 4.0, 2.0, -2.0
    # stored tile layout is [v, u] (columns-major inside a tile): position p -> (u = p % 8, v = p // 8)
    y = coeff.view(8, 8).T
    f = dct_basis(8)
    torch.testing.assert_close(out[0], f.T @ y @ f, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("sign", [False, True])
def test_sparse_product_inverse_equals_the_dense_two_gemm_inverse(monkeypatch, sign):
    """The sparse inverse (n <= min(h, w) coefficients per tile) and the dense one agree on every tile
    shape, duplicate positions across ranks, and regions that are not contiguous in the tensor."""
    shapes, chunk, k, world = [(20, 24), (8, 8), (13,), (3, 5, 4)], 8, 3, 2
    codec = DCTCodec(shapes, chunk, k)
    gen = torch.Generator().manual_seed(5)
    received = []
    for bucket in codec.plan.buckets:
        n = world * bucket.k
        indices = torch.randint(0, bucket.tile_numel, (bucket.tiles, n), generator=gen)
        indices[:, -1] = indices[:, 0]  # a position every rank sent
        received.append((indices, torch.randn(bucket.tiles, n, generator=gen)))
    assert any(codec.sparse_inverse(b, world * b.k) for b in codec.plan.buckets)
    assert not all(codec.sparse_inverse(b, world * b.k) for b in codec.plan.buckets)
    sparse = [torch.full(s, float("nan")) for s in shapes]
    codec.decode(received, sparse, sign=sign)
    monkeypatch.setattr(DCTCodec, "sparse_inverse", staticmethod(lambda bucket, n: False))
    dense = [torch.full(s, float("nan")) for s in shapes]
    codec.decode(received, dense, sign=sign)
    unsigned = [torch.full(s, float("nan")) for s in shapes]
    codec.decode(received, unsigned, sign=False)
    for a, b, u in zip(sparse, dense, unsigned):
        if sign:  # a sign may differ only where the update is zero up to rounding
            assert not ((a != b) & (u.abs() > 1e-6)).any()
        else:
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def _naive_demo_update(deltas, grads, chunk, k, beta):
    """DeMo as published, tile by tile in parameter space (divisible 2-D shapes, one rank)."""
    updates = []
    for d, g in zip(deltas, grads):
        d.mul_(beta).add_(g)
        f = dct_basis(chunk)
        update = torch.zeros_like(d)
        for i in range(0, d.shape[0], chunk):
            for j in range(0, d.shape[1], chunk):
                coeff = f @ d[i : i + chunk, j : j + chunk] @ f.T
                keep = coeff.abs().flatten().topk(k).indices
                sparse = torch.zeros(chunk * chunk)
                sparse[keep] = coeff.flatten()[keep]
                update[i : i + chunk, j : j + chunk] = f.T @ sparse.view(chunk, chunk) @ f
        d.sub_(update)
        updates.append(update)
    return updates


def test_momentum_in_dct_space_matches_demo_in_parameter_space():
    shapes, chunk, k, beta = [(16, 24), (8, 8)], 8, 5, 0.9
    params, rep = _replicator(shapes, chunk=chunk, topk=k, momentum_decay=beta, sign=False, optimizer="sgd", lr=1.0)
    deltas = [torch.zeros(s) for s in shapes]
    for step in range(4):
        grads = _grads(shapes, 20 + step)
        for p, g in zip(params, grads):
            p.grad = g.clone()
        rep.step()
        expected = _naive_demo_update(deltas, grads, chunk, k, beta)
        for p, e in zip(params, expected):
            torch.testing.assert_close(p.grad, e, atol=1e-5, rtol=1e-4)


def test_tiles_cover_every_element_exactly_once():
    for shape in SHAPES + [(130, 65), (64, 64), (1, 1)]:
        plan = TilePlan([shape], 8, 3)
        rows, cols = matrix_shape(shape)
        covered = torch.zeros(rows, cols, dtype=torch.int64)
        for r in plan.regions:
            assert r.rows % r.h == 0 and r.cols % r.w == 0
            covered[r.row0 : r.row0 + r.rows, r.col0 : r.col0 + r.cols] += 1
        assert torch.equal(covered, torch.ones_like(covered)), shape


def test_awkward_sizes_do_not_blow_up_the_payload():
    # 1031 is prime: DeMo's largest-divisor rule would cut it into 1-long chunks and send
    # min(k, 1 x 1) = every coefficient; edge tiles keep it near k / s^2 of the tensor.
    plan = TilePlan([(1031, 1031), (1000,)], 64, 32)
    full_rate = 32 / 64**2
    matrix_coeffs = sum(b.tiles * b.k for b in plan.buckets if b.h > 1)
    assert matrix_coeffs <= 1.15 * full_rate * 1031**2
    vector_coeffs = sum(b.tiles * b.k for b in plan.buckets if b.h == 1)
    assert vector_coeffs == 16 * 32  # 15 chunks of 64 and one of 40, k = 32 each (DeMo: 32 of 64 per chunk)


def test_index_dtype_is_the_smallest_that_holds_a_tile_position():
    assert index_dtype_for(ReplicatorConfig(chunk=64), 64 * 64) == torch.int16
    assert index_dtype_for(ReplicatorConfig(chunk=181), 181 * 181) == torch.int16  # 32761 positions
    assert index_dtype_for(ReplicatorConfig(chunk=182), 182 * 182) == torch.int32
    assert index_dtype_for(ReplicatorConfig(chunk=64, index_dtype="int64"), 64 * 64) == torch.int64
    with pytest.raises(ValueError, match="cannot hold"):
        index_dtype_for(ReplicatorConfig(chunk=182, index_dtype="int16"), 182 * 182)


@pytest.mark.parametrize("case", ["random", "concentrated", "ties", "narrow"])
def test_grouped_topk_finds_the_same_values_as_torch_topk(case):
    gen = torch.Generator().manual_seed(6)
    rows = torch.rand(50, 4096, generator=gen)
    if case == "concentrated":  # every large value inside few strided groups (stride 128)
        rows[:, ::128] += 10.0
        rows[:, 1::128] += 5.0
    elif case == "ties":
        rows = torch.randint(0, 4, (50, 4096), generator=gen).float()
    elif case == "narrow":  # not a multiple of 4k: plain torch.topk path
        rows = rows[:, :1000].contiguous()
    for k in (1, 7, 32):
        got = topk_indices(rows, k)
        assert got.shape == (rows.shape[0], k)
        assert all(len(set(r.tolist())) == k for r in got)  # distinct positions
        expected = rows.topk(k, dim=1).values
        assert torch.equal(rows.gather(1, got).sort(dim=1, descending=True).values, expected)
