"""A scheduled run's figure and table: step time over the run with the model's per-segment step, the schedule beneath.

Drawn from steps.csv (each step's slowest node, placed at its start, in seconds from the first measured step) and the
summary's ``schedule_segments`` (each segment's window, rate in force, outage, compute scale, and the model's
step). Both are read as untrusted input: a damaged file gives no figure, never a crash.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from netbench.reports.drawing import plt
from netbench.reports.figure_file import save
from netbench.reports.steps import read_steps
from netbench.rundir.steps_schema import Col

__all__ = ["schedule_figure", "segment_lines", "restart_line"]


def _number(value: Any) -> float | None:
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )


def _segments(summary: dict[str, Any]) -> list[dict[str, Any]]:
    found = summary.get("schedule_segments")
    return (
        [s for s in found if isinstance(s, dict) and _number(s.get("start_s")) is not None]
        if isinstance(found, list)
        else []
    )


def segment_lines(summary: dict[str, Any]) -> list[str]:
    """One line per segment: its window and network, median step, the model's, the error; what its changes in members
    cost beside the model's, and its mean step with them; stalled steps where a link was down. Last, where the
    training was lost and started afresh, :func:`restart_line`.
    """
    lines = []
    for s in _segments(summary):
        measured, model = _number(s.get("step_time_s")), _number(s.get("predicted_step_time_s"))
        replay = _number(s.get("replay_step_time_s"))
        text = f"{str(s.get('label', ''))[:60]}: {int(_number(s.get('steps')) or 0)} steps"
        if measured is not None:
            text += f", {'steady ' if 'transient_s' in s else ''}median step {measured:.3f} s"
        if model is not None and measured:
            text += f", model {model:.3f} s ({model / measured - 1:+.0%})"
        if replay is not None and measured:
            text += f", replay {replay:.3f} s ({replay / measured - 1:+.0%})"
        transient, transient_model = _number(s.get("transient_s")), _number(s.get("predicted_transient_s"))
        if transient is not None:
            text += (
                f"; changes in members cost {transient:.2f} s over {int(_number(s.get('transient_steps')) or 0)} steps"
            )
            if transient_model is not None and transient:
                text += f", model {transient_model:.2f} s ({transient_model / transient - 1:+.0%})"
            whole, whole_model = _number(s.get("segment_step_time_s")), _number(s.get("predicted_segment_step_time_s"))
            if whole and whole_model is not None:
                text += f"; mean step {whole:.3f} s, model {whole_model:.3f} s ({whole_model / whole - 1:+.0%})"
        stalled = s.get("stalled_steps")
        if isinstance(stalled, list) and stalled:
            text += f", stalled steps {', '.join(str(int(x)) for x in stalled[:8] if isinstance(x, int))}"
        lines.append(text)
    restarts = restart_line(summary)
    return [*lines, restarts] if restarts else lines


def _restart_events(summary: dict[str, Any]) -> list[dict[str, Any]]:
    found = summary.get("restart_events")
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def restart_line(summary: dict[str, Any]) -> str | None:
    """The times the training was lost and started afresh, the committed steps they threw away and when, beside the
    model's rules over the run's own changes; None where neither the run nor the rules restarted, or the run recorded
    no restarts (a run without a quorum)."""
    count, model = _number(summary.get("restarts")), _number(summary.get("restarts_model"))
    if count is None or (not count and not model):
        return None
    rules = f"; the model's rules over the run's changes: {int(model)}" if model is not None else ""
    if not count:
        return f"the training was never lost (every restart needs every node that held it gone){rules}"
    lost = _number(summary.get("restart_steps_lost")) or 0.0
    times = [t for r in _restart_events(summary) if (t := _number(r.get("time_s"))) is not None]
    when = f" (at {', '.join(f'{t:.0f}' for t in times[:8])} s)" if times else ""
    return (
        f"the training was lost and started afresh {int(count)} time{'s' if count != 1 else ''}{when}: every node "
        f"that held it had left; {lost:.0f} committed steps redone{rules}"
    )


def _step_times(run_dir: Path) -> pd.DataFrame | None:
    steps = read_steps(run_dir)
    if steps is None or Col.SCHEDULE_ELAPSED_S not in steps:
        return None
    steps = steps.assign(schedule_elapsed_s=pd.to_numeric(steps[Col.SCHEDULE_ELAPSED_S], errors="coerce"))
    measured = steps[~steps[Col.WARMUP].astype(bool)] if Col.WARMUP in steps else steps
    per_step = measured.groupby(Col.STEP).agg(t=(Col.SCHEDULE_ELAPSED_S, "min"), step_s=(Col.STEP_S, "max")).dropna()
    return per_step if not per_step.empty else None


def schedule_figure(run_dir: Path, summary: dict[str, Any], path: Path) -> Path | None:
    """Draw the run's step times over its schedule into ``path``; None where the run has no schedule or no steps."""
    segments, per_step = _segments(summary), _step_times(run_dir)
    if not segments or per_step is None:
        return None
    end = max(float(per_step["t"].max() + per_step[Col.STEP_S].iloc[-1]), max(s["start_s"] for s in segments) + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    top.plot(
        per_step["t"],
        per_step[Col.STEP_S],
        "o-",
        ms=3,
        lw=1,
        color="#4c72b0",
        drawstyle="steps-post",
        label="measured step (slowest node), from its start",
    )
    for s in segments:
        stop = _number(s.get("end_s")) or end
        for key, style, label in (
            ("predicted_step_time_s", "--", "model (forecast)"),
            ("replay_step_time_s", ":", "model (replay)"),
        ):
            value = _number(s.get(key))
            if value is not None:
                top.hlines(value, s["start_s"], stop, colors="#c44e52", linestyles=style, label=label)
        if s.get("link_down"):
            for ax in (top, bottom):
                ax.axvspan(s["start_s"], stop, color="#bbbbbb", alpha=0.5, lw=0)
        rate = _number(s.get("rate_bps"))
        if rate is not None:
            bottom.hlines(rate / 1e6, s["start_s"], stop, colors="#55a868", lw=2)
        scale = _number(s.get("compute_scale"))
        if scale and scale > 1:
            bottom.text(s["start_s"], 0, f" compute x{scale:g}", fontsize=8, va="bottom")
    for r in _restart_events(summary):
        at = _number(r.get("time_s"))
        if at is not None:
            for ax in (top, bottom):
                ax.axvline(at, color="#8172b2", ls="-.", lw=1.2, label="the training lost, started afresh")
    handles, labels = top.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    top.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left")
    top.set_ylabel("step time (s)")
    top.grid(alpha=0.3)
    bottom.set_ylabel("rate (Mbit/s)")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("seconds from the first measured step (grey: a link down)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    return save(fig, path)
