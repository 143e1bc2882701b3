"""The model's predicted step as its own track, beside the measured median step.

The prediction stored in run.json's summary (``predicted``: local work, encode, exposed
communication, decode, step time; seconds of the configuration as asked) is laid out as one step:
compute, encode, communicate, decode, apply, in that order, ending at the predicted step time
(what a pipeline overlaps is already off the exposed communication). Under time dilation k the
run's wall clock ran k times slower than the configuration it reports, so the model's times are
multiplied by k to stand beside the measured spans. The step starts where rank 0's median
measured step starts.
"""

from __future__ import annotations

from typing import Any

from netbench.trace import events as ev


def model_phases(predicted: dict[str, Any], apply_s: float) -> list[tuple[str, float]]:
    """(phase, seconds) of one predicted step; ``apply_s`` (measured) is split off the local work."""
    local = float(predicted.get("local_time_s") or 0.0)
    apply_s = min(max(apply_s, 0.0), local)
    return [
        ("compute", local - apply_s),
        ("encode", float(predicted.get("compress_time_s") or 0.0)),
        ("communicate", float(predicted.get("comm_time_s") or 0.0)),
        ("decode", float(predicted.get("decode_time_s") or 0.0)),
        ("apply", apply_s),
    ]


def model_events(predicted: dict[str, Any] | None, apply_s: float, start_s: float, dilation: float) -> list[ev.Event]:
    """The model's process: one predicted step from ``start_s`` (seconds from the trace's origin)."""
    if not predicted or not predicted.get("step_time_s"):
        return []
    k = dilation or 1.0
    step = float(predicted["step_time_s"]) * k
    out = ev.process(ev.MODEL_PID, "model (predicted step)", -1) + ev.thread(ev.MODEL_PID, 1, "predicted")
    out.append(
        ev.span(
            ev.MODEL_PID,
            1,
            "step (model)",
            start_s,
            start_s + step,
            "model",
            step_time_s=predicted["step_time_s"],
            dilation=k,
        )
    )
    t = start_s
    for name, seconds in model_phases(predicted, apply_s):
        end = min(t + seconds * k, start_s + step)
        if end > t:
            out.append(ev.span(ev.MODEL_PID, 1, name, t, end, "model", predicted_s=round(seconds, 6)))
        t = end
    return out
