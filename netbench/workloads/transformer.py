"""A small byte-level GPT trained on the procedural corpus: a real loss curve at tens of ms per step.

Byte-level (vocabulary 256) so any ASCII/UTF-8 text works without a tokenizer. Pre-norm blocks,
causal attention via ``scaled_dot_product_attention``, learned positions, untied head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from netbench.workloads.base import STREAM_DATA, Workload, build_shared, make_generator
from netbench.workloads.config import VOCAB, WorkloadConfig
from netbench.workloads.corpus import generate_text

# Bytes of corpus per rank: about 250 steps of default batches before windows start to repeat
# exactly, and random window offsets make exact repeats rare long after that.
CORPUS_BYTES = 1 << 18


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a 4x GELU MLP."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class TinyGPT(nn.Module):
    """Byte-level decoder-only language model."""

    def __init__(self, d_model: int, n_layers: int, n_heads: int, seq_len: int) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, d_model)
        self.pos_emb = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class TransformerWorkload(Workload):
    """Next-byte prediction on random windows of this rank's own sample of the corpus."""

    def __init__(self, cfg: WorkloadConfig, rank: int) -> None:
        self.cfg = cfg
        self.batch_size = cfg.effective_batch_size
        self.model = build_shared(cfg.seed, lambda: TinyGPT(cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.seq_len))
        text = generate_text(seed=cfg.seed * 7919 + rank, n_bytes=max(CORPUS_BYTES, 4 * (cfg.seq_len + 1)))
        self.data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
        self.gen = make_generator(cfg.seed, STREAM_DATA, rank)
        self._offsets = torch.arange(cfg.seq_len + 1)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and next-byte targets, (batch, seq_len) each."""
        starts = torch.randint(0, len(self.data) - self.cfg.seq_len - 1, (self.batch_size, 1), generator=self.gen)
        windows = self.data[starts + self._offsets]
        return windows[:, :-1], windows[:, 1:]

    def compute_step(self) -> float:
        self.model.zero_grad(set_to_none=False)
        x, y = self.next_batch()
        logits = self.model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        return float(loss.item())
