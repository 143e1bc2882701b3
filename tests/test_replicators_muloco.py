"""muloco: Muon on the matrices, AdamW on the rest, and an error-fed outer gradient on DiLoCo's wire.

Declared == handed bytes on every step, replicas that agree after a sync and falling loss are also in
test_replicators (with the settings of its declaration's test preset, as for every replicator).
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import run_ranks

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.quant_wire import ring_chunks
from netbench.declarations.registry import declared_payload
from netbench.replicators.build import build_replicator
from netbench.replicators.quantize import Quantizer
from netbench.shapes import ParamShape

SHAPES = [(12, 5), (7,), (3, 2, 2), (10, 4)]
NAMES = ["blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.conv.weight", "wte.weight"]
STEPS = 6
SYNC = 2


def _params() -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(0)
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]


def test_its_wire_is_dilocos():
    shapes = [ParamShape(n, s) for n, s in zip(NAMES, SHAPES)]
    for bits in (0, 2, 8):
        settings = dict(sync_every=30, quant_bits=bits, quant_block=32, grad_dtype="bf16")
        ours = declared_payload(shapes, ReplicatorConfig(name="muloco", error_decay=0.9, **settings), 6)
        assert ours == declared_payload(shapes, ReplicatorConfig(name="diloco", **settings), 6)


def test_an_error_decay_of_one_is_refused():
    with pytest.raises(ValueError) as err:
        ReplicatorConfig(name="muloco", error_decay=1.0)
    assert "error_decay" in str(err.value)


def test_muon_steps_the_matrices_and_adamw_the_rest():
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(name="muloco"), names=NAMES)
    kinds = {type(o).__name__: [id(p) for g in o.param_groups for p in g["params"]] for o in rep.optimizer.optimizers}
    assert kinds == {"Muon": [id(params[0])], "AdamW": [id(p) for p in params[1:]]}
    assert type(build_replicator(_params(), ReplicatorConfig(name="muloco", optimizer="sgd")).optimizer).__name__ == (
        "SGD"
    )


def _rank_body(rank: int, world: int, cfg: dict) -> list[dict]:
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(**cfg), names=NAMES)
    out = []
    for step in range(STEPS):
        grads = torch.Generator().manual_seed(1000 * rank + step + 1)
        for p in params:
            p.grad = torch.randn(p.shape, generator=grads)
        before = rep.error.clone() if hasattr(rep, "error") else None
        rep.step()
        row = {"params": torch.cat([p.detach().reshape(-1) for p in params])}
        if before is not None and (step + 1) % SYNC == 0:
            row.update(before=before, delta=rep.current.clone(), sent=rep.sent.clone(), error=rep.error.clone())
        out.append(row)
    return out


def test_the_error_buffer_keeps_what_the_quantized_ring_left_out():
    bits, block, decay = 2, 16, 0.9
    cfg = dict(name="muloco", sync_every=SYNC, lr=0.01, quant_bits=bits, quant_block=block, error_decay=decay)
    ranks = run_ranks(_rank_body, 2, cfg, timeout=60)
    numel = sum(torch.Size(s).numel() for s in SHAPES)
    sizes = ring_chunks(numel, 2)
    syncs = 0
    for rank in ranks:
        for row in rank:
            if "sent" not in row:
                continue
            syncs += 1
            folded = decay * row["before"] + row["delta"]
            torch.testing.assert_close(row["error"] + row["sent"], folded)
            at = 0
            for size in sizes:  # each rank's own encoding, chunk by chunk on the ring's grids
                q = Quantizer(size, bits, block)
                part = folded[at : at + size]
                expect = q.decode(q.encode(part, torch.zeros(q.nbytes, dtype=torch.uint8)), torch.zeros(size))
                torch.testing.assert_close(row["sent"][at : at + size], expect)
                at += size
            assert row["error"].abs().gt(0).any()  # 2 bits leave something out
    assert syncs == 2 * STEPS // SYNC
    assert torch.equal(ranks[0][-1]["params"], ranks[1][-1]["params"])  # one model after the last sync


def test_with_a_lossless_wire_and_adamw_it_is_diloco_step_for_step():
    common = dict(sync_every=SYNC, lr=0.01, optimizer="adamw")
    ours = run_ranks(_rank_body, 2, dict(name="muloco", **common), timeout=60)
    theirs = run_ranks(_rank_body, 2, dict(name="diloco", **common), timeout=60)
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            assert torch.equal(x["params"], y["params"])
