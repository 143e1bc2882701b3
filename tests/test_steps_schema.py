"""steps.csv's schema: every writer emits exactly the columns it owns, a misspelt column fails where it is
written or read, and the run directories stored in reports/ still read through it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_worker import SMALL_MLP, finish, launch, records, write_specs

from netbench.capture.pcap import StepBins
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run import results
from netbench.orchestrator.run.dilation import TIMED_FIELDS
from netbench.orchestrator.run.schedule_results import annotate
from netbench.reports.steps import read_steps
from netbench.rundir.steps_schema import (
    RECORD_ONLY,
    REQUIRED,
    Col,
    capture_column,
    column,
    columns_of,
    step_record,
    step_row,
)
from netbench.rundir.summary import METRICS
from netbench.schedule.parse import parse_text
from netbench.worker.sharding import place_fields
from netbench.worker.spec import WorkerSpec

REPO = Path(__file__).resolve().parents[1]
STORED = sorted((REPO / "reports").rglob("runs/*/steps.csv"))


def _names(writer: str) -> list[str]:
    return [c.value for c in columns_of(writer)]


def _step_records(path: Path) -> list[dict]:
    return [r for r in records(path) if r["event"] == "step"]


def test_the_worker_writes_exactly_its_columns(tmp_path: Path) -> None:
    """One real gloo worker (world size 1, on lo): each step record is the worker's columns and the record's keys."""
    (spec,) = write_specs(tmp_path, 1, steps=2, warmup_steps=1, workload=SMALL_MLP, timeout_s=20)
    assert finish([launch(spec, tmp_path)]) == [0], (tmp_path / "spec0.log").read_text()
    steps = _step_records(tmp_path / "rank0.jsonl")
    assert len(steps) == 3
    for r in steps:
        assert [k for k in r if k not in RECORD_ONLY] == _names("worker")
        assert set(RECORD_ONLY) <= set(r)


def test_a_program_under_exec_writes_exactly_its_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """netbench.step() in this process, as under `netbench exec`: the exec writer's columns, the unset loss empty."""
    import netbench.steps as api

    path = tmp_path / "rank0.jsonl"
    monkeypatch.setenv(api.ENV_RECORDS, str(path))
    monkeypatch.setenv("NETBENCH_IFACE", "lo")
    monkeypatch.setattr(api, "_recorder", None)
    monkeypatch.setattr(api, "_loaded", False)
    with api.step() as s:
        with api.phase("comm"):
            s.loss = 0.5
    with api.step():
        pass
    api._get().writer.close()
    steps = _step_records(path)
    assert len(steps) == 2
    for r in steps:
        assert [k for k in r if k not in RECORD_ONLY] == _names("exec")
    assert steps[0]["loss"] == 0.5 and steps[1]["loss"] is None and steps[0]["comm_s"] > 0


def test_a_sharded_worker_writes_its_place_and_leaves_the_rest_empty() -> None:
    spec = WorkerSpec(rank=3, world_size=4, gpus_per_node=2, iface="lo", out_path="-")
    intra = {Col.INTRA_COMM_S: 0.01, Col.INTRA_PAYLOAD_BYTES: 4096, Col.INTRA_COLLECTIVES: 1}
    row = step_row("sharded", {**place_fields(spec), **intra})
    assert list(row) == _names("sharded")
    assert (row["node"], row["local_rank"]) == (1, 1) and row["intra_tx_bytes"] is None


def test_the_capture_adds_exactly_its_columns() -> None:
    windows = pd.DataFrame({"step": [0, 1], "t_from": [0.0, 1.0], "t_to": [1.0, 2.0]})
    bins = StepBins(windows)
    bins.add((0.5, "tx", "10.0.0.2", "tcp", 1514, 1448, 1, False, 0, 1514))
    frame = bins.frame()
    assert list(frame.columns) == ["step", *_names("capture")]
    assert frame[Col.CAPTURE_TX_WIRE_BYTES].tolist() == [1514, 0]


def test_a_schedule_adds_exactly_its_columns(tmp_path: Path) -> None:
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    schedule = parse_text("time_s,link,rate\n0,*,100mbit\n1,*,50mbit\n", "s.csv")
    config = RunConfig(cluster=cluster, steps=2, warmup_steps=0, out_dir=tmp_path, schedule=schedule)
    steps = pd.DataFrame(
        [step_row("worker", {**_values(rank, step), Col.T_START: 100.0 + step}) for step in range(3) for rank in (0, 1)]
    )
    out = annotate(steps, config, 1.0)
    assert list(out.columns) == [*steps.columns, *_names("schedule")]
    assert out[Col.SCHEDULE_SEGMENT].tolist() == [0, 0, 1, 1, 1, 1]  # step 1 began 1 s in, as the 50mbit segment


def _values(rank: int, step: int) -> dict:
    """Every required worker column, with plausible numbers."""
    values = {c: 0 for c in columns_of("worker") if not c.optional}
    return {**values, Col.RANK: rank, Col.STEP: step, Col.WARMUP: False, Col.STEP_S: 0.1, Col.T_END: 200.0}


def test_a_misspelt_or_foreign_column_fails_where_it_is_written() -> None:
    good = _values(0, 0)
    assert step_record("worker", good, spans=[])["event"] == "step"
    with pytest.raises(KeyError, match="stpe_s"):
        step_row("worker", {**good, "stpe_s": 0.1})
    with pytest.raises(KeyError, match="compute_scale"):  # the exec writer has no straggler scale
        step_row("exec", {**{c: 0 for c in columns_of("exec")}, Col.COMPUTE_SCALE: 1.0})
    with pytest.raises(KeyError, match="step_s"):
        step_row("worker", {k: v for k, v in good.items() if k != Col.STEP_S})
    with pytest.raises(KeyError, match="no steps.csv writer"):
        columns_of("trainer")


def test_a_misspelt_column_fails_where_it_is_read() -> None:
    with pytest.raises(AttributeError):
        _ = Col.STPE_S
    with pytest.raises(KeyError, match="steps_schema.py"):
        column("stpe_s")
    with pytest.raises(KeyError):
        capture_column("tx", "wire_byte")
    with pytest.raises(KeyError):
        capture_column("up", "wire_bytes")
    assert column("step_s") is Col.STEP_S and capture_column("rx", "skb_bytes") is Col.CAPTURE_RX_SKB_BYTES


def test_summary_sources_and_dilated_durations_are_columns() -> None:
    assert all(isinstance(m.source, Col) for m in METRICS if m.source is not None)
    steps = {"compute_s", "compress_s", "comm_s", "decode_s", "apply_s", "step_s", "intra_comm_s"}
    assert set(TIMED_FIELDS) == steps | {"heal_s", "intra_segments_s"}  # a heal's under churn, FSDP's compute pieces
    assert all(c in columns_of("worker") and c in columns_of("exec") for c in REQUIRED)


@pytest.mark.skipif(not STORED, reason="no run directory stored under reports/")
def test_every_stored_run_is_declared_and_still_summarises() -> None:
    """The runs kept in reports/ were written before some columns existed: they lack them, and still read."""
    for path in STORED:
        frame = pd.read_csv(path)
        unknown = [name for name in frame.columns if name not in set(Col)]
        assert not unknown, f"{path}: columns the schema does not declare: {unknown}"
        assert read_steps(path.parent) is not None, path
        run = json.loads((path.parent / "run.json").read_text())
        summary = results.summarize(frame, run["config"]["warmup_steps"])
        assert summary["step_time_s"] == pytest.approx(run["summary"]["step_time_s"]), path


def test_interface_counters_are_named_as_the_schema_columns() -> None:
    from dataclasses import fields

    from netbench.counters import IfaceCounters

    for field in fields(IfaceCounters):
        assert column(field.name) == field.name
