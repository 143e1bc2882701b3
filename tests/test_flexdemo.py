"""FlexDeMo: G workers per node shard inside it and replicate between nodes.

Three levels: the layout arithmetic (pure), the sharded step in real gloo processes on
localhost (every replicator keeps every node's model identical), and `netbench run
--gpus-per-node` through the installed console script in emulated namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from netbench.declarations.shards import shard_shapes
from netbench.replicators.sharded import ShardLayout
from netbench.shapes import ParamShape, total_params
from netbench.worker.groups import Layout
from tests.dist_harness import run_ranks

NETBENCH = str(Path(sys.executable).parent / "netbench")  # the console script of this environment


# ---- layout (pure) -------------------------------------------------------------------------


def test_groups_partition_the_world_two_ways() -> None:
    lay = Layout.per_node(nodes=3, g=2)
    shards = [lay.shard_ranks(n) for n in range(3)]
    replicas = [lay.replica_ranks(local) for local in range(2)]
    assert shards == [[0, 1], [2, 3], [4, 5]] and replicas == [[0, 2, 4], [1, 3, 5]]
    for rank in range(lay.world_size):  # each rank is in exactly one of each, and they meet only in it
        (s,) = [g for g in shards if rank in g]
        (r,) = [g for g in replicas if rank in g]
        assert set(s) & set(r) == {rank}
    with pytest.raises(ValueError):
        Layout.per_node(nodes=2, g=0)


@pytest.mark.parametrize("g", [1, 2, 3, 4])
def test_pack_unpack_round_trip_with_padding(g: int) -> None:
    tensors = [torch.randn(5, 3), torch.randn(7), torch.randn(1, 4), torch.randn(8, 2, 2)]
    layout = ShardLayout.of([t.shape for t in tensors], g)
    buf = torch.full((g, layout.row_numel), float("nan"))
    layout.pack(tensors, buf)
    assert not torch.isnan(buf).any()  # padding is zeros, written
    out = [torch.empty_like(t) for t in tensors]
    layout.unpack(buf, out)
    assert all(torch.equal(a, b) for a, b in zip(tensors, out))
    # row r holds rows [r*c, (r+1)*c) of each parameter, zeros past its end
    c = -(-5 // g)
    for r in range(g):
        got, want = layout.row(buf[r], 0), tensors[0][r * c : (r + 1) * c]
        assert torch.equal(got[: len(want)], want) and not got[len(want) :].any()


def test_slice_shapes_cover_the_model_with_padding_only() -> None:
    shapes = [ParamShape("w", (6, 4)), ParamShape("b", (5,)), ParamShape("e", (1, 8))]
    slices = shard_shapes(shapes, 2)
    assert [s.shape for s in slices] == [(3, 4), (3,), (1, 8)]
    assert 2 * total_params(slices) - total_params(shapes) == 1 + 8  # b's one padded row, e's padded row


# ---- the sharded step in real gloo processes -------------------------------------------


def _step_body(rank: int, world: int, g: int, name: str, steps: int) -> dict:
    import torch.distributed as dist

    from netbench.declarations.config import ReplicatorConfig
    from netbench.replicators.build import build_replicator
    from netbench.replicators.sharded import ShardedReplicator, ring_reduce_scatter
    from netbench.worker.groups import build_groups

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(9, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    params = list(model.parameters())
    groups = build_groups(Layout.per_node(world // g, g), rank)
    # reduce-scatter round trip: every rank contributes rank + 1 everywhere
    layout = ShardLayout.of([p.shape for p in params], g)
    buf = torch.zeros(g, layout.row_numel)
    layout.pack([torch.full_like(p, rank + 1.0) for p in params], buf)
    mine = ring_reduce_scatter(buf, groups.shard_ranks, groups.local_rank, groups.shard).clone()
    expect = torch.zeros(g, layout.row_numel)
    layout.pack([torch.full_like(p, float(sum(r + 1 for r in groups.shard_ranks))) for p in params], expect)
    rs_ok = torch.equal(mine, expect[groups.local_rank])
    extra = {"sync_every": 2} if name == "diloco" else {}
    rep = ShardedReplicator(
        params,
        ReplicatorConfig(name=name, **extra),
        build_replicator,
        groups.shard,
        groups.shard_ranks,
        groups.local_rank,
        groups.replica,
    )
    gen = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(32, 9, generator=gen), torch.randn(32, 3, generator=gen)
    losses, inter, intra = [], [], []
    for _ in range(steps):
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        stats = rep.step()
        losses.append(float(loss.detach()))
        inter.append(stats.payload_bytes)
        intra.append(stats.intra_payload_bytes)
    out = [None] * world
    dist.all_gather_object(out, rep.digests())
    return {"rs_ok": rs_ok, "digests": out, "losses": losses, "inter": inter, "intra": intra}


@pytest.mark.parametrize("nodes, g", [(2, 2), (4, 2), (2, 4), (3, 2)])
@pytest.mark.parametrize("name", ["full", "dct", "random", "diloco"])
def test_sharded_step_keeps_every_node_identical(name: str, nodes: int, g: int) -> None:
    results = run_ranks(_step_body, nodes * g, g, name, 4)
    lay = Layout.per_node(nodes, g)
    assert all(r["rs_ok"] for r in results)
    digests = results[0]["digests"]
    assert len({d["model_sha256"] for d in digests}) == 1  # shards reassemble into one model on every node
    for local in range(g):
        assert len({digests[r]["shard_sha256"] for r in lay.replica_ranks(local)}) == 1  # replicas agree
    assert len({digests[lay.shard_ranks(0)[i]]["shard_sha256"] for i in range(g)}) == g  # the slices differ
    assert results[0]["intra"][0] > 0 and sum(results[0]["inter"]) > 0


# ---- netbench run --gpus-per-node through the console script ---------------------------------


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("name", ["dct", "diloco"])
def test_netbench_run_with_two_workers_per_node(tmp_path: Path, name: str) -> None:
    extra = ["--sync-every", "2"] if name == "diloco" else []  # 6 steps: the last one syncs, so nodes agree after it
    out = subprocess.run(
        [
            NETBENCH,
            "run",
            "-r",
            name,
            *extra,
            "--nodes",
            "2",
            "--gpus-per-node",
            "2",
            "--intra-bw",
            "1gbit",
            "-w",
            "mlp",
            "--steps",
            "4",
            "--warmup",
            "2",
            "--bw",
            "100mbit",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    run_dir = Path(summary["run_dir"])
    done = [
        next(
            json.loads(line)
            for line in (run_dir / "workers" / f"rank{r}.jsonl").read_text().splitlines()
            if '"event": "done"' in line
        )
        for r in range(4)
    ]
    assert [(d["node"], d["local_rank"]) for d in done] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len({d["model_sha256"] for d in done}) == 1  # every node ends with the same model
    assert done[0]["shard_sha256"] == done[2]["shard_sha256"] and done[1]["shard_sha256"] == done[3]["shard_sha256"]
    loss = pd.read_csv(run_dir / "steps.csv").groupby("step")["loss"].mean()
    assert loss.iloc[-1] < loss.iloc[0]  # over the whole run, warm-up included (diloco's loss jumps at its outer steps)
    assert summary["gpus_per_node"] == 2
    predicted = summary["predicted"]
    # intra-node traffic is on the loopback, inter-node on the NIC: each where the model puts it
    assert summary["intra_tx_bytes_per_step"] == pytest.approx(predicted["intra_tx_bytes_per_step"], rel=0.1)
    assert summary["wire_tx_bytes_per_step"] == pytest.approx(predicted["wire_tx_bytes_per_step"], rel=0.1)
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["cluster"]["intra_node"]["shaped"] is True


# ---- one compression rate for every sparse replicator -------------------------------------


@pytest.mark.parametrize("text, value", [("1/16", 1 / 16), ("0.25", 0.25), ("6.25%", 0.0625), ("1", 1.0)])
def test_compression_parses(text: str, value: float) -> None:
    from netbench.declarations.compression import parse_compression

    assert parse_compression(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "2", "-1/4", "1/0", "x", ""])
def test_compression_rejects(text: str) -> None:
    from netbench.declarations.compression import parse_compression

    with pytest.raises(ValueError):
        parse_compression(text)


@pytest.mark.parametrize("fraction", [1 / 16, 1 / 64, 1 / 4])
def test_compression_sends_the_same_share_of_values_everywhere(fraction: float) -> None:
    """At one rate, dct (top-k per chunk), random and striding (rate) send the same number of values."""
    from netbench.declarations.compression import compression_settings
    from netbench.declarations.config import ReplicatorConfig
    from netbench.declarations.registry import declared_payload

    shapes, numel = [ParamShape("w", (256, 128))], 256 * 128
    values = numel * fraction
    for name in ("random", "striding"):
        config = ReplicatorConfig(name=name, bucket_mb=0, **compression_settings(name, fraction, 64))
        assert declared_payload(shapes, config, 2).bytes_per_step == values * 4  # fp32 values, seeded positions
    config = ReplicatorConfig(name="dct", chunk=64, bucket_mb=0, **compression_settings("dct", fraction, 64))
    assert config.topk * (numel // (64 * 64)) == values  # coefficients kept over all chunks
    assert declared_payload(shapes, config, 2).bytes_per_step == values * (4 + 2)  # fp32 values + int16 positions
    with pytest.raises(ValueError):
        compression_settings("full", fraction, 64)


# ---- sweep axes ---------------------------------------------------------------------------


def test_sweep_grid_takes_gpus_per_node_and_intra_bw(tmp_path: Path) -> None:
    from netbench.orchestrator.sweep.scenario import points, scenario_from_dict

    scenario = scenario_from_dict(
        {
            "name": "fd",
            "grid": {"replicator": ["dct"], "gpus_per_node": [1, 2], "intra_bw": ["unshaped", "1gbit"]},
            "workload": {"kind": "mlp"},
        }
    )
    got = [(p.config.gpus_per_node, p.config.intra_bw_bps) for p in points(scenario, tmp_path)]
    assert got == [(1, None), (2, None), (2, 1e9)]  # one worker per node has no intra-node link to shape
    # a point with one worker per node keeps the key it had before these axes existed
    flat = points(scenario, tmp_path)[0]
    import hashlib

    before = {
        "out_dir": True,
        "trace": True,
        "gpus_per_node": True,
        "intra_bw_bps": True,
        "shard_within": True,
        "schedule": True,
        "cluster": {"topology": True, "rank_order": True},
    }  # the fields these axes, topologies and schedules added
    old = hashlib.sha256(flat.config.model_dump_json(exclude=before).encode()).hexdigest()[:12]
    assert flat.key == old


# ---- Decoupled AdamW: local moments, synchronised parameters ----------------------------------


def _decoupled_body(rank: int, world: int, name: str, g: int) -> dict:
    from netbench.declarations.config import ReplicatorConfig
    from netbench.replicators.build import build_replicator
    from netbench.replicators.sharded import ShardedReplicator
    from netbench.worker.groups import build_groups

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    config = ReplicatorConfig(name=name, optimizer="decoupled_adamw", lr=1e-2)
    if g > 1:
        groups = build_groups(Layout.per_node(world // g, g), rank)
        rep = ShardedReplicator(
            list(model.parameters()),
            config,
            build_replicator,
            groups.shard,
            groups.shard_ranks,
            groups.local_rank,
            groups.replica,
        )
    else:
        rep = build_replicator(list(model.parameters()), config)
    gen = torch.Generator().manual_seed(7 + rank)  # every rank its own data
    agree, losses = [], []
    for _ in range(5):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 2, generator=gen)
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        rep.step()
        losses.append(float(loss.detach()))
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(world)]
        torch.distributed.all_gather(gathered, flat)
        agree.append(all(torch.equal(gathered[0], t) for t in gathered))
    moments = torch.cat([m.reshape(-1) for m in rep.optimizer.exp_avg])
    return {"agree": agree, "moments": moments}


@pytest.mark.parametrize("name, g", [("full", 1), ("dct", 1), ("random", 1), ("full", 2)])
def test_decoupled_adamw_keeps_moments_local_and_parameters_agreed(name: str, g: int) -> None:
    results = run_ranks(_decoupled_body, 2 * g, name, g)
    assert all(all(r["agree"]) for r in results)  # every node applies the same update after every sync
    replicas = [results[0], results[g]]  # the same slices on two nodes
    assert not torch.allclose(replicas[0]["moments"], replicas[1]["moments"])  # moments were never synchronised


# ---- netbench worker under torchrun: the local ranks of a host form its sharding group -------------


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_torchrun_shard_within_host(tmp_path: Path) -> None:
    from netbench.emulation.cluster import Cluster
    from netbench.emulation.spec import ClusterSpec, DirectionSpec

    repo = Path(__file__).resolve().parents[1]
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
    }
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    with Cluster(spec) as cluster:
        endpoint = f"{cluster.nodes[0].address}:29400"
        procs = []
        for node in cluster.nodes:
            torchrun = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc-per-node",
                "2",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                "fd2",
                "--rdzv-conf",
                f"is_host={int(node.index == 0)}",
                "--local-addr",
                node.address,
            ]
            log = (tmp_path / f"torchrun{node.index}.log").open("w")
            procs.append(
                node.popen(
                    [
                        *torchrun,
                        "-m",
                        "netbench",
                        "worker",
                        "--iface",
                        "eth0",
                        "--shard-within",
                        "host",
                        "-r",
                        "dct",
                        "-w",
                        "mlp",
                        "--steps",
                        "3",
                        "--warmup",
                        "1",
                        "--out",
                        str(tmp_path / "runs"),
                        "--json",
                    ],
                    env=env,
                    cwd=repo,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        codes = [p.wait(timeout=300) for p in procs]
    logs = "\n".join((tmp_path / f"torchrun{i}.log").read_text()[-2000:] for i in range(2))
    assert codes == [0, 0], logs
    (run_dir,) = (tmp_path / "runs").glob("*-dct-fd2")
    done = [
        next(
            json.loads(line)
            for line in (run_dir / "workers" / f"rank{r}.jsonl").read_text().splitlines()
            if '"event": "done"' in line
        )
        for r in range(4)
    ]
    assert [(d["node"], d["local_rank"]) for d in done] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len({d["model_sha256"] for d in done}) == 1
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    assert summary["status"] == "ok" and summary["gpus_per_node"] == 2 and summary["nodes"] == 2
    assert (
        summary["intra_tx_bytes_per_step"] > summary["wire_tx_bytes_per_step"]
    )  # dense intra-node ring vs sparse dct between hosts


def test_a_shaped_loopback_is_shared_by_the_nodes_workers():
    """--intra-bw is one tbf on the node's lo: each of G workers' ring hops gets 1/G of it.

    Unshaped, each gets the loopback's own rate.
    """
    from types import SimpleNamespace

    from netbench.model.sharding import LOOPBACK_BPS, intra_bits_per_s

    assert intra_bits_per_s(SimpleNamespace(gpus_per_node=4, intra_bw_bps=200e6)) == 50e6
    assert intra_bits_per_s(SimpleNamespace(gpus_per_node=2, intra_bw_bps=None)) == LOOPBACK_BPS
