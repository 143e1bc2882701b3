"""Predict once: the report reads the prediction each run stored; it never calls the model for a point."""

from __future__ import annotations

import pandas as pd
import pytest

import netbench.orchestrator.prediction as predict_mod
import netbench.orchestrator.sweep.sweep as sweep_mod
from netbench.orchestrator.sweep.sweep import stored_prediction, write_summary
from netbench.reports.report import generate_report


def test_stored_prediction_is_read_not_recomputed() -> None:
    stored = {"step_time_s": 0.5, "compress_time_s": 0.1, "decode_time_s": 0.05, "calibration": {"digest": "abc"}}
    assert stored_prediction({"predicted": stored}) is stored
    assert stored_prediction({"prediction_error": "link rate unknown"}) == {"error": "link rate unknown"}
    assert stored_prediction({}) == {"error": "no prediction stored"}


def test_report_uses_summary_predictions_without_the_model(tmp_path, monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("the report recomputed a prediction")

    monkeypatch.setattr(predict_mod, "predict_run", boom)
    monkeypatch.setattr(sweep_mod, "predict_point", boom)
    row = {
        "key": "k1",
        "label": "dct 2n 1gbit 0ms",
        "replicator": "dct",
        "nodes": 2,
        "bw": "1gbit",
        "bw_bps": 1e9,
        "delay": "0ms",
        "delay_ms": 0.0,
        "status": "ok",
        "reason": "",
        "run_dir": "runs/x",
        "step_time_s": 0.2,
        "comm_time_s": 0.02,
        "compress_time_s": 0.03,
        "decode_time_s": 0.01,
        "payload_bytes_per_step": 1000.0,
        "wire_tx_bytes_per_step": 1100.0,
        "wire_rx_bytes_per_step": 1100.0,
        "pred_step_time_s": 0.1234,
        "pred_comm_time_s": 0.02,
        "pred_compress_time_s": 0.0311,
        "pred_decode_time_s": 0.0122,
        "pred_local_time_s": 0.05,
        "pred_payload_bytes_per_step": 1000.0,
        "pred_wire_tx_bytes_per_step": 1090.0,
        "pred_wire_rx_bytes_per_step": 1090.0,
        "params": 1000,
        "prediction_error": "",
        "fidelity_ok": False,
        "fidelity_reasons": "CPU: 32 nodes outnumber the host's 2 cores",
    }
    write_summary(
        tmp_path,
        pd.DataFrame(
            [row, {**row, "key": "k2", "label": "dct 2n 1gbit 5ms", "fidelity_ok": True, "fidelity_reasons": ""}]
        ),
    )
    result = generate_report(tmp_path)
    text = result.markdown.read_text()
    assert "| 0.123 |" in text  # the stored step prediction
    assert (
        "| 0.043 |" in text
    )  # enc+dec model = stored encode 0.0311 + decode 0.0122, like for like with measured 0.03 + 0.01
    assert "no: CPU: 32 nodes outnumber" in text
    assert result.accuracy.points == 1  # the point that was not faithful is left out of the model's accuracy
    assert result.accuracy.step_median_abs == pytest.approx(abs(0.1234 - 0.2) / 0.2)


def test_a_sweep_of_unfaithful_points_says_so_rather_than_that_none_was_predicted(tmp_path) -> None:
    row = {
        "key": "k1",
        "label": "full 2n 1gbit 0ms",
        "replicator": "full",
        "nodes": 2,
        "bw": "1gbit",
        "bw_bps": 1e9,
        "delay": "0ms",
        "delay_ms": 0.0,
        "status": "ok",
        "reason": "",
        "run_dir": "runs/x",
        "step_time_s": 0.2,
        "pred_step_time_s": 0.18,
        "wire_tx_bytes_per_step": 1100.0,
        "pred_wire_tx_bytes_per_step": 1090.0,
        "prediction_error": "",
        "fidelity_ok": False,
        "fidelity_reasons": "CPU: each worker waited 24% of the run for a core",
    }
    write_summary(tmp_path, pd.DataFrame([row, {**row, "key": "k2", "label": "full 2n 1gbit 5ms"}]))
    result = generate_report(tmp_path)
    assert result.accuracy.points == 0 and result.accuracy.unfaithful == 2
    assert result.accuracy_lines() == [
        "model accuracy: no faithful point: 2 measured and predicted, none with a faithful emulation "
        "(each point's fidelity says why)"
    ]
    assert "No faithful point: 2 measured and predicted" in result.markdown.read_text()
    assert "No point was both measured and predicted" not in result.markdown.read_text()
