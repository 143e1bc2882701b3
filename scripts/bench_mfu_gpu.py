#!/usr/bin/env python3
"""What share of an accelerator's datasheet bf16 throughput a transformer's forward + backward reaches.

`netbench plan --accelerator NAME --mfu U` prices a step as tokens x FLOPs per token / (workers x peak x U), with
FLOPs per token 6 N + 12 L d s (netbench/model/compute.py). This measures U on the device it runs on, for
llama-shaped decoder stacks in bf16 (RMSNorm, attention through PyTorch's scaled_dot_product_attention with a
causal mask, SwiGLU MLP, an embedding and an untied output head): the median of ``--iters`` forward + backward
passes (CUDA events, after ``--warmup``), the model FLOPs of the planner's formula over that time, over the
datasheet's dense bf16 figure. It also times one large bf16 matrix product, the ceiling a kernel reaches here.

    python3 scripts/bench_mfu_gpu.py --json reports/gpu/h200/mfu.json
    python3 scripts/bench_mfu_gpu.py --device cpu --configs tiny --iters 2   # a dry run anywhere

No optimizer step, data loading or communication is timed: the figure is the compute term's U, the upper end of
what a training step's MFU can be on this device.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# (d_model, layers, ffn, heads, vocab, micro-batch sequences, sequence length)
CONFIGS = {
    "llama-7b-4layers": (4096, 4, 11008, 32, 32000, 4, 2048),
    "llama-1b": (2048, 16, 8192, 32, 128256, 8, 2048),
    "tiny": (64, 2, 176, 4, 128, 2, 32),
}
DATASHEET_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "B200": 2250e12}


class Block(torch.nn.Module):
    def __init__(self, d: int, ffn: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1 = torch.nn.RMSNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.n2 = torch.nn.RMSNorm(d)
        self.up = torch.nn.Linear(d, 2 * ffn, bias=False)
        self.down = torch.nn.Linear(ffn, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        gate, up = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(torch.nn.Module):
    def __init__(self, d: int, layers: int, ffn: int, heads: int, vocab: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d, ffn, heads) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def flops_per_token(params: int, layers: int, d: int, seq: int) -> float:
    """The planner's formula (netbench/model/compute.py): 6 N + 12 L d s."""
    return 6.0 * params + 12.0 * layers * d * seq


def timed(fn, device: str, iters: int, warmup: int) -> list[float]:
    """Seconds of each of ``iters`` calls after ``warmup`` (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def matmul_rate(device: str, dtype: torch.dtype, n: int, iters: int, warmup: int) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    times = timed(lambda: a @ b, device, iters, warmup)
    return 2 * n**3 / statistics.median(times)


def model_mfu(name: str, device: str, dtype: torch.dtype, iters: int, warmup: int, peak: float) -> dict:
    d, layers, ffn, heads, vocab, batch, seq = CONFIGS[name]
    torch.manual_seed(0)
    model = Decoder(d, layers, ffn, heads, vocab).to(device=device, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, vocab, (batch, seq), device=device)
    target = torch.randint(0, vocab, (batch, seq), device=device)

    def step() -> None:
        logits = model(tokens)
        loss = F.cross_entropy(logits.view(-1, vocab).float(), target.view(-1))
        loss.backward()
        for p in model.parameters():
            p.grad = None

    times = timed(step, device, iters, warmup)
    median = statistics.median(times)
    achieved = batch * seq * flops_per_token(params, layers, d, seq) / median
    return {
        "config": name,
        "params": params,
        "layers": layers,
        "d_model": d,
        "tokens_per_step": batch * seq,
        "seq_len": seq,
        "step_s_median": median,
        "step_s_all": times,
        "model_flops_per_s": achieved,
        "mfu_vs_datasheet": achieved / peak if peak else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--configs", nargs="+", default=["llama-7b-4layers", "llama-1b"], choices=sorted(CONFIGS))
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--matmul", type=int, default=8192, help="side of the square bf16 matrix product timed")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()

    device = args.device
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu"
    peak = next((v for k, v in DATASHEET_BF16.items() if k in gpu), 0.0)
    matmul = matmul_rate(device, dtype, args.matmul if device == "cuda" else 256, args.iters, args.warmup)
    results = [model_mfu(c, device, dtype, args.iters, args.warmup, peak) for c in args.configs]
    doc = {
        "device": gpu,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "datasheet_bf16_flops": peak or None,
        "matmul_flops_per_s": matmul,
        "matmul_side": args.matmul,
        "models": results,
    }
    print(f"bench_mfu_gpu: {gpu}, torch {torch.__version__}, {dtype}, median of {args.iters} after {args.warmup}")
    share = f" ({matmul / peak:.2f} of the datasheet's {peak / 1e12:.1f})" if peak else ""
    print(f"  matrix product {args.matmul}^3: {matmul / 1e12:.1f} TFLOP/s{share}")
    for r in results:
        mfu = f"{r['mfu_vs_datasheet']:.3f}" if r["mfu_vs_datasheet"] is not None else "-"
        print(
            f"  {r['config']:<17} {r['params'] / 1e9:6.3f} B params  {r['tokens_per_step']} tokens/step  "
            f"fwd+bwd {r['step_s_median'] * 1e3:8.2f} ms  {r['model_flops_per_s'] / 1e12:7.1f} TFLOP/s  MFU {mfu}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    assert all(math.isfinite(r["step_s_median"]) for r in results)


if __name__ == "__main__":
    main()
