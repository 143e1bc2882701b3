"""`run --shard zero3|hsdp`: torch's fully_shard on netbench's collectives, and the model's price of it.

Three levels: the layers FSDP gathers and the bytes the model says it hands to collectives (pure); the sharded
step in real gloo processes on localhost (FSDP over 4 ranks, HSDP over 2 sites of 2 with DiLoCo between them:
one model after a sync, the bytes handed to the sharding collectives equal the model's, the loss falls); and the
command line, which refuses the combinations that cannot run in one line, exit code 2.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.declarations.shards import shard_units, unit_of
from netbench.emulation.spec import ClusterSpec
from netbench.model import sharding
from netbench.model.calibration import Calibration
from netbench.model.network import GraphModel
from netbench.orchestrator import prediction
from netbench.orchestrator.config import RunConfig
from netbench.rundir.segments import slowest_pieces_s
from netbench.rundir.steps_schema import Col
from netbench.shapes import ParamShape
from netbench.topology import DirectionSpec, uniform_sites
from netbench.worker.sharding import segments_s
from netbench.worker.spec import WorkerSpec
from tests.dist_harness import run_ranks

LAN, WAN = DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=100e6, delay_s=0.02)
MLP = {"kind": "mlp", "hidden": 32, "mlp_layers": 2, "batch_size": 64}
WIDE = {"kind": "mlp", "hidden": 512, "mlp_layers": 2}  # layers of a megabyte: the payload, not the framing, counts


# ---- the layers and their bytes (pure) ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, unit",
    [
        ("0.weight", "0"),  # a Sequential's child
        ("blocks.3.fc.weight", "blocks.3"),  # a ModuleList opened, the block gathered whole
        ("head.weight", "head"),
        ("weight", ""),  # the root's own
    ],
)
def test_a_parameter_is_gathered_with_its_layer(name: str, unit: str) -> None:
    assert unit_of(name) == unit


def test_the_payload_is_a_share_of_each_gather_and_the_whole_reduce_scatter() -> None:
    shapes = [ParamShape("0.weight", (5, 3)), ParamShape("0.bias", (5,)), ParamShape("scale", (2,))]
    assert list(shard_units(shapes)) == ["0", ""]
    # 5 rows padded to 6 over 2 ranks: (6 * 3 + 6) fp32; every layer, the root's own too, gathered twice
    assert sharding.fsdp_layers(shapes, 2) == [24 * 4.0, 2 * 4.0]
    assert sharding.fsdp_payload_bytes(shapes, 2) == (96 + 8) * (1 + 2 / 2)


def test_a_spec_shards_weights_only_over_groups_of_two_or_more() -> None:
    with pytest.raises(ValueError, match="two or more ranks"):
        WorkerSpec(rank=0, world_size=2, iface="lo", out_path="x", shard_weights=True)
    spec = WorkerSpec(rank=0, world_size=2, iface="lo", out_path="x", shard_weights=True, shard_groups=((0, 1),))
    assert spec.sharded


def test_fsdp_alone_is_local_work_codec_and_three_ring_passes_of_the_model() -> None:
    link = DirectionSpec(rate_bps=100e6)
    config = RunConfig(
        cluster=ClusterSpec(nodes=4, up=link, down=link), shard="fsdp", replicator={"name": "full"}, workload=WIDE
    )
    assert config.shard == "zero3" and config.shard_layout().shards == ((0, 1, 2, 3),)
    shapes = prediction.workload_shapes(config.workload, 4)
    est = prediction.predict(config, shapes, 0.05, Calibration(), codec_s=(0.001, 0.0))
    assert est.step_time_s == pytest.approx(0.05 + 0.001 + est.comm_time_s)
    assert est.intra_time_s == est.comm_time_s  # all of it the sharding group's, where the run books its collectives
    model_bytes = sum(sharding.fsdp_layers(shapes, 4))
    # what a node hands to other nodes: a quarter of each layer twice (the gathers), each layer whole (reduce-scatter)
    assert est.payload_bytes_per_step == pytest.approx(1.5 * model_bytes)
    sent = est.tx.total  # the payload and its framing (headers, ACKs of what it receives)
    assert 3 * 0.75 * model_bytes < sent < 1.1 * 3 * 0.75 * model_bytes
    slower = DirectionSpec(rate_bps=100e6, delay_s=0.02)
    delayed = config.model_copy(update={"cluster": ClusterSpec(nodes=4, up=slower, down=slower)})
    later = prediction.predict(delayed, shapes, 0.05, Calibration(), codec_s=(0.001, 0.0))
    hops = 3 * (2 + 2 + 2 * 1)  # per layer: two gathers' 3 hops, a reduce-scatter's 3 rounds of two delays
    assert later.comm_time_s - est.comm_time_s >= hops * 0.02


def test_hsdp_charges_fsdp_on_the_site_lan_in_place_of_flexdemo() -> None:
    topology = uniform_sites(2, 2, LAN, LAN, WAN)
    cluster = ClusterSpec(nodes=4, up=LAN, down=LAN, topology=topology)
    hsdp = RunConfig(cluster=cluster, shard="hsdp", shard_within="site", replicator={"name": "diloco"}, workload=MLP)
    flexdemo = hsdp.model_copy(update={"shard": "none"})
    shapes = prediction.workload_shapes(hsdp.workload, 4)
    calib = Calibration()
    base = prediction.predict(flexdemo, shapes, 0.05, calib, codec_s=(0.0, 0.0))
    est = prediction.predict(hsdp, shapes, 0.05, calib, codec_s=(0.0, 0.0))
    graph = GraphModel(topology, cluster.placement)
    fsdp = sharding.fsdp_cost(graph.layout_rings("sites")[0], shapes, est.scenario, calib)
    assert est.intra_time_s == pytest.approx(fsdp.time_s)
    assert est.step_time_s - base.step_time_s == pytest.approx(fsdp.time_s - base.intra_time_s)
    # the replicator between sites, as without the weights sharded, and FSDP's collectives on the site's LAN
    fsdp_bytes = sharding.fsdp_payload_bytes(shapes, 2)
    assert fsdp_bytes > 0
    assert est.payload_bytes_per_step == pytest.approx(base.payload_bytes_per_step + fsdp_bytes)


def _sharded_steps(intra: int) -> pd.DataFrame:
    """Two nodes of one worker each, two measured steps: the replicator hands 100 bytes a step, the sharding group's
    collectives ``intra``."""
    rows = [
        {Col.RANK: r, Col.STEP: s, Col.WARMUP: False, Col.NODE: r, Col.LOCAL_RANK: 0, Col.PAYLOAD_BYTES: 100}
        | {Col.INTRA_PAYLOAD_BYTES: intra, Col.INTRA_COMM_S: 0.1}
        for r in range(2)
        for s in range(2)
    ]
    return pd.DataFrame(rows)


def test_a_sharded_runs_payload_counts_the_sharding_collectives() -> None:
    """With the weights sharded a node's gathers and reduce-scatters reach the other nodes: they are payload. Workers
    sharding inside their node keep them on the intra-node link, and the payload is the replicator's alone."""
    from netbench.orchestrator.run.sharding_results import sharding_summary

    sharded = sharding_summary(_sharded_steps(900), "median", weights_sharded=True)
    assert sharded["payload_bytes_per_step"] == 1000 and sharded["worker_payload_bytes_per_step"] == 1000
    inside = sharding_summary(_sharded_steps(900), "median")
    assert inside["payload_bytes_per_step"] == 100


def test_the_pieces_of_compute_are_what_lies_between_the_calls() -> None:
    pieces = segments_s(10.0, 20.0, [(11.0, 12.5), (13.0, 16.0)])
    assert pieces == pytest.approx((1.0, 0.5, 4.0)) and sum(pieces) == pytest.approx(10.0 - 1.5 - 3.0)
    assert segments_s(0.0, 2.0, []) == (2.0,)


def test_each_piece_waits_for_its_groups_slowest_rank() -> None:
    """Two ranks that take turns being slow: the step waits for the slower of each piece, more than either's whole."""
    steps = pd.DataFrame(
        {
            Col.STEP: [3, 3, 3, 3, 4, 4],
            Col.SHARD_GROUP: [0, 0, 1, 1, 0, 0],
            Col.INTRA_SEGMENTS_S: ["0.1 0.3", "0.3 0.1", "0.1 0.1", "0.1 0.1", "0.2 0.2", "0.1 0.1 0.1"],
        }
    )
    out = slowest_pieces_s(steps)
    assert out[3] == pytest.approx(0.6)  # group 0: 0.3 + 0.3, though each rank computed 0.4
    assert out[4] == pytest.approx(0.4)  # pieces that do not line up: the slowest rank's whole
    assert slowest_pieces_s(steps.drop(columns=[Col.INTRA_SEGMENTS_S])) is None


def test_the_replay_takes_the_slowest_pieces_as_the_local_work() -> None:
    rows = [
        {Col.RANK: r, Col.STEP: 1, Col.WARMUP: False, Col.STEP_S: 1.0, Col.COMPUTE_S: 0.4, Col.APPLY_S: 0.05}
        for r in range(2)
    ]
    steps = pd.DataFrame(rows)
    assert prediction.local_time_s(steps) == pytest.approx(0.45)
    steps[Col.SHARD_GROUP] = 0
    steps[Col.INTRA_SEGMENTS_S] = ["0.1 0.3", "0.3 0.1"]
    assert prediction.local_time_s(steps) == pytest.approx(0.65)


# ---- the sharded step in gloo processes --------------------------------------------------------


STEPS = 6


def _body(rank: int, world: int, shards: tuple, settings: dict) -> dict:
    """The worker's own path from its spec to the fully sharded replicator, then STEPS steps of the MLP workload."""
    import torch.distributed as dist

    from netbench.replicators.build import build_replicator
    from netbench.worker.sharding import sharded_replicator
    from netbench.workloads import build_workload
    from netbench.workloads.config import WorkloadConfig

    workload = build_workload(WorkloadConfig(**MLP), rank, world)
    config = ReplicatorConfig(**settings)
    spec = WorkerSpec(
        rank=rank,
        world_size=world,
        iface="lo",
        out_path="x",
        replicator=config,
        shard_groups=shards,
        shard_weights=True,
    )
    names = [s.name for s in workload.param_shapes()]
    rep = sharded_replicator(SimpleNamespace(model=workload.model), spec, build_replicator, names)
    stats = []
    for _ in range(STEPS):
        loss = workload.compute_step()
        s = rep.step()
        stats.append(
            (loss, s.payload_bytes, s.intra_payload_bytes, s.intra_collectives, s.intra_in_compute_s, s.intra_calls)
        )
    digests = [None] * world
    dist.all_gather_object(digests, rep.digests())
    return {"stats": stats, "digests": digests, "shapes": [(p.name, p.shape) for p in workload.param_shapes()]}


def _shapes(result: dict) -> list[ParamShape]:
    return [ParamShape(n, tuple(s)) for n, s in result["shapes"]]


def test_fsdp_over_four_ranks_trains_one_model_and_hands_the_model_its_bytes() -> None:
    results = run_ranks(_body, 4, ((0, 1, 2, 3),), {"name": "full", "lr": 0.01}, timeout=180)
    digests = results[0]["digests"]
    assert len({d["model_sha256"] for d in digests}) == 1  # the shards make one model
    assert len({d["shard_sha256"] for d in digests}) == 4  # each rank holds its own shards
    shapes = _shapes(results[0])
    layers = len(shard_units(shapes))
    for r in results:
        assert [s[1] for s in r["stats"]] == [0] * STEPS  # one sharding group: the replicator reaches no other rank
        assert [s[2] for s in r["stats"]] == [sharding.fsdp_payload_bytes(shapes, 4)] * STEPS
        assert [s[3] for s in r["stats"]] == [3 * layers] * STEPS  # per layer: two gathers and a reduce-scatter
        assert all(s[4] > 0 for s in r["stats"])  # they ran inside forward and backward
        for s in r["stats"]:  # each call's start and end handed to the worker, one after another
            edges = [t for call in s[5] for t in call]
            assert len(s[5]) == s[3] and edges == sorted(edges)
            assert sum(b - a for a, b in s[5]) == pytest.approx(s[4], rel=1e-3)
    mean_loss = [sum(r["stats"][i][0] for r in results) / 4 for i in range(STEPS)]
    assert mean_loss[-1] < mean_loss[0]


def test_hsdp_syncs_the_sites_shards_with_diloco() -> None:
    settings = {"name": "diloco", "lr": 0.01, "sync_every": 3, "bucket_mb": 0}
    shards = ((0, 2), (1, 3))  # sites of ranks 0, 2 and 1, 3
    results = run_ranks(_body, 4, shards, settings, timeout=180)
    digests = results[0]["digests"]
    assert len({d["model_sha256"] for d in digests}) == 1  # STEPS is a multiple of sync_every: one model at the end
    assert digests[0]["shard_sha256"] == digests[1]["shard_sha256"]  # same shards, one per site
    assert digests[0]["shard_sha256"] != digests[2]["shard_sha256"]
    shapes = _shapes(results[0])
    config = ReplicatorConfig(**settings)
    own = [ParamShape(n, (-(-s[0] // 2), *s[1:])) for n, s in ((p.name, p.shape) for p in shapes)]
    declared = declared_payload(own, config, 2)
    for r in results:
        assert [s[2] for s in r["stats"]] == [sharding.fsdp_payload_bytes(shapes, 2)] * STEPS
        assert [s[1] for s in r["stats"]] == [declared.bytes_on(step + 1) for step in range(STEPS)]


# ---- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shard", "fsdp", "-r", "dct"], "--shard zero3: nothing is replicated between groups"),
        (["--shard", "zero3", "-r", "full", "-w", "shapes"], "the shapes workload has none"),
        (["--shard", "hsdp", "-r", "diloco"], "--shard hsdp: shards within each site"),
        (["--shard", "zero3", "-r", "full", "-G", "2"], "one worker each (--gpus-per-node 1, not 2)"),
        (["--shard", "hsdp", "-r", "diloco", "-G", "2", "--topology", "sites", "--shard-within", "site"], "not 2"),
        (["--shard", "zero2"], "--shard: Input should be"),
    ],
)
def test_bad_combinations_exit_2_in_one_line(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "netbench", "run", "-n", "4", "--steps", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr


class _RootScaled(torch.nn.Module):
    """A layer and a parameter of the root's own: the root is gathered like any layer."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(8))
        self.lin = torch.nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x * self.scale)


def _fsdp_full(model: torch.nn.Module, rank: int, world: int) -> Any:
    """``full`` over FSDP on one sharding group of every rank, as a worker builds it."""
    from netbench.replicators.build import build_replicator
    from netbench.worker.sharding import sharded_replicator

    spec = WorkerSpec(
        rank=rank,
        world_size=world,
        iface="lo",
        out_path="x",
        replicator=ReplicatorConfig(name="full"),
        shard_groups=((0, 1),),
        shard_weights=True,
    )
    return sharded_replicator(SimpleNamespace(model=model), spec, build_replicator, None)


def _root_body(rank: int, world: int) -> list[tuple[int, int]]:

    torch.manual_seed(0)
    model = _RootScaled()
    rep = _fsdp_full(model, rank, world)
    out = []
    for _ in range(2):
        model.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        stats = rep.step()
        out.append((stats.intra_collectives, stats.intra_payload_bytes))
    return out


def test_the_roots_own_parameters_are_gathered_like_a_layer() -> None:
    shapes = [ParamShape("scale", (8,)), ParamShape("lin.weight", (6, 8)), ParamShape("lin.bias", (6,))]
    for per_step in run_ranks(_root_body, 2, timeout=120):
        assert per_step == [(6, sharding.fsdp_payload_bytes(shapes, 2))] * 2


def test_the_weights_of_a_layer_stay_sharded_between_steps() -> None:
    """After a step each rank holds only its shard of every parameter (torch's DTensor), not the whole model."""
    results = run_ranks(_local_shapes, 2, timeout=120)
    for r in results:
        assert all(local[0] == -(-full[0] // 2) for full, local in r)


def _local_shapes(rank: int, world: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    from netbench.workloads import build_workload
    from netbench.workloads.config import WorkloadConfig

    workload = build_workload(WorkloadConfig(**MLP), rank, world)
    rep = _fsdp_full(workload.model, rank, world)
    workload.compute_step()
    rep.step()
    return [(tuple(p.shape), tuple(p.to_local().shape)) for p in workload.model.parameters()]
