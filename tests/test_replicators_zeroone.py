"""zeroone: 0/1 Adam's schedule against a transliteration of DeepSpeed ZeroOneAdam's counters, the bytes each kind of
step hands to gloo, its compressed exchange against 1-bit Adam's, replicas that agree after every sync, and bad
settings refused.

Declared == handed bytes on every step, agreeing ranks and falling loss on the test preset's settings are also in
test_replicators (as for every replicator).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from dist_harness import run_ranks
from test_replicators import SHAPES, _params, _set_grads
from test_replicators_onebit import _scaled_signs

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.onebit_spec import padded
from netbench.declarations.registry import declared_payload
from netbench.declarations.zeroone_spec import phases, step_kind
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.model.schemes import scheme_from_config
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import workload_shapes
from netbench.orchestrator.run.runner import run
from netbench.replicators.build import build_replicator
from netbench.replicators.onebit import OnebitAdamReplicator
from netbench.replicators.signbits import CompressedAllReduce
from netbench.replicators.zeroone import ZeroOneAdamReplicator
from netbench.shapes import ParamShape
from netbench.workloads.config import WorkloadConfig

NUMEL = sum(math.prod(s) for s in SHAPES)
GRID = dict(var_freeze_step=8, var_update_scaler=2, local_step_scaler=4, local_step_clipper=4)  # the grid's
STEPS = 24
REPO = Path(__file__).resolve().parents[1]


def _deepspeed_kinds(var_freeze_step: int, var_update_scaler: int, local_step_scaler: int, clipper: int, steps: int):
    """ZeroOneAdam.step's counters, line by line for one tensor (its first call only sets buffers up), and what each
    training step does."""
    state = dict(step=1, var_interval=1, var_counter=0, local_step_interval=1, local_step_counter=0)
    freeze_key, kinds = False, []
    for _ in range(steps):
        state["step"] += 1
        if not freeze_key:
            kinds.append("dense" if state["step"] % state["var_interval"] == 0 else "compressed")
        else:
            kinds.append("sync" if state["step"] % state["local_step_interval"] == 0 else "local")
        if not freeze_key:
            if state["step"] % state["var_interval"] == 0:
                state["var_counter"] += 1
                if state["var_counter"] == var_update_scaler:
                    state["var_counter"] = 0
                    state["var_interval"] *= 2
        else:
            state["local_step_counter"] += 1
            if state["local_step_counter"] == local_step_scaler:
                state["local_step_counter"] = 0
                state["local_step_interval"] = min(clipper, state["local_step_interval"] * 2)
        if state["step"] > var_freeze_step:
            freeze_key = True
    return kinds


@pytest.mark.parametrize(
    "settings",
    [(8, 2, 4, 4), (3, 1, 1, 2), (40, 3, 5, 8), (100, 16, 7, 16), (17, 4, 3, 6), (1, 1, 1, 1), (30, 2, 2, 3)],
)
def test_the_schedule_is_zeroone_adams_counters(settings):
    config = ReplicatorConfig(name="zeroone", **dict(zip(GRID, settings, strict=True)))
    steps = 400
    assert [step_kind(config, s) for s in range(1, steps + 1)] == _deepspeed_kinds(*settings, steps)


def test_intervals_double_at_deepspeeds_defaults_until_the_clipper():
    config = ReplicatorConfig(name="zeroone")  # var_freeze_step 100000, kappa 16, local_step_scaler 32678, H 16
    variance = [p for p in phases(config) if p.variance]
    local = [p for p in phases(config) if not p.variance]
    assert [p.interval for p in variance] == [2**j for j in range(len(variance))]
    assert all(sum(p.kind(s) == "dense" for s in range(p.first, p.last + 1)) == 16 for p in variance[:-1])
    assert variance[-1].last == 100_000 and local[0].first == 100_001
    assert [p.interval for p in local] == [1, 2, 4, 8, 16] and local[-1].last == 0
    assert [p.last - p.first + 1 for p in local[:-1]] == [32678] * 4


def test_each_kind_of_step_declares_its_exchange():
    shapes = [ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)]
    config = ReplicatorConfig(name="zeroone", **GRID)
    decl = declared_payload(shapes, config, 4)
    signs = padded(NUMEL, 4) // 8
    compressed = signs + 4 + signs // 4 + 4
    expected = dict(dense=(4 * NUMEL, 1), compressed=(compressed, 4), sync=(compressed, 4), local=(0, 0))
    for step in range(1, 41):
        assert (decl.bytes_on(step), decl.collectives_on(step)) == expected[step_kind(config, step)], step
    lasting = scheme_from_config(config).exchanges(shapes, 4)
    assert [(e.collective, e.period, e.first_sync) for e in lasting] == [
        ("all_to_all", 4, 3),
        ("all_gather", 4, 3),
        ("all_gather", 4, 3),
        ("all_gather", 4, 3),
    ]  # the model prices a sync every local_step_clipper steps, on DeepSpeed's k = step + 1 multiple of 4


def test_the_opening_phases_are_priced_at_their_share_of_the_opening_steps():
    shapes = [ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)]
    config = ReplicatorConfig(name="zeroone", **GRID)
    scheme = scheme_from_config(config)
    opening = scheme.dense_steps(shapes, 4)
    assert opening == 16  # 8 variance-phase steps, 4 at interval 1 and 4 at interval 2
    decl = declared_payload(shapes, config, 4)
    made = sum(decl.bytes_on(s) for s in range(1, opening + 1)) / opening
    priced = sum(e.bytes_per_step / e.period for e in scheme.dense_phase().exchanges(shapes, 4))
    assert priced == pytest.approx(made, rel=0.02)


def _rank_steps(rank: int, world: int, cfg: dict, steps: int) -> dict:
    params = _params(SHAPES)
    rep = build_replicator(params, ReplicatorConfig(**cfg))
    out = {"params": [], "bytes": [], "calls": []}
    for step in range(steps):
        _set_grads(params, rank, step)
        stats = rep.step()
        out["params"].append(torch.cat([p.detach().reshape(-1) for p in params]))
        out["bytes"].append(stats.payload_bytes)
        out["calls"].append(stats.collectives)
    return out


@pytest.mark.parametrize("world", [3])
def test_ranks_agree_after_each_sync_and_drift_between(world):
    cfg = dict(name="zeroone", lr=0.01, **GRID)
    ranks = run_ranks(_rank_steps, world, cfg, STEPS, timeout=90)
    decl = declared_payload([ParamShape(f"p{i}", s) for i, s in enumerate(SHAPES)], ReplicatorConfig(**cfg), world)
    config = ReplicatorConfig(**cfg)
    for step in range(1, STEPS + 1):
        kind = step_kind(config, step)
        same = all(torch.equal(r["params"][step - 1], ranks[0]["params"][step - 1]) for r in ranks)
        assert same == (kind != "local"), (step, kind)
        for r in ranks:
            assert (r["bytes"][step - 1], r["calls"][step - 1]) == (decl.bytes_on(step), decl.collectives_on(step))
    assert not torch.equal(ranks[0]["params"][0], ranks[0]["params"][-1])


def _both_compress(rank: int, world: int, calls: int) -> list[list[torch.Tensor]]:
    """The compressed all-reduce of 0/1 Adam's codec and of 1-bit Adam's, fed the same values on every call."""
    results: list[list[torch.Tensor]] = []
    for name, extra in (("zeroone", {}), ("onebit", {})):
        params = _params(SHAPES)
        rep = build_replicator(params, ReplicatorConfig(name=name, **extra))
        gen = torch.Generator().manual_seed(7 + rank)
        got = []
        for _ in range(calls):
            values = torch.randn(NUMEL, generator=gen)
            rep.compressed.mean(values, _Timer())
            got.append(values)
        results.append(got)
    return results


class _Timer:
    """A StepTimer's calls, timing nothing."""

    def compress(self) -> None: ...

    def skip(self) -> None: ...


def test_the_compressed_exchange_is_onebits_for_the_same_input():
    assert ZeroOneAdamReplicator.__dict__.get("_compressed_mean") is None
    ranks = run_ranks(_both_compress, 3, 4, timeout=60)
    for zeroone, onebit in ranks:
        for a, b in zip(zeroone, onebit, strict=True):
            assert torch.equal(a, b)
    for call in range(4):
        assert all(torch.equal(r[0][call], ranks[0][0][call]) for r in ranks)  # one mean on every rank
    params = _params(SHAPES)
    assert isinstance(build_replicator(params, ReplicatorConfig(name="zeroone")).compressed, CompressedAllReduce)
    assert isinstance(build_replicator(params, ReplicatorConfig(name="onebit")).compressed, CompressedAllReduce)
    assert "_compressed_mean" not in vars(OnebitAdamReplicator)


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize(
    "option,value",
    [
        ("--var-freeze-step", "0"),
        ("--var-update-scaler", "0"),
        ("--local-step-scaler", "-3"),
        ("--local-step-clipper", "0"),
        ("--local-step-clipper", "4096"),
        ("--var-freeze-step", "x"),
    ],
)
def test_bad_settings_exit_2_with_one_line_and_nothing_made(command, option, value, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "netbench", command, "-r", "zeroone", option, value]
        + (["--out", str(out)] if command == "run" else []),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("netbench: error: "), proc.stderr
    assert option in lines[0] and not out.exists()


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_two_node_run_measures_the_declared_bytes_and_its_loss_falls(tmp_path):
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    config = RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="zeroone", lr=2e-4, **GRID),  # the grid's: 5e-4 and up diverge here
        workload=WorkloadConfig(kind="mlp", hidden=128, mlp_layers=2),
        steps=16,
        warmup_steps=16,
        out_dir=tmp_path,
    )
    result = run(config)
    assert result.status == "ok", result.reason
    steps = pd.read_csv(result.run_dir / "steps.csv")
    decl = declared_payload(workload_shapes(config.workload, 2), config.replicator, 2)
    for row in steps.itertuples():
        assert row.payload_bytes == decl.bytes_on(row.step + 1), row.step
    kinds = {step_kind(config.replicator, s) for s in steps["step"] + 1}
    assert kinds == {"dense", "compressed", "sync", "local"}
    loss = steps.groupby("step")["loss"].median()
    assert loss.iloc[-4:].mean() < 0.5 * loss.iloc[0], loss.tolist()


def _rank_params(rank: int, world: int, cfg: dict, steps: int) -> list[torch.Tensor]:
    return _rank_steps(rank, world, cfg, steps)["params"]


def _deepspeed_reference(world: int, config: ReplicatorConfig, steps: int) -> list[list[torch.Tensor]]:
    """DeepSpeed's ZeroOneAdam.step and compressed_allreduce, every rank simulated here on one flat buffer, with its
    arithmetic (local steps undone by subtracting the accumulation); the step kinds are the declaration's, held to
    ZeroOneAdam's counters by test_the_schedule_is_zeroone_adams_counters."""
    full, chunk = padded(NUMEL, world), padded(NUMEL, world) // world
    start = torch.cat([p.detach().reshape(-1) for p in _params(SHAPES)])
    p = [start.clone() for _ in range(world)]
    m = [torch.zeros(NUMEL) for _ in range(world)]
    acc = [torch.zeros(NUMEL) for _ in range(world)]
    v, lrs, lr, b1, b2, eps = torch.zeros(NUMEL), 0.0, config.lr, 0.9, 0.999, 1e-8
    worker_error = [torch.zeros(full) for _ in range(world)]
    server_error = [torch.zeros(chunk) for _ in range(world)]

    def compressed(values: list[torch.Tensor]) -> torch.Tensor:
        sent = []
        for r in range(world):
            x = torch.cat([values[r], torch.zeros(full - NUMEL)]) + worker_error[r]
            out, worker_error[r] = _scaled_signs(x)
            sent.append(out)
        servers = []
        for j in range(world):
            x = sum(s[j * chunk : (j + 1) * chunk] for s in sent) / world + server_error[j]
            out, server_error[j] = _scaled_signs(x)
            servers.append(out)
        return torch.cat(servers)[:NUMEL] * (v > 0)

    out, local = [], False
    for step in range(1, steps + 1):
        grads = [torch.cat([g.reshape(-1) for g in _set_grads(_params(SHAPES), r, step - 1)]) for r in range(world)]
        kind = step_kind(config, step)
        if kind == "dense":
            g = sum(grads) / world
            v = v * b2 + (1 - b2) * g * g
            m = [mr * b1 + (1 - b1) * g for mr in m]
        elif kind == "compressed":
            g = compressed(grads)
            m = [mr * b1 + (1 - b1) * g for mr in m]
        else:
            if not local:
                local = True
                for e in (*worker_error, *server_error):
                    e.zero_()
            m = [mr * b1 + (1 - b1) * gr for mr, gr in zip(m, grads, strict=True)]
            lrs += lr
        d = v.sqrt() + eps
        for r in range(world):
            update = m[r] / d
            p[r] = p[r] - lr * update
            if local:
                acc[r] = acc[r] - lr * update
        if kind == "sync":
            p = [pr - ar for pr, ar in zip(p, acc, strict=True)]
            synced = compressed([ar * d for ar in acc])
            m = [-synced / lrs for _ in range(world)]
            p = [pr + synced / d for pr in p]
            acc, lrs = [torch.zeros(NUMEL) for _ in range(world)], 0.0
        out.append([pr.clone() for pr in p])
    return out


def test_every_rank_takes_deepspeeds_zeroone_adam_steps():
    world, cfg = 3, dict(name="zeroone", lr=1e-3, **GRID)
    ranks = run_ranks(_rank_params, world, cfg, STEPS, timeout=90)
    for step, expected in enumerate(_deepspeed_reference(world, ReplicatorConfig(**cfg), STEPS)):
        for rank, got in enumerate(ranks):
            diff = (got[step] - expected[rank]).abs().max()
            assert torch.allclose(got[step], expected[rank], rtol=1e-5, atol=1e-6), (step + 1, rank, diff)
