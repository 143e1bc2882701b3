"""`--shard-within site`: a site's workers shard the model over its LAN and replicate each slice between sites.

Four levels: sites of a topology turned into sharding groups (pure), every replicator under those
groups in real gloo processes on localhost (4 ranks in 2 sites of 2: replicas stay identical and
each site sends the replicator's whole-model payload once), `python -m netbench.worker` given the
groups in its spec, and `netbench run --topology sites --shard-within site` in emulated namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import names, spec
from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.topology import DirectionSpec, place, sites, uniform_sites
from netbench.topology.presets import Site, Wan
from netbench.worker.groups import Layout
from netbench.worker.spec import WorkerSpec
from tests.dist_harness import run_ranks
from tests.test_worker import finish, launch, records, write_specs

LAN, WAN = DirectionSpec(rate_bps=1e9), DirectionSpec(rate_bps=50e6, delay_s=0.01)
TWO_BY_TWO = uniform_sites(2, 2, LAN, LAN, WAN)
NETBENCH = str(Path(sys.executable).parent / "netbench")  # the console script of this environment


def _cluster(topology, rank_order="topology") -> ClusterSpec:
    return ClusterSpec(nodes=topology.node_count, up=LAN, down=LAN, topology=topology, rank_order=rank_order)


# ---- sites -> sharding groups (pure) ----------------------------------------------------------


@pytest.mark.parametrize(
    "order, g, shards",
    [
        ("topology", 1, ((0, 1), (2, 3))),
        ("interleaved", 1, ((0, 2), (1, 3))),  # ranks alternate sites: each site's ranks are not consecutive
        ("topology", 2, ((0, 1, 2, 3), (4, 5, 6, 7))),  # G workers per node: all of a site's workers shard together
    ],
)
def test_sites_become_sharding_groups(order: str, g: int, shards: tuple) -> None:
    layout = Layout.per_site(TWO_BY_TWO.groups().values(), place(TWO_BY_TWO, order), g)
    assert layout.shards == shards
    assert [layout.replica_ranks(k) for k in range(layout.g)] == [
        list(col) for col in zip(*shards)
    ]  # one rank per site
    config = RunConfig(cluster=_cluster(TWO_BY_TWO, order), gpus_per_node=g, shard_within="site")
    assert config.shard_layout() == layout  # what the orchestrator writes into every worker's spec


def test_node_sharding_is_the_g_per_node_layout() -> None:
    config = RunConfig(cluster=_cluster(TWO_BY_TWO), gpus_per_node=2)
    assert config.shard_within == "node" and config.shard_layout() is None  # the workers derive G per node themselves
    spec = WorkerSpec(rank=0, world_size=8, iface="lo", out_path="x", gpus_per_node=2)
    assert spec.sharded and spec.layout() == Layout.per_node(4, 2)
    assert spec.layout().shards == ((0, 1), (2, 3), (4, 5), (6, 7))


@pytest.mark.parametrize(
    "shards, message",
    [
        (((0, 1), (2,)), "same size"),
        (((0, 1), (1, 2)), "every rank"),
        (((0, 1), (3, 4)), "every rank"),
        ((), "at least one"),
    ],
)
def test_layout_refuses_groups_that_do_not_partition_the_world(shards: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Layout(shards)


def test_spec_checks_its_groups_against_the_world() -> None:
    with pytest.raises(ValueError, match="same size"):
        WorkerSpec(rank=0, world_size=3, iface="lo", out_path="x", shard_groups=((0, 1), (2,)))
    with pytest.raises(ValueError, match="the world has 6"):
        WorkerSpec(rank=0, world_size=6, iface="lo", out_path="x", shard_groups=((0, 1), (2, 3)))
    one_per_site = WorkerSpec(rank=0, world_size=2, iface="lo", out_path="x", shard_groups=((0,), (1,)))
    assert not one_per_site.sharded  # a site of one rank has nothing to shard: the flat replicator runs


def test_star_and_unequal_sites_are_refused() -> None:
    with pytest.raises(ValueError, match="two or more sites"):
        RunConfig(cluster=ClusterSpec(nodes=4, up=LAN, down=LAN), shard_within="site")
    uneven = sites([Site("a", 2, LAN, LAN), Site("b", 3, LAN, LAN)], [Wan("a", "b", WAN)])
    with pytest.raises(ValueError, match="sites of equal size, got nodes per site: a 2, b 3"):
        RunConfig(cluster=_cluster(uneven), shard_within="site")


# ---- every replicator under site sharding, in real gloo processes ------------------------------


def _settings(name: str) -> dict:
    """The declaration's test settings (tiles that fit the slices, a period that divides STEPS), one collective a
    step, so the bytes sent are the slices' whole payloads."""
    return {**spec(name).test_preset.check, "name": name, "bucket_mb": 0}


STEPS = 4
SHARDS = ((0, 2), (1, 3))  # 2 sites of 2, ranks interleaved across them (as in test_sites_become_sharding_groups)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8))


def _site_body(rank: int, world: int, name: str) -> dict:
    """The worker's own path from its spec to the sharded replicator, then STEPS steps on this rank's data."""
    import torch.distributed as dist

    from netbench.replicators.build import build_replicator
    from netbench.worker.sharding import sharded_replicator

    model = _model()
    config = ReplicatorConfig(**{**_settings(name), "lr": 0.01})
    spec = WorkerSpec(rank=rank, world_size=world, iface="lo", out_path="x", replicator=config, shard_groups=SHARDS)
    rep = sharded_replicator(SimpleNamespace(parameters=lambda: list(model.parameters())), spec, build_replicator, None)
    gen = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(32, 8, generator=gen), torch.randn(32, 8, generator=gen)
    stats = []
    for _ in range(STEPS):
        model.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        s = rep.step()
        stats.append((s.payload_bytes, s.collectives, s.intra_payload_bytes))
    digests = [None] * world
    dist.all_gather_object(digests, rep.digests())
    return {"stats": stats, "digests": digests}


@pytest.mark.parametrize("name", names())
def test_every_replicator_keeps_replicas_identical_and_sends_the_model_once_per_site(name: str) -> None:
    from netbench.declarations.registry import declared_payload
    from netbench.declarations.shards import shard_shapes
    from netbench.replicators.base import param_shapes

    results = run_ranks(_site_body, 4, name, timeout=120)
    digests = results[0]["digests"]
    assert len({d["model_sha256"] for d in digests}) == 1  # every rank of every site ends with one model
    assert (
        digests[0]["shard_sha256"] == digests[1]["shard_sha256"]
        and digests[2]["shard_sha256"] == digests[3]["shard_sha256"]
    )
    assert digests[0]["shard_sha256"] != digests[2]["shard_sha256"]  # a site's two ranks own different slices

    config = ReplicatorConfig(**_settings(name))
    shapes = param_shapes(list(_model().parameters()))
    whole, slice_ = declared_payload(shapes, config, 2), declared_payload(shard_shapes(shapes, 2), config, 2)
    for step in range(STEPS):
        sent = [r["stats"][step][0] for r in results]
        assert sent == [slice_.bytes_on(step + 1)] * 4  # each rank: its slices, in the replication group
        assert [r["stats"][step][1] for r in results] == [slice_.collectives_on(step + 1)] * 4
        assert all(r["stats"][step][2] > 0 for r in results)  # the reduce-scatter and all-gather inside the site
        per_site = [sum(sent[r] for r in site) for site in SHARDS]
        if 2 * slice_.bytes_on(step + 1) == whole.bytes_on(step + 1):  # a payload that adds up over row slices
            assert per_site == [whole.bytes_on(step + 1)] * 2  # the whole model's payload, once per site
        else:  # a payload per slice (a low-rank factor each): a site sends more than the whole model's payload
            assert per_site[0] == per_site[1] > whole.bytes_on(step + 1)
    assert sum(whole.bytes_on(s + 1) for s in range(STEPS)) > 0


# ---- python -m netbench.worker with the groups in its spec ---------------------------------------


def test_workers_given_site_groups_shard_by_site(tmp_path: Path) -> None:
    config = RunConfig(
        cluster=_cluster(TWO_BY_TWO, "interleaved"),
        shard_within="site",
        out_dir=tmp_path,
        workload={"kind": "mlp", "hidden": 64, "mlp_layers": 2, "batch_size": 64},
        replicator=ReplicatorConfig(name="dct", chunk=8, topk=4),
    )
    specs = write_specs(
        tmp_path,
        4,
        steps=2,
        warmup_steps=1,
        replicator=config.replicator,
        workload=config.workload,
        timeout_s=30,
        shard_groups=config.shard_layout().shards,
    )
    assert finish([launch(s, tmp_path) for s in specs], timeout=120) == [0, 0, 0, 0]
    done = [records(tmp_path / f"rank{r}.jsonl")[-1] for r in range(4)]
    assert [d["event"] for d in done] == ["done"] * 4
    assert [(d["shard_group"], d["shard_rank"]) for d in done] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert len({d["model_sha256"] for d in done}) == 1
    assert done[0]["shard_sha256"] == done[1]["shard_sha256"] != done[2]["shard_sha256"] == done[3]["shard_sha256"]
    steps = [json.loads(line) for line in (tmp_path / "rank0.jsonl").read_text().splitlines() if '"step"' in line]
    assert all(s["intra_payload_bytes"] > 0 and s["payload_bytes"] > 0 for s in steps if s["event"] == "step")


# ---- netbench run --topology sites --shard-within site in emulated namespaces ----------------------


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_netbench_run_shards_within_sites_and_sends_each_slice_over_the_wan_once(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            NETBENCH,
            "run",
            "-r",
            "dct",
            "-w",
            "mlp",
            "--nodes",
            "4",
            "--topology",
            "sites",
            "--sites",
            "2",
            "--wan-bw",
            "50mbit",
            "--bw",
            "1gbit",
            "--shard-within",
            "site",
            "--steps",
            "6",
            "--warmup",
            "2",
            "--no-capture",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    run_dir = Path(json.loads(out.stdout)["run_dir"])
    done = [records(run_dir / "workers" / f"rank{r}.jsonl")[-1] for r in range(4)]
    assert [(d["shard_group"], d["shard_rank"]) for d in done] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len({d["model_sha256"] for d in done}) == 1
    assert done[0]["shard_sha256"] == done[2]["shard_sha256"] != done[1]["shard_sha256"] == done[3]["shard_sha256"]
    steps = pd.read_csv(run_dir / "steps.csv")
    site_payload = steps[steps["rank"].isin([0, 1])].groupby("step")["payload_bytes"].sum().median()
    trunk = pd.read_csv(run_dir / "trunks.csv")
    wan = trunk[trunk["direction"] == "fwd"]["tx_bytes"].median()  # per step; a step's counters can land in the next
    assert 1.0 <= wan / site_payload < 1.5  # a site's slices cross the WAN once, plus headers and ACKs


# ---- netbench worker: --shard-within host makes a torchrun host's local ranks one node ----------


@pytest.mark.parametrize(
    ("choice", "local", "expected"), [("node", "2", 1), ("host", "2", 2), ("host", "1", 1), ("host", "4", 4)]
)
def test_worker_shards_a_host_only_when_asked(choice: str, local: str, expected: int) -> None:
    from netbench.cli.sharding_options import local_world_size

    assert local_world_size(choice, 8, {"LOCAL_WORLD_SIZE": local}) == expected


@pytest.mark.parametrize(
    ("choice", "local"), [("site", "2"), ("rack", "2"), ("host", "3"), ("host", "two"), ("host", "0")]
)
def test_worker_refuses_a_sharding_it_cannot_run_in_one_line(choice: str, local: str) -> None:
    from netbench.cli.errors import UserError
    from netbench.cli.sharding_options import local_world_size

    with pytest.raises(UserError, match=r"^(--shard-within|\$LOCAL_WORLD_SIZE must be)"):
        local_world_size(choice, 8, {"LOCAL_WORLD_SIZE": local})
