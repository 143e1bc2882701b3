"""write_run keeps what the workers measured whatever happens to the capture: a parse error, a
wall clock that stepped backwards, or Ctrl-C while the pcaps are being parsed."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pandas as pd
import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run import results
from netbench.rundir.layout import RunDir
from netbench.workloads.config import WorkloadConfig

T0 = 1_700_000_000.0
NODE, PEER = "198.18.0.1", "198.18.0.2"


def config(out: Path) -> RunConfig:
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    return RunConfig(
        cluster=cluster,
        steps=3,
        warmup_steps=0,
        out_dir=out,
        workload=WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=1,ffn=128,vocab=256", compute_ms=1.0),
    )


def records(ends: list[float]) -> dict[int, list[dict]]:
    """Two ranks' records with step windows ending at ``ends`` (seconds after T0)."""
    out = {}
    for rank in (0, 1):
        recs = [{"event": "start", "rank": rank, "n_params": 0}]
        start = T0
        for step, end in enumerate(ends):
            recs.append(
                {
                    "event": "step",
                    "rank": rank,
                    "step": step,
                    "warmup": False,
                    "t_start": start,
                    "t_end": T0 + end,
                    "step_s": 0.1,
                    "compute_s": 0.05,
                    "compress_s": 0.0,
                    "comm_s": 0.05,
                    "decode_s": 0.0,
                    "apply_s": 0.0,
                    "loss": 1.0,
                    "payload_bytes": 1448,
                    "tx_bytes": 1514,
                    "rx_bytes": 1514,
                }
            )
            start = T0 + end
        recs.append({"event": "done", "rank": rank})
        out[rank] = recs
    return out


def pcap(path: Path, times: list[float]) -> Path:
    frames = []
    for t in times:
        frame = (
            Ether()
            / IP(src=NODE, dst=PEER)
            / TCP(sport=40000, dport=29500, seq=1 + len(frames) * 1448, flags="A")
            / (b"x" * 1448)
        )
        frame.time = T0 + t
        frames.append(frame)
    wrpcap(str(path), frames, snaplen=96)
    return path


def write(tmp_path: Path, recs: dict, pcaps: dict[int, Path]) -> tuple[dict, dict]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return results.write_run(
        RunDir(run_dir),
        results.RunOutput(
            config(tmp_path),
            recs,
            run_id="abc123",
            status="ok",
            reason=None,
            started=T0,
            warnings=[],
            cluster={},
            pcaps=pcaps,
            addresses={0: NODE, 1: PEER},
        ),
    )


def saved(tmp_path: Path) -> tuple[pd.DataFrame, dict]:
    return pd.read_csv(tmp_path / "run" / "steps.csv"), json.loads((tmp_path / "run" / "run.json").read_text())


def test_capture_columns_come_from_the_streamed_pcap(tmp_path: Path) -> None:
    path = pcap(tmp_path / "p0.pcap", [0.05, 0.15, 0.16, 0.25, 9.0])  # the last one after the last step
    summary, _ = write(tmp_path, records([0.1, 0.2, 0.3]), {0: path})
    steps, doc = saved(tmp_path)
    mine = steps[steps["rank"] == 0].sort_values("step")
    assert mine["capture_tx_packets"].tolist() == [1, 2, 1]
    assert mine["capture_tx_payload_bytes"].tolist() == [1448, 2 * 1448, 1448]
    assert steps[steps["rank"] == 1]["capture_tx_packets"].isna().all()  # no pcap for rank 1
    assert doc["capture"]["parsed"] is True and doc["capture"]["bytes_by_peer"]["0"][PEER]["payload_bytes"] == 5 * 1448
    assert doc["status"] == "ok" and doc["reason"] is None and summary["capture_payload_bytes_per_step"] > 0


def test_a_pcap_that_cannot_be_parsed_costs_only_the_capture_columns(tmp_path: Path) -> None:
    bad = tmp_path / "p0.pcap"
    bad.write_bytes(b"\x00" * 64)  # not a pcap: the parser raises
    summary, _ = write(tmp_path, records([0.1, 0.2, 0.3]), {0: bad})
    steps, doc = saved(tmp_path)
    assert len(steps) == 6 and steps["capture_tx_packets"].isna().all()
    assert (
        doc["status"] == "ok"
        and "capture not parsed" in doc["reason"]
        and "not a classic pcap" in doc["capture"]["error"]
    )
    assert doc["summary"]["steps_measured"] == 3 and doc["capture"]["parsed"] is False


def test_a_wall_clock_stepping_back_is_no_parse_error(tmp_path: Path) -> None:
    """Step 1 ends before step 0 did (an NTP step): pd.cut refused such edges and the run was lost."""
    path = pcap(tmp_path / "p0.pcap", [0.05, 0.15, 0.25])
    write(tmp_path, records([0.2, 0.1, 0.3]), {0: path})
    steps, doc = saved(tmp_path)
    assert doc["reason"] is None and doc["capture"]["clock_went_back"] == [0]
    mine = steps[steps["rank"] == 0].sort_values("step")
    assert mine["capture_tx_packets"].tolist() == [2, 0, 1]  # the window the clock skipped stays empty


def test_ctrl_c_while_the_pcaps_are_parsed_keeps_steps_csv_and_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT lands in the middle of the parse: the files are on disk, then Ctrl-C goes on up."""
    path = pcap(tmp_path / "p0.pcap", [0.01 * i for i in range(1, 30)])
    real = results.bin_pcap

    def parse_and_get_interrupted(*args, **kwargs):
        assert (tmp_path / "run" / "run.json").exists()  # written from the records before any parsing
        signal.raise_signal(signal.SIGINT)  # Python's default handler raises KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(results, "bin_pcap", parse_and_get_interrupted)
    # As in a terminal. A suite started in the background (`cmd &` in a script) inherits SIGINT ignored,
    # and Python then installs no handler: the signal would do nothing at all.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            write(tmp_path, records([0.1, 0.2, 0.3]), {0: path, 1: path})
    finally:
        signal.signal(signal.SIGINT, previous)
    steps, doc = saved(tmp_path)
    assert len(steps) == 6 and steps["step_s"].notna().all()
    assert doc["status"] == "ok" and doc["summary"]["steps_measured"] == 3
    assert (
        doc["capture"]["error"] == "interrupted while parsing the capture" and doc["reason"] == doc["capture"]["error"]
    )
    assert not list((tmp_path / "run").glob(".*.tmp"))  # no temporary file left behind


def test_a_capture_cut_at_its_packet_cap_leaves_later_steps_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tcpdump stops at MAX_PACKETS (-c): steps after its last packet get no capture figures rather than zeros."""
    monkeypatch.setattr(results, "MAX_PACKETS", 3)
    path = pcap(tmp_path / "p0.pcap", [0.05, 0.12, 0.15])  # the cap reached inside step 1
    write(tmp_path, records([0.1, 0.2, 0.3]), {0: path})
    steps, doc = saved(tmp_path)
    mine = steps[steps["rank"] == 0].sort_values("step")
    assert mine["capture_tx_packets"].tolist()[:1] == [1] and mine["capture_tx_packets"].iloc[1:].isna().all()
    assert doc["capture"]["truncated_at_packets"] == {"0": 3}


def test_a_step_number_recorded_twice_by_a_rank_gets_each_records_own_capture(tmp_path: Path) -> None:
    """Under churn a node healed to an earlier number records that step number again: each record keeps its own
    window's packets, and steps.csv keeps one row per record."""
    recs = records([0.1, 0.2, 0.3])
    again = dict(recs[0][3], step=1, t_start=T0 + 0.3, t_end=T0 + 0.4)  # step 1 again, after step 2
    recs[0].insert(4, again)
    path = pcap(tmp_path / "p0.pcap", [0.15, 0.25, 0.35, 0.36])
    write(tmp_path, recs, {0: path})
    steps, _ = saved(tmp_path)
    mine = steps[steps["rank"] == 0].sort_values("t_start")
    assert mine["step"].tolist() == [0, 1, 2, 1]
    assert mine["capture_tx_packets"].tolist() == [0, 1, 1, 2]
