"""One typed summary, one table of metrics: every view lists the table's metrics, old summaries still read."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from netbench.declarations.registry import REGISTRY
from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.run.divergence import diverged_at_step
from netbench.orchestrator.sweep.scenario import Point
from netbench.orchestrator.sweep.sweep import point_row
from netbench.reports.report import NETWORK_COLUMNS, generate_report, with_errors
from netbench.reports.style import UNKNOWN, color
from netbench.reports.terminal import summary_table
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import (
    METRICS,
    Prediction,
    RunSummary,
    csv_measured,
    csv_predicted,
    predicted_column,
    report_metrics,
    terminal_metrics,
)

REPO = Path(__file__).resolve().parent.parent
NAN = float("nan")


def full_summary() -> dict:
    """A summary with every metric set (distinct values), a prediction of every predicted one, and a run's
    coordinates.
    """
    values = {
        m.key: (i + 1 if m.unit == "count" else float(i + 1))
        for i, m in enumerate(METRICS)
        if m.summary and m.unit != "text" and m.key != "steps_measured"
    }
    predicted = {m.key: float(i + 100) for i, m in enumerate(METRICS) if m.prediction}
    return RunSummary.new(
        **values,
        steps_measured=5,
        statistic="median",
        run_id="abc",
        status="ok",
        replicator="dct",
        nodes=2,
        bw_bps=100_000_000,
        delay_ms=0.0,
        predicted=Prediction.new(**predicted),
    ).to_json()


def test_terminal_table_lists_the_terminal_metrics_in_order() -> None:
    console = Console(width=240, record=True)
    table = summary_table(full_summary())
    labels = [cell.strip() for cell in table.columns[0]._cells]
    wanted = [m.label for m in terminal_metrics()]
    assert labels[: len(wanted)] == wanted
    console.print(table)
    assert "captured tx bytes/step/node" in console.export_text()  # the capture's tx figure says it is tx


def test_summary_csv_has_the_tables_measured_and_predicted_columns(tmp_path) -> None:
    point = Point(
        label="dct 2n 100mbit 0ms",
        key="k",
        config=RunConfig(cluster=ClusterSpec(nodes=2, up={"rate_bps": 1e8}, down={"rate_bps": 1e8})),
        bw="100mbit",
        delay="0ms",
    )
    summary = full_summary()
    row = point_row(point, summary, "ok", None, tmp_path / "runs" / "r", summary["predicted"], tmp_path)
    assert [k for k in row if k in csv_measured()] == list(csv_measured())
    assert [k for k in row if k.startswith("pred_")] == [predicted_column(k) for k in csv_predicted()]
    assert all(row[k] == summary[k] for k in csv_measured())
    # today's columns, by name: the committed CI sweep (which CI's comparison reads) has every one
    committed = set(pd.read_csv(REPO / "reports" / "ci" / "summary.csv", nrows=1).columns)
    assert set(row) <= committed and set(csv_measured()) <= committed


def test_report_md_lists_the_report_metrics(tmp_path) -> None:
    folder = tmp_path / "ci"
    shutil.copytree(REPO / "reports" / "ci", folder, ignore=shutil.ignore_patterns("*.png", "report.*"))
    text = generate_report(folder).markdown.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| point |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells[0] == "point" and cells[-1] == "faithful"
    network = [heading for key, heading in NETWORK_COLUMNS.items() if key in pd.read_csv(folder / "summary.csv")]
    assert len(cells) == 2 + sum(len(m.report) for m in report_metrics()) + len(network)
    assert cells[-1 - len(network) : -1] == network  # the model's errors and bottlenecks, where the sweep has them
    for m in report_metrics():
        assert any(c.startswith(m.short) for c in cells), m.short
    rows = [line for line in text.splitlines() if line.startswith("| full 2n 10mbit 0ms |")]
    assert rows and len(rows[0].strip("|").split("|")) == len(cells)


def test_with_errors_adds_columns_and_keeps_the_measured_ones() -> None:
    frame = pd.DataFrame(
        [
            {
                "label": "a",
                "status": "ok",
                "step_time_s": 1.0,
                "pred_step_time_s": 1.1,
                "wire_tx_bytes_per_step": 100.0,
                "capture_wire_bytes_per_step": 110.0,
                "pred_wire_tx_bytes_per_step": 121.0,
                "wire_rx_bytes_per_step": 100.0,
                "capture_rx_wire_bytes_per_step": float("nan"),
                "pred_wire_rx_bytes_per_step": 90.0,
                "compress_time_s": 0.1,
                "decode_time_s": 0.2,
                "pred_compress_time_s": 0.3,
                "pred_decode_time_s": float("nan"),
            }
        ]
    )
    out = with_errors(frame)
    assert out["wire_tx_bytes_per_step"].iloc[0] == 100.0  # the measurement is left alone
    assert out["compared_wire_tx_bytes_per_step"].iloc[0] == 110.0  # the capture's frames, where captured
    assert out["err_wire_tx_bytes_per_step"].iloc[0] == pytest.approx(0.1)
    assert out["compared_wire_rx_bytes_per_step"].iloc[0] == 100.0  # not captured: the counters
    assert out["err_wire_rx_bytes_per_step"].iloc[0] == pytest.approx(-0.1)
    assert out["encode_decode_time_s"].iloc[0] == pytest.approx(0.3) and out["pred_encode_decode_time_s"].iloc[
        0
    ] == pytest.approx(0.3)
    assert set(frame.columns) <= set(out.columns) and all(out[c].equals(frame[c]) for c in frame.columns)


def test_every_registered_replicator_has_its_own_colour() -> None:
    colours = [color(name) for name in REGISTRY]
    assert UNKNOWN not in colours and len(set(colours)) == len(colours)
    assert color("someone-elses") == UNKNOWN


def test_committed_summaries_round_trip_with_the_same_keys() -> None:
    paths = sorted((REPO / "reports").rglob("run.json"))
    assert paths
    for path in paths:
        stored = json.loads(path.read_text())["summary"]
        again = json.loads(json.dumps(RunSummary.from_json(stored).to_json()))
        assert again == stored, path
        assert RunSummary.from_json(json.dumps(stored)).to_json().keys() == stored.keys()


def test_a_misspelt_key_fails_at_the_writer() -> None:
    with pytest.raises(KeyError, match="capture_tx_wire_bytes_per_step"):
        RunSummary.new(capture_tx_wire_bytes_per_step=1.0)
    with pytest.raises(KeyError):
        Prediction.new(final_loss=1.0)  # a measured-only key is no prediction


def test_a_run_whose_last_loss_is_nan_still_prints_its_table() -> None:
    """A diverged run's summary holds no last loss (every rank's was NaN): its table says so instead of failing."""
    console = Console(width=240, record=True)
    summary = {**full_summary(), "first_loss": 5.7, "final_loss": None}
    console.print(summary_table(summary))
    assert "5.700 -> not a number" in console.export_text()


def _losses(by_step: dict[int, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {Col.STEP: step, Col.RANK: rank, Col.LOSS: loss}
            for step, losses in by_step.items()
            for rank, loss in enumerate(losses)
        ]
    )


@pytest.mark.parametrize(
    ("by_step", "expected"),
    [
        ({0: [5.0, 5.1], 1: [4.0, 4.2], 2: [3.0, 3.1]}, None),  # trained
        ({0: [5.0, 5.1], 1: [NAN, NAN], 2: [NAN, NAN]}, 1),  # diverged at step 1
        ({0: [5.0, 5.1], 1: [NAN, 4.0], 2: [NAN, NAN]}, 2),  # one node's loss a number at step 1
        ({0: [5.0, 5.1], 1: [NAN, NAN], 2: [3.0, 3.1]}, None),  # a step without a loss, then losses again
        ({0: [NAN, NAN], 1: [NAN, NAN]}, None),  # no loss recorded at all: a workload without one
    ],
)
def test_a_run_diverged_from_the_first_step_no_node_recorded_a_loss_to_the_end(
    by_step: dict[int, list[float]], expected: int | None
) -> None:
    assert diverged_at_step(_losses(by_step)) == expected


def test_a_diverged_run_says_from_which_step_in_its_table() -> None:
    console = Console(width=240, record=True)
    summary = {**full_summary(), "first_loss": 5.7, "final_loss": None, "diverged_at_step": 3}
    console.print(summary_table(summary))
    assert re.search(r"training diverged.*\b3\b", console.export_text())


@pytest.mark.parametrize(("nodes", "said"), [(1, "1 node,"), (2, "2 nodes,")])
def test_the_title_counts_nodes_in_words(nodes: int, said: str) -> None:
    console = Console(width=240, record=True)
    console.print(summary_table({**full_summary(), "nodes": nodes}))
    assert said in console.export_text()
