"""`netbench run` end to end: real namespaces, real gloo training, real captures (needs root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.emulation import netns
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.runner import run
from netbench.workloads.config import WorkloadConfig

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = WorkloadConfig(kind="mlp", hidden=128, mlp_layers=2)
# Periodic replicators talk a few times within a 7-step run.
PERIODIC = {"diloco": dict(sync_every=3), "mtdao": dict(params_every=3, m1_every=2, m2_every=6)}


def config(
    tmp_path, name: str, nodes: int = 2, rate: float = 100e6, delay: float = 0.0, steps: int = 6, **extra
) -> RunConfig:
    cluster = ClusterSpec(
        nodes=nodes, up=DirectionSpec(rate_bps=rate, delay_s=delay), down=DirectionSpec(rate_bps=rate)
    )
    replicator = ReplicatorConfig(name=name, **PERIODIC.get(name, {}))
    return RunConfig(
        cluster=cluster,
        replicator=replicator,
        workload=extra.pop("workload", SMALL),
        steps=steps,
        warmup_steps=1,
        out_dir=tmp_path,
        **extra,
    )


@pytest.mark.parametrize("name", ["full", "dct", "random", "striding", "diloco", "lowrank", "mtdao"])
def test_every_replicator_runs_end_to_end(tmp_path, name: str) -> None:
    result = run(config(tmp_path, name))
    assert result.status == "ok", result.reason
    steps = pd.read_csv(result.run_dir / "steps.csv")
    assert len(steps) == 2 * 7 and set(steps["rank"]) == {0, 1}
    for column in (
        "compute_s",
        "compress_s",
        "comm_s",
        "step_s",
        "loss",
        "payload_bytes",
        "tx_bytes",
        "rx_bytes",
        "capture_tx_wire_bytes",
        "capture_tx_payload_bytes",
        "retrans_segs",
        "capture_tx_retrans_bytes",
    ):
        assert column in steps, column
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert run_json["status"] == "ok" and run_json["cluster"]["delay_engine"] == "none"
    summary = result.summary
    assert summary["final_loss"] < summary["first_loss"]
    measured = steps[~steps["warmup"]]
    communicating = measured[measured["payload_bytes"] > 0]
    if name in PERIODIC:  # only some steps talk
        assert 0 < len(communicating) < len(measured)
    predicted = summary["predicted"]  # the model's figures for this run, beside the measured ones
    assert "error" not in predicted, predicted
    assert predicted["step_time_s"] > 0 and predicted["payload_bytes_per_step"] == pytest.approx(
        _declared_mean(name, measured), rel=1e-9
    )
    # What was handed to gloo crossed the wire (a step's last segments may drain during the next
    # step, so compare totals), and counters and capture agree within 2% on every step.
    assert measured["tx_bytes"].sum() >= measured["payload_bytes"].sum()
    # Per step the two sources split the stream at slightly different instants (packet timestamps vs
    # the counter read after the step), so a step can shift a few frames to its neighbour; the
    # typical step and the run's totals must agree within 2%.
    rel = (communicating["capture_tx_wire_bytes"] - communicating["tx_bytes"]).abs() / communicating["tx_bytes"]
    assert rel.median() <= 0.02
    # The totals leave out the last step: frames a step's counter counted reach the capture's tap (the switch port, in
    # the receiving softirq) late on a busy host, into the next step's window; the last step has none after it, and
    # lost a quarter of its bytes so beside the test suite.
    before_last = measured[measured["step"] < measured["step"].max()]
    totals = before_last.groupby("rank")[["capture_tx_wire_bytes", "tx_bytes"]].sum()
    assert ((totals["capture_tx_wire_bytes"] - totals["tx_bytes"]).abs() / totals["tx_bytes"]).max() <= 0.02
    assert not [n for n in netns.list_netns() if result.summary["run_id"] in n]


def _declared_mean(name: str, measured: pd.DataFrame) -> float:
    """Payload per step averaged over whole periods, as the model predicts it (from the measured steps' sizes)."""
    from netbench.declarations.registry import declared_payload
    from netbench.workloads import build_workload

    decl = declared_payload(
        build_workload(SMALL, 0, 2).param_shapes(), ReplicatorConfig(name=name, **PERIODIC.get(name, {})), 2
    )
    assert measured["payload_bytes"].tolist() == [decl.bytes_on(step + 1) for step in measured["step"]]
    return sum(p.bytes_per_step / p.period for p in decl.parts())


def test_payload_plus_framing_explains_wire(tmp_path) -> None:
    """Captured TCP payload covers what was handed to gloo; headers and ACKs are the rest."""
    result = run(config(tmp_path, "full", workload=WorkloadConfig(kind="mlp", hidden=512, mlp_layers=3)))
    steps = pd.read_csv(result.run_dir / "steps.csv")
    steps = steps[~steps["warmup"]]
    totals = steps.groupby("rank").sum(numeric_only=True)  # a step's tail may drain in the next step's window
    payload, captured = totals["payload_bytes"], totals["capture_tx_payload_bytes"]
    # Above: gloo's own message headers (< 3%). Below: the last step's final segments may still be
    # draining when its window closes, which nothing after it collects (< 1%).
    assert ((captured - payload) / payload).between(-0.01, 0.03).all()
    framing = totals["capture_tx_wire_bytes"] - captured
    frames = totals["capture_tx_packets"]
    assert (framing <= frames * 66 * 1.01).all() and (framing >= frames * 66 * 0.99).all()  # 66 B of headers per frame


def test_capture_matches_counters_with_offloads_on(tmp_path) -> None:
    """Above 2.5gbit skbs are GSO super-packets: counters count them as handed over, the capture too
    (skb bytes), and the capture's wire estimate adds the headers of the MTU frames they become."""
    result = run(config(tmp_path, "full", rate=10e9, workload=WorkloadConfig(kind="mlp", hidden=512, mlp_layers=3)))
    assert result.status == "ok", result.reason
    assert json.loads((result.run_dir / "run.json").read_text())["cluster"]["offload"] is True
    steps = pd.read_csv(result.run_dir / "steps.csv")
    totals = steps[~steps["warmup"]].groupby("rank").sum(numeric_only=True)
    assert ((totals["capture_tx_skb_bytes"] - totals["tx_bytes"]).abs() / totals["tx_bytes"]).max() <= 0.02
    assert result.summary["capture_vs_counter_median_rel_diff"] <= 0.02
    assert (totals["capture_tx_packets"] > totals["tx_packets"]).all()  # frames on a real wire outnumber skbs
    headers = totals["capture_tx_wire_bytes"] - totals["capture_tx_skb_bytes"]
    assert (headers > 0).all() and (headers < 0.05 * totals["capture_tx_skb_bytes"]).all()


def test_run_with_delay_uses_the_delay_line(tmp_path) -> None:
    slow = run(config(tmp_path, "dct", delay=0.010, steps=3))
    assert slow.status == "ok", slow.reason
    assert slow.summary["delay_engine"] in ("delayline", "netem")
    assert slow.summary["comm_time_s"] >= 0.020  # at least one round trip per all-gather


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--replicator", "lowrank", "--rank", "0"], "--rank: "),
        (["--replicator", "lowrank", "--mu", "1"], "--mu: "),
        (["--replicator", "mtdao", "--params-every", "0"], "--params-every: "),
    ],
)
def test_cli_run_rejects_bad_replicator_values(tmp_path, args: list[str], expected: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "netbench", "run", *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netbench: error: {expected}"), lines


def test_cli_run_json(tmp_path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "netbench",
            "run",
            "--replicator",
            "random",
            "--workload",
            "mlp",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--bw",
            "1gbit",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    for key in (
        "replicator",
        "nodes",
        "bw_bps",
        "delay_ms",
        "steps",
        "step_time_s",
        "comm_time_s",
        "compress_time_s",
        "compute_time_s",
        "payload_bytes_per_step",
        "wire_tx_bytes_per_step",
        "wire_rx_bytes_per_step",
        "capture_wire_bytes_per_step",
        "final_loss",
        "run_dir",
    ):
        assert key in summary, key
    assert summary["replicator"] == "random" and summary["bw_bps"] == 1e9
