"""Block-scaled integer quantization: what the bytes stand for, and that the payload formula counts them."""

from __future__ import annotations

import pytest
import torch

from netbench.declarations.quant_wire import quantized_bytes
from netbench.replicators.quantize import Quantizer


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("numel, block", [(1000, 64), (37, 16), (5, 2048), (4096, 4096)])
def test_round_trip_error_is_at_most_half_a_level(bits, numel, block):
    values = torch.randn(numel, generator=torch.Generator().manual_seed(numel)) * 3
    q = Quantizer(numel, bits, block)
    assert q.nbytes == quantized_bytes(numel, bits, block)
    wire = q.encode(values, torch.zeros(q.nbytes, dtype=torch.uint8))
    back = q.decode(wire, torch.zeros(numel))
    padded = torch.zeros(q.blocks * block)
    padded[:numel] = values
    scale = padded.view(q.blocks, block).abs().amax(dim=1)
    half_level = (scale / (1 << bits)).repeat_interleave(block)[:numel]  # 2A / 2^b per level
    assert torch.all((back - values).abs() <= half_level + 1e-6 * values.abs() + 1e-7)  # fp32 rounding at |x| ~ A


def test_two_bits_use_four_levels_and_a_zero_block_stays_zero():
    values = torch.cat([torch.linspace(-1, 1, 64), torch.zeros(64)])
    q = Quantizer(128, 2, 64)
    back = q.decode(q.encode(values, torch.zeros(q.nbytes, dtype=torch.uint8)), torch.zeros(128))
    assert sorted(set(back[:64].tolist())) == [-0.75, -0.25, 0.25, 0.75]
    assert torch.equal(back[64:], torch.zeros(64))


def test_a_buffer_may_start_anywhere_in_a_larger_one():
    values = torch.randn(100)
    q = Quantizer(100, 4, 32)
    whole = torch.zeros(q.nbytes + 3, dtype=torch.uint8)
    q.encode(values, whole[3:])  # the scales land at an odd byte
    alone = q.encode(values, torch.zeros(q.nbytes, dtype=torch.uint8))
    assert torch.equal(whole[3:], alone)
    assert torch.equal(q.decode(whole[3:], torch.zeros(100)), q.decode(alone, torch.zeros(100)))


def test_unsupported_widths_are_refused():
    with pytest.raises(ValueError, match="2, 4 or 8"):
        Quantizer(10, 3, 16)


def test_an_encode_after_a_decode_scales_the_last_block_by_the_values_alone():
    q, fresh = Quantizer(20, 2, 16), Quantizer(20, 2, 16)
    gen = torch.Generator().manual_seed(5)
    big, small = torch.randn(20, generator=gen), 1e-3 * torch.randn(20, generator=gen)
    q.decode(q.encode(big, torch.zeros(q.nbytes, dtype=torch.uint8)), torch.zeros(20))  # levels of big in the padding
    ours = q.encode(small, torch.zeros(q.nbytes, dtype=torch.uint8))
    assert torch.equal(ours, fresh.encode(small, torch.zeros(fresh.nbytes, dtype=torch.uint8)))
