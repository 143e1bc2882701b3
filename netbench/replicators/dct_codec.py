"""DeMo's compressor, batched: tiled 2-D DCT, momentum kept in the DCT domain, top-k, one decode.

Why the momentum lives in the DCT domain: the tiled DCT T is orthonormal and linear, so DeMo's
``m = beta m + g; send topk(T m); m -= T^-1(sent)`` equals ``M = beta M + T g; send topk(M);
M -= sent`` with ``M = T m``. A step then needs one forward transform (of the gradient) and one
inverse transform (of the average of everything the ranks sent), instead of DeMo's forward
transform plus one inverse per rank plus one inverse of its own message. Removing what was sent
is an exact sparse subtraction in coefficient space, not a lossy decode-and-subtract.

Batching: every tile shape (h, w) is a bucket whose momentum is one (tiles, h*w) matrix, so a
step costs two GEMMs per region for the forward transform (the second fused with the momentum
decay through ``baddbmm``), one top-k per bucket, and two GEMMs per region for the inverse;
the tile-major <-> parameter layout change rides on BLAS's transposed operands, never on a
separate permuting copy. All buffers are allocated once: on this CPU, first-touch page faults
of fresh 50 MB buffers cost as much as the GEMMs.

Coefficient layout inside a tile is transposed ([v, u] for a tile whose rows are u and columns
v): it is what the GEMMs produce without extra copies. Positions on the wire refer to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from netbench.declarations.tiling import Bucket, TilePlan
from netbench.replicators.topk import topk_indices

__all__ = ["dct_basis", "DCTCodec"]


def dct_basis(n: int) -> torch.Tensor:
    """Orthonormal DCT-II matrix F (n x n, fp32): coefficients y = F x, inverse x = F^T y."""
    k = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    x = torch.arange(n, dtype=torch.float64).unsqueeze(0)
    basis = torch.cos(math.pi * (2 * x + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    basis[0] /= math.sqrt(2.0)
    return basis.to(torch.float32)


class DCTCodec:
    """Momentum, selection and decoding for a fixed list of tensor shapes (one rank's state)."""

    def __init__(
        self, shapes: Sequence[Sequence[int]], chunk: int, topk: int, device: torch.device | str = "cpu"
    ) -> None:
        self.plan = TilePlan(shapes, chunk, topk)
        sizes = {n for b in self.plan.buckets for n in (b.h, b.w)}
        self.basis = {n: dct_basis(n).to(device) for n in sizes}
        self.basis_t = {n: f.t().contiguous() for n, f in self.basis.items()}
        numels = [(b.tiles, b.tile_numel) for b in self.plan.buckets]
        # momentum[b]: (tiles, h*w) coefficients; scratch_*: reused by every phase of a step.
        self.momentum = [torch.zeros(shape, device=device) for shape in numels]
        self.scratch_a = [torch.empty(shape, device=device) for shape in numels]  # |M|, then the received coefficients
        self.scratch_b = [torch.empty(shape, device=device) for shape in numels]  # half-transformed tiles
        self.scratch_c = [torch.empty(shape, device=device) for shape in numels]  # staging for non-contiguous regions
        self._topk_values = [torch.empty(b.tiles, b.k, device=device) for b in self.plan.buckets]

    # -- forward -------------------------------------------------------------------------------
    def accumulate(self, grads: Sequence[torch.Tensor], beta: float) -> None:
        """``M = beta * M + T(g)`` for every tile of every gradient."""
        for r in self.plan.regions:
            rows, cols = self.plan.matrix_shapes[r.tensor]
            x = grads[r.tensor].reshape(rows, cols)[r.row0 : r.row0 + r.rows, r.col0 : r.col0 + r.cols]
            tile_slice = slice(r.tile0, r.tile0 + r.tiles)
            if not x.is_contiguous():  # only regions of non-divisible tensors
                staged = self.scratch_c[r.bucket][tile_slice].view(r.rows, r.cols)
                x = staged.copy_(x)
            z = self.scratch_b[r.bucket][tile_slice].view(r.rows, r.cols)
            # Columns inside each tile: Z = X F_w^T, one GEMM per row band (as a batch: BLAS runs this
            # tall, 64-wide product about 10% faster batched than as one (rows * tiles, w) GEMM).
            bands = r.row_tiles
            torch.bmm(x.reshape(bands, -1, r.w), self.basis_t[r.w].expand(bands, r.w, r.w), out=z.view(bands, -1, r.w))
            # Rows inside each tile, written tile-major as [v, u] and fused with the decay.
            m = self.momentum[r.bucket][tile_slice].view(r.row_tiles, r.cols, r.h)
            zt = z.view(r.row_tiles, r.h, r.cols).transpose(1, 2)
            m.baddbmm_(zt, self.basis_t[r.h].expand(r.row_tiles, r.h, r.h), beta=beta, alpha=1.0)

    # -- selection -----------------------------------------------------------------------------
    def select(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per bucket: (positions int64 (tiles, k), values fp32 (tiles, k)) of the largest |M|."""
        out = []
        for b, bucket in enumerate(self.plan.buckets):
            magnitude = torch.abs(self.momentum[b], out=self.scratch_a[b])
            indices = topk_indices(magnitude, bucket.k)
            values = torch.gather(self.momentum[b], 1, indices, out=self._topk_values[b])
            out.append((indices, values))
        return out

    def subtract(self, bucket: int, indices: torch.Tensor, sent: torch.Tensor) -> None:
        """Remove exactly what was sent (after wire rounding) from the momentum."""
        self.momentum[bucket].scatter_add_(1, indices, sent.neg())

    # -- inverse -------------------------------------------------------------------------------
    @staticmethod
    def sparse_inverse(bucket: Bucket, received: int) -> bool:
        """Whether a tile receiving ``received`` coefficients is inverted as one sparse product
        (``received`` <= min(h, w): fewer multiply-adds than the two dense GEMMs, and its operands
        fit in the scratch buffers)."""
        return received <= min(bucket.h, bucket.w)

    def decode(
        self,
        received: Sequence[tuple[torch.Tensor, torch.Tensor]],
        out: Sequence[torch.Tensor],
        sign: bool,
    ) -> None:
        """Average every rank's sparse coefficients and write ``T^-1`` of it into ``out``.

        ``received[b]`` holds (positions int64, values fp32), both (tiles, world * k). Like
        DeMo, a coefficient is averaged over the ranks that sent it. Averaging happens in
        coefficient space, so there is a single inverse transform per region, and the result
        lands in parameter layout directly in ``out``.

        A tile holds only the n = world * k coefficients received, so where n <= min(h, w)
        (k = 32 of 64 x 64 tiles on 2 ranks) its inverse ``X = F_h^T C F_w`` is computed as
        ``sum_i c_i F_h[u_i]^T F_w[v_i] = A^T B``: A's rows are the basis rows of the
        coefficients' rows u_i scaled by c_i (duplicates add up to their average), B's rows
        the basis rows of their columns v_i. One (h x n x w) GEMM per tile instead of two
        dense (h x h x w) ones, and no dense coefficient matrix. Otherwise the coefficients are
        scattered into a dense matrix and inverted with two GEMMs per region, mirroring the
        forward pass (transposed operands instead of permuting copies).
        The sparse form is used on CPU only: its per-band loop launches a kernel per row band, which
        on an H100 made gpt2-medium's decode 182 ms against about 25 ms for the two dense GEMMs.
        """
        operands: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        for b, bucket in enumerate(self.plan.buckets):
            indices, values = received[b]
            dense = self.scratch_a[b].zero_()
            dense.scatter_add_(1, indices, torch.ones_like(values))  # senders per coefficient
            senders = dense.gather(1, indices)
            n = indices.shape[1]
            if indices.device.type == "cpu" and self.sparse_inverse(bucket, n):
                # A in scratch_b, B in scratch_a (its counts were read above): both fit since n <= min(h, w).
                rows_u = self.scratch_b[b].view(-1)[: bucket.tiles * n * bucket.h].view(bucket.tiles, n, bucket.h)
                rows_v = dense.view(-1)[: bucket.tiles * n * bucket.w].view(bucket.tiles, n, bucket.w)
                torch.index_select(
                    self.basis[bucket.h], 0, (indices % bucket.h).view(-1), out=rows_u.view(-1, bucket.h)
                )
                rows_u.mul_((values / senders).unsqueeze(-1))
                v = torch.div(indices, bucket.h, rounding_mode="floor")
                torch.index_select(self.basis[bucket.w], 0, v.view(-1), out=rows_v.view(-1, bucket.w))
                operands.append((rows_u, rows_v))
                continue
            dense.scatter_(1, indices, 0.0)
            dense.scatter_add_(1, indices, values / senders)
            operands.append(None)
        for r in self.plan.regions:
            tile_slice = slice(r.tile0, r.tile0 + r.tiles)
            rows, cols = self.plan.matrix_shapes[r.tensor]
            target = out[r.tensor].view(rows, cols)[r.row0 : r.row0 + r.rows, r.col0 : r.col0 + r.cols]
            staged = target if target.is_contiguous() else self.scratch_c[r.bucket][tile_slice].view(r.rows, r.cols)
            bands = r.row_tiles
            if operands[r.bucket] is not None:
                rows_u, rows_v = operands[r.bucket]
                for i in range(bands):  # tile j of band i: X_ij = A_ij^T B_ij, written in place in parameter layout
                    t0 = r.tile0 + i * r.col_tiles
                    band = staged[i * r.h : (i + 1) * r.h].view(r.h, r.col_tiles, r.w).transpose(0, 1)
                    torch.bmm(rows_u[t0 : t0 + r.col_tiles].transpose(1, 2), rows_v[t0 : t0 + r.col_tiles], out=band)
            else:
                coeffs = self.scratch_a[r.bucket][tile_slice].view(bands, r.cols, r.h)
                # Rows: Z_i = F_h^T @ (coefficients [v', u'] of row band i)^T, in parameter layout.
                z = self.scratch_b[r.bucket][tile_slice].view(bands, r.h, r.cols)
                torch.bmm(self.basis_t[r.h].expand(bands, r.h, r.h), coeffs.transpose(1, 2), out=z)
                # Columns: X = Z F_w, one GEMM per row band (batched, as in accumulate).
                torch.bmm(
                    z.view(bands, -1, r.w), self.basis[r.w].expand(bands, r.w, r.w), out=staged.view(bands, -1, r.w)
                )
            if sign:
                staged.sign_()
            if staged is not target:
                target.copy_(staged)
