#!/usr/bin/env python3
"""``netbench plan`` on published parallel layouts: its throughput per GPU against the published one, with the ratio.

1. FSDP (torchtitan's docs/performance.md at revision 041336434916bdc0f88c1f89fda176fd3c2092e4: FSDP2 on 64 A100 80GB,
   8 nodes, tokens per second per GPU and the MFU each row reports). Each row is planned at that row's MFU, so the
   plan matches the published throughput exactly where its collectives hide behind compute, and falls short by what
   it leaves exposed. The network is not stated there: 8 x 200 Gb/s HDR InfiniBand per node (an A100 HGX node's) is
   assumed.
2. FSDP scaling (torchtitan's docs/performance.md at revision eaea6f6a2fa940f03a10906be1df3489cf30af85, Tables 1 and 3:
   Llama 3.1 8B, FSDP on 8 and 128 H100 with 400 Gb/s RDMA a GPU, local batch 2, bf16 without compile): the MFU the
   8-GPU row implies is given to both clusters; the 128-GPU throughput is predicted.
3. Llama 3 405B (arXiv 2407.21783, Table 4: TP 8 x PP 16 x DP 64 and 128 on 8,192 and 16,384 H100, 16M tokens a
   step of 8,192-token sequences, 430 and 400 TFLOP/s a GPU at 43 and 41 % MFU; 400 Gb/s RoCE a GPU; data parallel
   FSDP keeping the parameters after the forward, zero2 here). Planned at the published MFU, the plan's TFLOP/s a GPU
   fall short of it by the bubble and the exposed transfers: the ratio is the plan's compute utilisation, and
   published MFU / utilisation is the kernels' MFU the published throughput implies. The paper's interleaving depth
   is not given: shown without interleaving and with 2 chunks a GPU.

    python3 scripts/bench_parallelism.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.model.schemes import SchemeSettings, build_scheme  # noqa: E402
from netbench.planning import PlanRequest, plan  # noqa: E402

LLAMA3_8B = "llama:d_model=4096,layers=32,ffn=14336,vocab=128256,heads=32,kv_heads=8"
LLAMA3_70B = "llama:d_model=8192,layers=80,ffn=28672,vocab=128256,heads=64,kv_heads=8"
LLAMA3_405B = "llama:d_model=16384,layers=126,ffn=53248,vocab=128256,heads=128,kv_heads=8"
LLAMA2_13B = "llama:d_model=5120,layers=40,ffn=13824,vocab=32000,heads=40,kv_heads=40"
LLAMA2_70B = "llama:d_model=8192,layers=80,ffn=28672,vocab=32000,heads=64,kv_heads=8"
PLAIN = (build_scheme("full", SchemeSettings()),)

# (label, shapes, nodes, sequences per GPU, sequence length, published tokens/s a GPU, published MFU)
FSDP_A100 = (
    ("Llama 3 8B", LLAMA3_8B, 8, 1, 8192, 2904, 0.568),
    ("Llama 3 70B", LLAMA3_70B, 8, 1, 8192, 331, 0.517),
    ("Llama 2 13B", LLAMA2_13B, 8, 2, 4096, 2162, 0.611),
    ("Llama 2 70B", LLAMA2_70B, 8, 1, 4096, 355, 0.508),
)
A100_NODE_BW = "1600gbit"  # 8 x 200 Gb/s HDR a node (assumed: the page does not say)
H100_NODE_BW = "3200gbit"  # 8 x 400 Gb/s a node
FSDP_H100 = {1: 5762, 16: 5605}  # Llama 3.1 8B, FSDP, local batch 2 of 8,192 tokens: nodes -> tokens/s a GPU
# (GPUs, data parallel, tokens per step, TFLOP/s a GPU, MFU) of Llama 3 405B's Table 4 at 8,192-token sequences
LLAMA3_RUNS = ((8192, 64, 16_777_216, 430, 0.43), (16384, 128, 16_777_216, 400, 0.41))


def step_of(request: PlanRequest) -> dict:
    """The plan's one row."""
    return plan(request).doc["rows"][0]


def tokens_per_gpu_s(request: PlanRequest, workers: int, tokens_per_step: float) -> tuple[float, dict]:
    row = step_of(request)
    return tokens_per_step / row["step_time_s"] / workers, row


def fsdp_row(label: str, shapes: str, nodes: int, per_gpu: int, seq: int, published: float, fsdp: dict) -> None:
    """One FSDP run planned (``fsdp``: its accelerator, network and MFU) and printed against its throughput."""
    workers = nodes * 8
    tokens = workers * per_gpu * seq
    request = PlanRequest(
        schemes=PLAIN, shapes=shapes, nodes=(nodes,), gpus_per_node=8, backend="nccl", transport="rdma",
        seq_len=seq, tokens_per_step=f"{tokens}", shard="zero3", **fsdp,
    )  # fmt: skip
    ours, row = tokens_per_gpu_s(request, workers, tokens)
    print(
        f"   {label:<12} {published:>10,} {ours:>10,.0f} {ours / published:>7.3f} {row['compute_utilization']:>11.1%}"
    )


def fsdp_a100() -> None:
    print("1. FSDP on 64 A100 80GB (torchtitan), planned at each row's MFU: tokens/s a GPU")
    print(f"   {'model':<12} {'published':>10} {'plan':>10} {'ratio':>7} {'utilisation':>12}")
    for label, shapes, nodes, per_gpu, seq, published, mfu in FSDP_A100:
        fsdp_row(label, shapes, nodes, per_gpu, seq, published, {"accelerator_name": "a100-80gb", "bw": A100_NODE_BW,
                                                                  "mfu": mfu})  # fmt: skip


def fsdp_h100_scaling() -> None:
    print("2. FSDP on H100 (torchtitan Tables 1 and 3, Llama 3.1 8B): the 8-GPU row's MFU, 128 GPUs predicted")
    seq, per_gpu = 8192, 2
    h100 = {"accelerator_name": "h100-sxm", "bw": H100_NODE_BW}
    flops = plan(
        PlanRequest(schemes=PLAIN, shapes=LLAMA3_8B, nodes=(1,), gpus_per_node=8, backend="nccl", seq_len=seq,
                    tokens_per_step=f"{8 * per_gpu * seq}", **h100)
    ).doc["compute"]["flops_per_token"]  # fmt: skip
    mfu = FSDP_H100[1] * flops / 989.4e12
    print(f"   MFU the 8-GPU row implies: {mfu:.3f} (FLOP/token {flops:.4g})")
    print(f"   {'GPUs':<12} {'published':>10} {'plan':>10} {'ratio':>7} {'utilisation':>12}")
    for nodes, published in FSDP_H100.items():
        fsdp_row(f"{nodes * 8}", LLAMA3_8B, nodes, per_gpu, seq, published, h100 | {"mfu": mfu})


def llama3_405b() -> None:
    print("3. Llama 3 405B (arXiv 2407.21783 Table 4): TP 8 x PP 16 x DP, zero2, planned at the published MFU")
    print(
        f"   {'GPUs':>6} {'chunks':>6} {'micro':>6} {'published':>10} {'plan':>8} {'ratio':>7} {'bubble':>7} "
        f"{'TP':>7} {'shard':>7} {'step':>7} {'kernel MFU':>11}"
    )
    for gpus, dp, tokens, tflops, mfu in LLAMA3_RUNS:
        micro = tokens // 8192 // dp  # the batch per data-parallel copy, one sequence a micro-batch
        for chunks in (1, 2):
            request = PlanRequest(
                schemes=PLAIN, shapes=LLAMA3_405B, nodes=(gpus // 8,), gpus_per_node=8, bw=H100_NODE_BW,
                backend="nccl", transport="rdma", accelerator_name="h100-sxm", mfu=mfu, seq_len=8192,
                tokens_per_step=f"{tokens}", tp=8, pp=16, microbatches=micro, virtual_stages=chunks, shard="zero2",
            )  # fmt: skip
            doc = plan(request).doc
            row = doc["rows"][0]
            ours = tokens * doc["compute"]["flops_per_token"] / row["step_time_s"] / gpus / 1e12
            parts = row["parallel"]
            util = row["compute_utilization"]
            print(
                f"   {gpus:>6} {chunks:>6} {micro:>6} {tflops:>10} {ours:>8.0f} {ours / tflops:>7.3f} "
                f"{parts['bubble_fraction']:>7.1%} {parts['tensor_parallel_s']:>6.2f}s "
                f"{parts['shard_exposed_s']:>6.2f}s "
                f"{row['step_time_s']:>6.2f}s {mfu / util:>11.2f}"
            )


def one_node() -> None:
    print("4. One node of 8 H100: Llama 3 8B under FSDP (the smallest cluster plan takes)")
    request = PlanRequest(
        schemes=PLAIN, shapes=LLAMA3_8B, nodes=(1,), gpus_per_node=8, backend="nccl", accelerator_name="h100-sxm",
        mfu=0.4, seq_len=8192, tokens_per_step=f"{8 * 2 * 8192}", shard="zero3", transport="rdma", bw=H100_NODE_BW,
    )  # fmt: skip
    row = step_of(request)
    print(
        f"   step {row['step_time_s']:.3f}s, compute {row['compute_time_s']:.3f}s, utilisation "
        f"{row['compute_utilization']:.1%}, memory a GPU {row['memory']['bytes'] / 1e9:.1f} GB"
    )


def main() -> None:
    fsdp_a100()
    fsdp_h100_scaling()
    llama3_405b()
    one_node()


if __name__ == "__main__":
    main()
