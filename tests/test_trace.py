"""trace.json: a real run's timeline of ranks, buckets, links, TCP and the model (needs root for the run)."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.replicators.base import StepTimer
from netbench.replicators.comm import GroupComm
from netbench.replicators.pipeline import run_pipeline
from netbench.trace import events as ev
from netbench.trace import links, spans, tcp
from netbench.workloads.config import WorkloadConfig

PHASES = {"compute", "encode", "decode", "apply"}


def test_a_pipelined_step_records_every_phase_and_each_buckets_collective() -> None:
    spans.begin(time.perf_counter())
    comm, timer = GroupComm(), StepTimer()
    tensors = [torch.ones(1000) for _ in range(3)]
    outs = [torch.empty((1, 1000)) for _ in range(3)]
    run_pipeline(
        3, lambda i: None, lambda i: comm.all_gather_async(tensors[i], outs[i]), lambda i: None, timer, behind=None
    )
    timer.apply()
    recorded = spans.take()
    names = [s[0] for s in recorded]
    assert names.count("encode") == 3 and names.count("decode") == 3 and names.count("apply") == 1
    buckets = sorted(s[3]["bucket"] for s in recorded if s[0] == "collective")
    assert buckets == [0, 1, 2] and all(s[3]["bytes"] == 4000 for s in recorded if s[0] == "collective")
    assert all(0 <= s[1] <= s[2] for s in recorded)
    assert spans.take() == []  # nothing is recorded outside a step


def test_an_overlapped_fragment_is_drawn_from_the_step_that_started_it_to_the_one_that_waited() -> None:
    """Streaming DiLoCo: the collective starts after one step and is waited for two steps later; its bar starts
    before the waiting step's own start and is named by its fragment."""
    from netbench.declarations.config import ReplicatorConfig as Config
    from netbench.replicators.build import build_replicator
    from netbench.trace.ranks import step_events

    params = [torch.nn.Parameter(torch.ones(4, 4)) for _ in range(2)]
    config = Config(name="streaming", sync_every=6, fragments=2, fragment_sync_delay=2, optimizer="sgd", lr=0.1)
    rep = build_replicator(params, config, names=["blocks.0.w", "blocks.1.w"])
    records = []
    for step in range(6):
        origin = time.perf_counter()
        spans.begin(origin)
        for p in params:
            p.grad = torch.ones(4, 4)
        rep.step()
        records.append({"step": step, "t_start": origin, "t_end": time.perf_counter(), "spans": spans.take()})
    sent, waited = records[0], records[2]  # fragment 0 leaves after step 1 and lands after step 3 (1-based)
    (bar,) = [s for s in waited["spans"] if s[0] == "collective"]
    assert bar[3]["fragment"] == 0 and bar[1] < 0  # started before the waiting step began
    assert not [s for s in sent["spans"] if s[0] == "collective"]
    names = [e["name"] for e in step_events(1, waited, 0.0) if e.get("cat") == "collective"]
    assert names == ["fragment 0 all_reduce"]


def test_link_counters_change_only_where_the_bytes_do() -> None:
    track = links.counter_track(
        ev.LINKS_PID, "x", {0: 1250, 1: 1250, 5: 2500}, "Mbit/s", lambda b: links.mbit_per_s(b, links.BIN_S)
    )
    assert [(e["ts"], e["args"]["Mbit/s"]) for e in track] == [
        (0.0, 1.0),
        (20000.0, 0.0),
        (50000.0, 2.0),
        (60000.0, 0.0),
    ]
    assert _integrated_bytes(track) == pytest.approx(5000)


def test_broken_tcp_sample_lines_are_skipped(tmp_path) -> None:
    path = tmp_path / "node0.jsonl"
    path.write_text(
        '{"event": "tcp", "t": 1.0, "conns": []}\n[1, 2]\n{"event": "tcp", "t": \n{"event": "done", "cpu_s": '
        '0.1, "wall_s": 10}\n'
    )
    samples, done = tcp.read_samples(path)
    assert len(samples) == 1 and done["cpu_s"] == 0.1


def _integrated_bytes(track: list[dict]) -> float:
    """Bytes a Mbit/s counter track stands for: each value held until the next sample."""
    total = 0.0
    for a, b in zip(track, track[1:]):
        total += a["args"]["Mbit/s"] * 1e6 / 8 * (b["ts"] - a["ts"]) / 1e6
    return total


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_run_writes_a_trace_of_ranks_buckets_links_tcp_and_the_model(tmp_path) -> None:
    from netbench.orchestrator.run.runner import run

    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.02), down=DirectionSpec(rate_bps=100e6))
    config = RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="dct"),
        steps=5,
        warmup_steps=1,
        out_dir=tmp_path,
        workload=WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2", compute_ms=0),
    )
    result = run(config)
    assert result.status == "ok", result.reason
    trace = json.loads((result.run_dir / "trace.json").read_text())
    events = trace["traceEvents"]
    spans_of = defaultdict(list)  # (rank, step) -> its X events on every track
    for e in events:
        if e["ph"] == "X" and ev.RANK_PID <= e["pid"] < ev.LINKS_PID:
            spans_of[(e["pid"] - ev.RANK_PID, e["args"]["step"])].append(e)
    for rank in (0, 1):
        for step in range(1, 6):  # the measured steps
            got = spans_of[(rank, step)]
            whole = next(e for e in got if e["name"] == f"step {step}")
            assert PHASES <= {e["name"] for e in got if e["tid"] == 1}, (rank, step)
            assert {"wait", "communicate"} & {e["name"] for e in got if e["tid"] == 1}
            buckets = [e for e in got if e["tid"] > 1]
            assert buckets, (rank, step)
            for e in buckets + [e for e in got if e["tid"] == 1]:  # every bucket's collective and phase inside its step
                assert whole["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= whole["ts"] + whole["dur"] + 1, (e, whole)
    run_json = json.loads((result.run_dir / "run.json").read_text())
    for node, peers in run_json["capture"]["bytes_by_peer"].items():
        sent = sum(p["wire_bytes"] for p in peers.values())
        track = [e for e in events if e["ph"] == "C" and e["name"] == f"node {node} up (Mbit/s)"]
        assert _integrated_bytes(track) == pytest.approx(sent, rel=0.02)
    assert any(e["ph"] == "C" and e["name"].startswith("switch queue") and e["args"]["bytes"] > 0 for e in events)
    assert any(
        e["ph"] == "C" and e["pid"] >= ev.TCP_PID and "cwnd" in e["name"] and e["args"]["value"] > 0 for e in events
    )
    model = [e for e in events if e["ph"] == "X" and e["pid"] == ev.MODEL_PID]
    assert {"step (model)", "encode", "communicate", "decode"} <= {e["name"] for e in model}
    about = trace["otherData"]
    # the sampler's cost is recorded; its budget (5 % of a core) is scripts/bench_trace.py's figure, measured on a
    # quiet host: here, a sampler that spins would show
    assert about["alignment_bound_s"] < 1e-3 and 0 < about["tcp_sampler"]["cpu_fraction_of_a_core"] < 0.25
    assert "spans" not in (result.run_dir / "steps.csv").read_text().splitlines()[0]


def test_trunk_counters_are_placed_on_the_slowest_ranks_steps(tmp_path) -> None:
    path = tmp_path / "trunks.csv"
    path.write_text(
        "step,link,direction,tx_bytes,tx_packets\n1,s0-s1,fwd,125000,90\n2,s0-s1,fwd,250000,180\nx,s0-s1,fwd,1,1\n"
    )
    got = links.trunk_events(path, {0: 100.0, 1: 100.1, 2: 100.3}, origin=100.0)
    assert [(e["ts"], e["args"]["Mbit/s"]) for e in got] == [(0.0, 10.0), (100000.0, 10.0)]
    assert {e["name"] for e in got} == {"trunk s0-s1 fwd (Mbit/s, per step)"}
