"""Workers that train through churn (torchft): real processes on 127.0.0.1, one replica group each, a lighthouse in
the test. A node killed mid-run and started again is healed from a live peer and the run ends on every node; a
node left alone fails in one line that says the quorum was lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from torchft._torchft import LighthouseServer

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import spec as declaration
from netbench.model.heal import heal_bytes
from netbench.rundir.restarts import restart_figures, training_restarts
from netbench.worker.quorum_spec import QuorumSpec
from netbench.worker.spec import WorkerSpec
from netbench.workloads import WorkloadConfig

REPO = Path(__file__).resolve().parents[1]
SMALL_MLP = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2, batch_size=64)
FULL = ReplicatorConfig(name="full", lr=0.01)
DILOCO = ReplicatorConfig(name="diloco", sync_every=3, lr=0.01)
DEADLINE_S = 240.0
COMPUTE_SCALE = 40.0  # every step's compute stretched: the survivors still train when the killed node is back


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lighthouse(min_replicas: int = 2) -> LighthouseServer:
    """A lighthouse that gives up on a missing node after one second (a leave costs that stall)."""
    return LighthouseServer(
        bind="[::]:0", min_replicas=min_replicas, join_timeout_ms=1000, quorum_tick_ms=50, heartbeat_timeout_ms=1000
    )


def spec_for(
    tmp: Path,
    node: int,
    nodes: int,
    server: LighthouseServer,
    replicator: ReplicatorConfig,
    steps: int,
    quorum_lost_s: float = 60.0,
) -> Path:
    spec = WorkerSpec(
        rank=node,
        world_size=nodes,
        iface="lo",
        steps=steps,
        replicator=replicator,
        workload=SMALL_MLP,
        out_path=str(tmp / f"rank{node}.jsonl"),
        timeout_s=10.0,
        compute_scale=COMPUTE_SCALE,
        quorum=QuorumSpec(
            lighthouse=server.address(),
            node=node,
            address="127.0.0.1",
            store_port=free_port(),
            exchange_timeout_s=10.0,
            quorum_lost_s=quorum_lost_s,
        ),
    )
    path = tmp / f"spec{node}.json"
    path.write_text(spec.model_dump_json())
    return path


def joining(spec: Path, first_step: int) -> Path:
    """The spec of a node's worker that joins again, its steps numbered after the ``first_step`` it recorded."""
    was = WorkerSpec.model_validate_json(spec.read_text())
    again = was.model_copy(update={"quorum": was.quorum.model_copy(update={"first_step": first_step})})
    path = spec.with_suffix(".again.json")
    path.write_text(again.model_dump_json())
    return path


def start(spec: Path, tmp: Path, node: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = open(tmp / f"log{node}.txt", "a")  # noqa: SIM115 - the child holds it
    return subprocess.Popen(
        [sys.executable, "-m", "netbench.worker", "--spec", str(spec)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def records(tmp: Path, node: int) -> list[dict]:
    path = tmp / f"rank{node}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def steps_of(tmp: Path, node: int) -> list[dict]:
    return [r for r in records(tmp, node) if r["event"] == "step"]


def wait_until(cond, what: str, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        failed = [p.args[-1] for p in procs if p.poll() not in (None, 0)]
        if time.monotonic() > deadline or failed:
            for p in procs:
                p.kill()
            raise AssertionError(f"waiting for {what}: failed {failed}")
        time.sleep(0.1)


def heal_state_bytes(replicator: ReplicatorConfig) -> int:
    """What a joining node must receive, as the model prices a heal (:func:`netbench.model.heal.heal_bytes`): fp32
    weights, AdamW's two moments and its step count per tensor, and for DiLoCo the outer momentum and the global
    weights the pseudo-gradient is taken from."""
    return heal_bytes(replicator, SMALL_MLP.declared_shapes())


@pytest.mark.parametrize("replicator", [FULL, DILOCO], ids=["full", "diloco"])
def test_a_node_killed_and_started_again_is_healed_and_every_node_ends(tmp_path: Path, replicator) -> None:
    server = lighthouse()
    nodes, steps = 3, 240
    specs = [spec_for(tmp_path, n, nodes, server, replicator, steps) for n in range(nodes)]
    procs = [start(s, tmp_path, n) for n, s in enumerate(specs)]
    try:
        wait_until(lambda: len(steps_of(tmp_path, 2)) >= 7, "node 2's seventh step", procs)
        os.killpg(procs[2].pid, signal.SIGKILL)  # a leave: the node's process group, at once
        procs[2].wait()
        recorded = len(steps_of(tmp_path, 2))
        procs[2] = start(joining(specs[2], recorded), tmp_path, 2)
        for p in procs:
            assert p.wait(timeout=DEADLINE_S) == 0, (tmp_path / "log0.txt").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.shutdown()
    joined = steps_of(tmp_path, 2)[recorded:]
    heals = [r["heal_bytes"] for r in joined if r["heal_bytes"]]
    assert heals, "the node that joined again was not healed"
    assert heals[0] == heal_state_bytes(replicator)
    numbers = [r["step"] for r in steps_of(tmp_path, 2)]
    # in order, each once (a node that started late is healed at once and takes its peers' numbers from there)
    assert all(a < b for a, b in zip(numbers, numbers[1:])), "no attempt is numbered twice"
    peers = {r["step"] for r in steps_of(tmp_path, 0)}
    assert {r["step"] for r in joined} <= peers, "a healed node's attempts take its peers' numbers"
    for node in range(nodes):
        done = [r for r in records(tmp_path, node) if r["event"] == "done"]
        assert done, f"node {node} recorded no end"
        rows = steps_of(tmp_path, node)
        committed = [r for r in rows if r["committed"]]
        assert committed[-1]["loss"] < committed[0]["loss"]
        assert all(2 <= r["quorum_replicas"] <= nodes for r in rows)
    survivors = steps_of(tmp_path, 0)
    assert min(r["quorum_replicas"] for r in survivors) == 2, "the survivors trained on with two nodes"
    assert survivors[-1]["quorum_replicas"] == nodes, "the node that joined again took part at the end"


def test_a_node_left_alone_fails_in_one_line_that_says_the_quorum_was_lost(tmp_path: Path) -> None:
    server = lighthouse()
    specs = [spec_for(tmp_path, n, 2, server, FULL, 10_000, quorum_lost_s=6.0) for n in range(2)]
    procs = [start(s, tmp_path, n) for n, s in enumerate(specs)]
    try:
        wait_until(lambda: len(steps_of(tmp_path, 0)) >= 3, "three steps", procs)
        os.killpg(procs[1].pid, signal.SIGKILL)
        began = time.monotonic()
        assert procs[0].wait(timeout=60) == 1
        assert time.monotonic() - began < 30
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.shutdown()
    errors = [r for r in records(tmp_path, 0) if r["event"] == "error"]
    assert len(errors) == 1
    assert errors[0]["error"].startswith("quorum lost: no committed step for 6 s")
    assert "\n" not in errors[0]["error"]


@pytest.mark.parametrize("replicator", [FULL, DILOCO], ids=["full", "diloco"])
def test_every_node_that_held_the_training_gone_the_nodes_back_mark_the_quorum_that_started_afresh(
    tmp_path: Path, replicator: ReplicatorConfig
) -> None:
    server = lighthouse()
    specs = [spec_for(tmp_path, n, 2, server, replicator, 12) for n in range(2)]
    procs = [start(s, tmp_path, n) for n, s in enumerate(specs)]
    try:
        wait_until(lambda: sum(r["committed"] for r in steps_of(tmp_path, 0)) >= 4, "four committed steps", procs)
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)  # both leave: nobody holds the training any more
            p.wait()
        time.sleep(1.5)  # the lighthouse drops both (its heartbeat timeout)
        before = [len(steps_of(tmp_path, n)) for n in range(2)]
        for n in range(2):
            again = joining(specs[n], before[n])
            spec = WorkerSpec.model_validate_json(again.read_text())
            again.write_text(
                spec.model_copy(update={"quorum": spec.quorum.model_copy(update={"joining": True})}).model_dump_json()
            )
            procs[n] = start(again, tmp_path, n)
        for p in procs:
            assert p.wait(timeout=DEADLINE_S) == 0, (tmp_path / "log0.txt").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.shutdown()
    rows = pd.DataFrame([r for n in range(2) for r in steps_of(tmp_path, n)])
    marked = rows[rows["restart_quorum"].notna()]
    assert set(marked["rank"]) == {0, 1} and marked["restart_quorum"].nunique() == 1, "both mark one quorum"
    assert (marked["collectives"] == 1).all(), "the step that exchanged in that quorum carries the mark"
    assert not rows.iloc[: before[0]]["restart_quorum"].notna().any(), "the run's first quorum is no restart"
    assert (rows["heal_bytes"] == 0).all(), "nobody was ahead to heal from"
    found = training_restarts(rows)
    assert len(found) == 1 and found[0]["members"] == [0, 1]
    held = sum(r["committed"] for n in range(2) for r in steps_of(tmp_path, n)[: before[n]]) / 2
    assert found[0]["committed_steps_lost"] == pytest.approx(held)
    # the training holds what the fresh quorum committed (DiLoCo's: good to the window before its first sync)
    fresh = sum(r["committed"] for n in range(2) for r in steps_of(tmp_path, n)[before[n] :]) / 2
    kept = restart_figures(rows)["kept_steps"]
    assert fresh - declaration(replicator.name).period(replicator) <= kept <= fresh and kept > 0


def test_heal_state_counts_every_tensor() -> None:
    from netbench.worker.fault_tolerant import state_tensor_bytes

    state = {"a": torch.zeros(3), "b": [torch.zeros(2, dtype=torch.float64), {"c": 5}], "d": "x"}
    assert state_tensor_bytes(state) == 3 * 4 + 2 * 8
