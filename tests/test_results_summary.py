"""The run summary's statistic: medians for steady replicators, means for periodic ones."""

from __future__ import annotations

import pandas as pd

from netbench.orchestrator.run.results import summarize


def frame(payloads: list[int], step_s: list[float]) -> pd.DataFrame:
    rows = []
    for rank in (0, 1):
        for step, (payload, seconds) in enumerate(zip(payloads, step_s), start=1):
            rows.append(
                {
                    "rank": rank,
                    "step": step,
                    "warmup": False,
                    "step_s": seconds,
                    "compute_s": 0.01,
                    "compress_s": 0.0,
                    "comm_s": seconds - 0.01,
                    "decode_s": 0.0,
                    "apply_s": 0.0,
                    "loss": 1.0,
                    "payload_bytes": payload,
                    "tx_bytes": payload * 1.05,
                    "rx_bytes": payload * 1.05,
                }
            )
    return pd.DataFrame(rows)


def test_steady_payload_reports_medians() -> None:
    summary = summarize(frame([100] * 5, [0.1, 0.1, 0.1, 0.1, 5.0]), 0)
    assert summary["statistic"] == "median"
    assert summary["step_time_s"] == 0.1  # one slow step does not move it
    assert summary["payload_bytes_per_step"] == 100


def test_periodic_payload_reports_means() -> None:
    summary = summarize(frame([0, 0, 0, 400, 0, 0, 0, 400], [0.1, 0.1, 0.1, 0.5] * 2), 0)
    assert summary["statistic"] == "mean"
    assert summary["payload_bytes_per_step"] == 100  # the median step sends nothing; the average is what a period costs
    assert abs(summary["step_time_s"] - 0.2) < 1e-9
    assert abs(summary["wire_tx_bytes_per_step"] - 105) < 1e-9
