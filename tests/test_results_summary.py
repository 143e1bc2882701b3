"""The run summary's statistic: medians for steady replicators, means for periodic ones; the replay's codec takes it."""

from __future__ import annotations

import pandas as pd

from netbench.orchestrator.prediction import mean_codec_s, measured_codec_s
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


def with_codec(frame_: pd.DataFrame, encode: list[float], decode: list[float]) -> pd.DataFrame:
    """``frame_`` with rank 1 encoding and decoding ``encode``/``decode`` per step, rank 0 at half of that."""
    out = frame_.copy()
    for rank, share in ((0, 0.5), (1, 1.0)):
        rows = out["rank"] == rank
        out.loc[rows, "compress_s"] = [share * e for e in encode]
        out.loc[rows, "decode_s"] = [share * d for d in decode]
    return out


def test_periodic_replay_codec_is_the_mean_of_the_sync_steps() -> None:
    steps = with_codec(frame([0, 0, 0, 400] * 2, [0.1, 0.1, 0.1, 0.5] * 2), [0, 0, 0, 0.08] * 2, [0, 0, 0, 0.04] * 2)
    encode, decode = measured_codec_s(steps)
    assert abs(encode - 0.02) < 1e-12 and abs(decode - 0.01) < 1e-12  # the median step encodes nothing
    assert abs(mean_codec_s(steps) - 0.03) < 1e-12


def test_steady_replay_codec_is_the_median() -> None:
    steps = with_codec(frame([100] * 5, [0.1] * 5), [0.01, 0.01, 0.01, 0.01, 0.5], [0.002] * 5)
    encode, decode = measured_codec_s(steps)
    assert encode == 0.01 and decode == 0.002  # one slow encode does not move it
    assert mean_codec_s(steps) > 0.1  # the hops' mean does


def test_replay_codec_without_decode_column() -> None:
    steps = with_codec(frame([100] * 3, [0.1] * 3), [0.01] * 3, [0.0] * 3).drop(columns=["decode_s"])
    assert measured_codec_s(steps) == (0.01, 0.0)
