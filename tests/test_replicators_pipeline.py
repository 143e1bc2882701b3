"""Pipelined replicators (``bucket_mb`` > 0): bucket cuts, bit-identical results, payload accounting.

Ranks are real gloo processes on 127.0.0.1 (tests/dist_harness.py). Pipelined and one-bucket
runs start from the same parameters and see the same gradients, so their parameters must agree
bit for bit after every step: gathered payloads and the sign of an all-reduced sum always, an all-reduced sum itself
on 2 ranks (on 3 its ring may add the ranks' values in another order per bucket).
"""

from __future__ import annotations

import pytest
import torch
from dist_harness import run_ranks
from test_replicators import configs

from netbench.declarations.buckets import row_band_buckets, slot_ranges
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload, spec
from netbench.declarations.tiling import TilePlan, matrix_shape
from netbench.replicators.base import param_shapes
from netbench.replicators.build import build_replicator

# One huge tensor, one split across buckets by rows, a non-divisible one, many tiny ones, 1-D, 3-D, scalar.
SHAPES = [(96, 40), (37, 24), (20, 9), *[(3,)] * 12, (50,), (4, 6, 5), (), (1, 40)]
STEPS = 5
BUCKET_MB = 0.0003  # 300 B: many buckets for these shapes, in any wire dtype

# Every declared replicator that cuts its step into buckets, with its test preset and variants (but a quantized full
# step, which reduces in one ring and refuses buckets).
CONFIGS = {
    label: cfg
    for label, cfg in configs().items()
    if "bucket_mb" in spec(cfg["name"]).options and not (cfg["name"] == "full" and cfg.get("quant_bits"))
}
DCT = dict(name="dct", chunk=8, topk=4, lr=0.01)  # 8-row tiles: the row-band tests below cut SHAPES' tensors by them


def _order_sensitive(key: str) -> bool:
    """Whether pipelining may change the result in its last bits: an all-reduced sum whose update is not its sign
    (the ring adds three ranks' values in another order per bucket)."""
    declared = spec(CONFIGS[key]["name"])
    return declared.collective.startswith("all-reduce") and "sign" not in declared.options


def _ulps(key: str) -> float:
    """How far another summation order may move a result after STEPS steps: two units in the last place of a bf16
    wire, 1e-5 of an fp32 one."""
    wire = {CONFIGS[key].get("grad_dtype", "fp32"), CONFIGS[key].get("value_dtype", "fp32")}
    return max(1e-5, 2 * torch.finfo(torch.bfloat16).eps) if "bf16" in wire else 1e-5


def test_slot_ranges_cover_the_buffer_evenly():
    assert slot_ranges(100, 4, 0) == [(0, 100)]
    assert slot_ranges(100, 4, 400) == [(0, 100)]
    ranges = slot_ranges(100, 4, 120)
    assert len(ranges) == 4 and ranges[0][0] == 0 and ranges[-1][1] == 100
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1
    assert slot_ranges(3, 4, 1) == [(0, 1), (1, 2), (2, 3)]  # never an empty bucket


@pytest.mark.parametrize("target", [0, 50, 200, 700, 10**9])
def test_row_bands_keep_every_tile_and_split_tensors(target):
    chunk, topk, per = 8, 4, 6
    buckets = row_band_buckets(SHAPES, chunk, topk, per, target)
    whole = TilePlan(SHAPES, chunk, topk).coefficients
    assert sum(TilePlan([(p.rows, p.cols) for p in b], chunk, topk).coefficients for b in buckets) == whole
    covered = {t: 0 for t in range(len(SHAPES))}
    for bucket in buckets:
        for p in bucket:
            assert p.row0 == covered[p.tensor] and p.row0 % chunk == 0  # in order, whole tile rows
            covered[p.tensor] += p.rows
    assert covered == {t: matrix_shape(s)[0] for t, s in enumerate(SHAPES)}
    if target in (0, 10**9):
        assert len(buckets) == 1
    if target == 200:  # the 96-row tensor (12 tile rows, 240 B each) spans several buckets
        assert len({i for i, b in enumerate(buckets) for p in b if p.tensor == 0}) > 1
        assert len(buckets) > 5


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]


def _body(rank: int, world: int, cfg: dict, bucket_mb: float) -> dict:
    config = ReplicatorConfig(**cfg, bucket_mb=bucket_mb)
    params = _params()
    rep = build_replicator(params, config)
    decl = declared_payload(param_shapes(params), config, world)
    out = {
        "params": [],
        "bytes": [],
        "calls": [],
        "decl_bytes": decl.bytes_on(1),
        "decl_calls": decl.collectives_on(1),
        "lanes": rep.comm.lanes,
        "lane_timeouts": rep.comm.lane_timeouts(),
    }
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(1000 * rank + step + 1)
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        stats = rep.step()
        out["params"].append([p.detach().clone() for p in params])
        out["bytes"].append(stats.payload_bytes)
        out["calls"].append(stats.collectives)
    return out


def _both(world: int, key: str) -> tuple[list[dict], list[dict]]:
    return run_ranks(_body, world, CONFIGS[key], 0.0), run_ranks(_body, world, CONFIGS[key], BUCKET_MB)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("key", list(CONFIGS))
def test_pipelined_equals_one_bucket_and_replicas_agree(world, key):
    from netbench.declarations.buckets import lanes_for

    plain, piped = _both(world, key)
    assert piped[0]["decl_calls"] > 1, "the test must actually pipeline"
    # a lane (process group) per two buckets, so the buckets' collectives travel at once
    lanes = [r["lanes"] for r in piped]
    assert lanes == [lanes_for(piped[0]["decl_calls"])] * world and lanes[0] > 1
    assert [r["lanes"] for r in plain] == [1] * world
    # every lane keeps the world's collective timeout (a stalled bucket fails as fast as any collective)
    assert all(len(set(r["lane_timeouts"])) == 1 and r["lane_timeouts"][0] is not None for r in piped)
    for rank in range(world):
        for step in range(STEPS):
            # Replicas identical after every step.
            for a, b in zip(piped[0]["params"][step], piped[rank]["params"][step]):
                assert torch.equal(a, b), (key, rank, step)
            for a, b in zip(plain[rank]["params"][step], piped[rank]["params"][step]):
                if _order_sensitive(key) and world > 2:
                    torch.testing.assert_close(a, b, rtol=_ulps(key), atol=_ulps(key) / 10)
                else:
                    assert torch.equal(a, b), (key, rank, step)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_declared_payload_equals_what_is_handed_pipelined(key):
    for r in run_ranks(_body, 2, CONFIGS[key], BUCKET_MB):
        assert r["bytes"] == [r["decl_bytes"]] * STEPS
        assert r["calls"] == [r["decl_calls"]] * STEPS and r["decl_calls"] > 1


def test_one_rank_pipelined_runs_without_a_process_group():
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(name="dct", chunk=8, topk=4, bucket_mb=BUCKET_MB))
    for p in params:
        p.grad = torch.ones_like(p)
    stats = rep.step()
    assert stats.collectives == len(rep.units) > 1


@pytest.mark.parametrize("command", [["run"], ["plan"], ["sweep", "--dry-run"]])
def test_bad_bucket_mb_is_one_line_and_exit_2(command, tmp_path):
    import subprocess

    done = subprocess.run(
        ["netbench", *command, "--bucket-mb", "-3", "--out", str(tmp_path / "o")]
        if command[0] != "plan"
        else ["netbench", "plan", "--bucket-mb", "-3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--bucket-mb" in done.stderr and len(done.stderr.strip().splitlines()) == 1


# --- backward overlap (replicators/backward.py): buckets launched from post-accumulate-grad hooks ---

WORKLOADS = {
    "transformer": dict(kind="transformer", d_model=32, n_layers=2, n_heads=2, seq_len=16, batch_size=4),
    "mlp": dict(kind="mlp", in_dim=8, hidden=24, mlp_layers=2, batch_size=16),
}


def _train(rank: int, world: int, work: dict, cfg: dict, bucket_mb: float, hooks: bool) -> dict:
    """STEPS steps of a built-in workload with the dct replicator, hooks on or off."""
    from netbench.workloads import build_workload
    from netbench.workloads.config import WorkloadConfig

    workload = build_workload(WorkloadConfig(**work), rank, world)
    rep = build_replicator(workload.parameters(), ReplicatorConfig(**cfg, bucket_mb=bucket_mb))
    overlap = rep.attach_backward_hooks() if hooks else None
    out = {
        "params": [],
        "launched_in_backward": [],
        "buckets": len(rep.units),
        "bytes": [],
        "calls": [],
        "codec_cpu": [],
    }
    for _ in range(STEPS):
        workload.compute_step()
        if overlap is not None:
            out["launched_in_backward"].append(overlap._launched)
        stats = rep.step()
        out["params"].append([p.detach().clone() for p in workload.parameters()])
        out["bytes"].append(stats.payload_bytes)
        out["calls"].append(stats.collectives)
        out["codec_cpu"].append(stats.compress_cpu_s + stats.decode_cpu_s)
    return out


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("bucket_mb", [0.0, BUCKET_MB])
def test_backward_overlap_is_bit_identical_and_replicas_agree(workload, bucket_mb):
    cfg = DCT
    plain = run_ranks(_train, 2, WORKLOADS[workload], cfg, bucket_mb, False)
    hooked = run_ranks(_train, 2, WORKLOADS[workload], cfg, bucket_mb, True)
    if bucket_mb:
        assert hooked[0]["buckets"] > 1, "the test must actually pipeline"
    # Every bucket was launched from backward (all parameters get gradients), in every step.
    assert hooked[0]["launched_in_backward"] == [hooked[0]["buckets"]] * STEPS
    # ... and its encode and decode CPU time is still booked to the codec (the codec-speed check reads it)
    assert all(cpu > 0 for cpu in hooked[0]["codec_cpu"]), hooked[0]["codec_cpu"]
    for rank in range(2):
        assert hooked[rank]["bytes"] == plain[rank]["bytes"] and hooked[rank]["calls"] == plain[rank]["calls"]
        for step in range(STEPS):
            for a, b in zip(hooked[0]["params"][step], hooked[rank]["params"][step]):
                assert torch.equal(a, b), (workload, rank, step)  # replicas identical after every step
            for a, b in zip(plain[rank]["params"][step], hooked[rank]["params"][step]):
                assert torch.equal(a, b), (workload, rank, step)  # the same bits as without hooks


def _partial_backward(rank: int, world: int) -> list[list[torch.Tensor]]:
    """Hooks attached, but one step has no backward and another leaves a parameter without a gradient."""
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(**DCT, bucket_mb=BUCKET_MB))
    overlap = rep.attach_backward_hooks() if rank >= 0 else None
    out = []
    for step in range(3):
        gen = torch.Generator().manual_seed(100 * rank + step)
        targets = [torch.randn(p.shape, generator=gen) for p in params]
        if step == 0:  # no backward: the step launches every bucket itself
            for p, t in zip(params, targets):
                p.grad = t.clone()
        else:
            for p in params:
                p.grad = None
            used = params[:-2] if step == 2 else params  # step 2: the last two parameters get no gradient
            sum(((p - t) ** 2).sum() for p, t in zip(used, targets)).backward()
        rep.step()
        out.append([p.detach().clone() for p in params])
    if overlap is not None:
        overlap.remove()
    return out


def test_backward_overlap_without_backward_or_with_unused_parameters():
    runs = run_ranks(_partial_backward, 2)
    for step in range(3):
        for a, b in zip(runs[0][step], runs[1][step]):
            assert torch.equal(a, b), step


def test_dct_buckets_run_in_reverse_parameter_order():
    buckets = row_band_buckets(SHAPES, 8, 4, 6, 200, reverse=True)
    order = [p.tensor for b in buckets for p in b]
    assert order[0] == len(SHAPES) - 1 and order == sorted(order, reverse=True)
    forward = row_band_buckets(SHAPES, 8, 4, 6, 200)
    assert len(buckets) == len(forward)


@pytest.mark.parametrize("workload", ["mlp", "shapes"])
def test_worker_attaches_hooks_for_builtin_workloads_and_trains_the_same(tmp_path, workload):
    """Through `python -m netbench.worker`: the start record says whether hooks ran, the losses match bit for bit."""
    from test_worker import finish, launch, records, write_specs

    from netbench.workloads import WorkloadConfig

    work = (
        WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2, batch_size=32)
        if workload == "mlp"
        else WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=1,ffn=128,vocab=64", compute_ms=1)
    )
    losses = {}
    for on in (True, False):
        out = tmp_path / str(on)
        out.mkdir()
        config = ReplicatorConfig(**DCT, bucket_mb=0.002, overlap_backward=on)
        specs = write_specs(out, 2, steps=3, warmup_steps=1, replicator=config, workload=work, timeout_s=30)
        assert finish([launch(s, out) for s in specs]) == [0, 0], (out / "spec0.log").read_text()
        lines = records(out / "rank0.jsonl")
        assert lines[0]["overlap_backward"] is (on and workload == "mlp")
        assert all(r["collectives"] > 1 for r in lines if r["event"] == "step")
        losses[on] = [r["loss"] for r in lines if r["event"] == "step"]
    assert losses[True] == losses[False]


def test_backward_overlap_refuses_a_second_backward_in_one_step():
    params = _params()
    rep = build_replicator(params, ReplicatorConfig(**DCT, bucket_mb=BUCKET_MB))
    rep.attach_backward_hooks()
    sum((p**2).sum() for p in params).backward()
    with pytest.raises(RuntimeError, match="one backward per step"):
        sum((p**2).sum() for p in params).backward()


def test_ready_schedule_decodes_what_has_arrived_and_blocks_only_after_the_last_start():
    """pipeline_policy.READY: a completed collective is decoded at the next start; an unfinished one never blocks
    an encode."""
    from netbench.declarations.pipeline_policy import READY
    from netbench.replicators.pipeline import run_pipeline

    events: list[str] = []
    arrived = {0: True, 1: False, 2: True, 3: False}  # bucket 1 is slow on the wire

    class Fake:
        def __init__(self, i: int) -> None:
            self.i = i

        def done(self) -> bool:
            return arrived[self.i]

        def wait(self) -> None:
            events.append(f"W{self.i}")

    class Timer:
        def compress(self) -> None: ...
        def skip(self) -> None: ...
        def decode(self) -> None: ...

    run_pipeline(4, lambda i: events.append(f"E{i}"), Fake, lambda i: events.append(f"D{i}"), Timer(), READY)
    # bucket 0 arrived: decoded after E1; bucket 1 not arrived: E2, E3 go on; the rest drains in order
    assert events == ["E0", "E1", "W0", "D0", "E2", "E3", "W1", "D1", "W2", "D2", "W3", "D3"]


def test_model_of_the_ready_schedule_is_the_better_fixed_schedule():
    from netbench.model.overlap import pipelined_step_s

    # E 0.4, D 0.2, C 0.6 on 4 buckets: one behind 0.1 + 3 x max(0.15, 0.15) + 0.15 + 0.05 = 0.75;
    # encode-first max(0.6, 0.1 + 0.15 + 0.2, 0.4 + 0.15 + 0.05, 0.1 + 0.6 + 0.05) = 0.75
    assert pipelined_step_s(0.4, 0.2, 0.6, 4, 0) == min(
        pipelined_step_s(0.4, 0.2, 0.6, 4, 1), pipelined_step_s(0.4, 0.2, 0.6, 4, None)
    )
    # a delayed link, codec-bound: E 0.4, D 0.2, C 0.2 on 2 buckets: one behind 0.2 + max(0.3, 0.1) + 0.1 + 0.1 = 0.7,
    # encode-first max(0.6, 0.2 + 0.1 + 0.2, 0.4 + 0.1 + 0.1, 0.2 + 0.2 + 0.1) = 0.6
    assert abs(pipelined_step_s(0.4, 0.2, 0.2, 2, 0) - 0.6) < 1e-12
