"""trace.json from a run directory: every source on one clock, in the Chrome trace-event format.

Clock: the workers place each step by ``time.time()`` (CLOCK_REALTIME) read beside a
``perf_counter()`` (CLOCK_MONOTONIC) reading, and time the spans inside the step by the latter;
tcpdump stamps packets with CLOCK_REALTIME in the kernel; the TCP samplers read ``time.time()``.
All run on one host, so ranks, capture and samplers read one kernel clock (network namespaces do
not have clocks of their own). What can misplace a span is the two clocks drifting apart within
a step (NTP slewing REALTIME) and the gap between the two reads: the trace states the largest
disagreement measured over the run's steps, ``|(t_end - t_start) - step_s|``, as its alignment
bound. A packet's stamp is when the switch port's tap saw it, after the sender's shaper.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from netbench import safe_files
from netbench.rundir.layout import RunDir
from netbench.rundir.runjson import recorded_dilation
from netbench.rundir.steps_schema import Col
from netbench.trace import events as ev
from netbench.trace import links, model_track, ranks, tcp
from netbench.trace.membership import membership_events
from netbench.trace.sampling import tcp_folder

TRACE_NAME = "trace.json"


def trace_path(run_dir: Path) -> Path:
    return Path(run_dir) / TRACE_NAME


def _steps(records: Mapping[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        r
        for recs in records.values()
        for r in recs
        if r.get("event") == "step"
        and isinstance(r.get(Col.T_START), (int, float))
        and isinstance(r.get(Col.T_END), (int, float))
    ]


def alignment_bound_s(steps: list[dict[str, Any]]) -> float | None:
    """Largest disagreement of the wall clock and the monotonic clock over one step, over every step."""
    gaps = [
        abs((r[Col.T_END] - r[Col.T_START]) - r[Col.STEP_S])
        for r in steps
        if isinstance(r.get(Col.STEP_S), (int, float))
    ]
    return max(gaps) if gaps else None


def median_step_start(steps: list[dict[str, Any]], rank: int = 0) -> float | None:
    """Where ``rank``'s median measured step (by step time) starts: the model's step goes beside it."""
    mine = sorted(
        (r for r in steps if r.get(Col.RANK) == rank and not r.get(Col.WARMUP)), key=lambda r: r.get(Col.STEP_S) or 0.0
    )
    return mine[len(mine) // 2][Col.T_START] if mine else None


def slowest_step_ends(steps: list[dict[str, Any]]) -> dict[int, float]:
    """Steps done by every rank -> when the last rank finished the last of them (0: when the first step began)."""
    ends: dict[int, float] = {0: min(r[Col.T_START] for r in steps)}
    for r in steps:
        ends[r[Col.STEP] + 1] = max(ends.get(r[Col.STEP] + 1, 0.0), r[Col.T_END])
    return ends


class NoSteps(ValueError):
    """The run recorded no step: a trace would show nothing (a run that could not start, a program that marks none)."""


def build(
    run_dir: Path, node_of_rank: Mapping[int, int], pcaps: Mapping[int, Path], addresses: Mapping[int, str]
) -> dict[str, Any]:
    """The trace of the run in ``run_dir`` (its records, run.json, trunks.csv, tcp/ and the given captures)."""
    rd = RunDir(Path(run_dir))
    records = rd.all_records(len(node_of_rank))
    steps = _steps(records)
    if not steps:
        raise NoSteps("no step was recorded")
    origin = min(r[Col.T_START] for r in steps)
    run_json = json.loads(rd.run_json.read_text()) if rd.run_json.is_file() else {}
    summary = run_json.get("summary") or {}
    switches = ((run_json.get("cluster") or {}).get("fabric") or {}).get("switches")
    one_switch = switches is None or len(switches) == 1  # every node's bytes pass the one switch
    out: list[ev.Event] = []
    for rank, recs in records.items():
        out += ranks.rank_events(rank, recs, origin, node_of_rank.get(rank))
    out += ev.process(ev.LINKS_PID, "links", 900)
    out += (
        links.capture_events(pcaps, addresses, origin, one_switch)
        if pcaps
        else links.counter_events(steps, node_of_rank, origin)
    )
    out += links.trunk_events(rd.trunks_csv, slowest_step_ends(steps), origin)
    out += membership_events(run_json, origin, len(set(node_of_rank.values())))
    tcp_out, costs = tcp.tcp_events(tcp_folder(rd.path), origin)
    out += tcp_out
    median = median_step_start(steps)
    out += model_track.model_events(
        summary.get("predicted"),
        float(summary.get("apply_time_s") or 0.0),
        (median if median is not None else origin) - origin,
        recorded_dilation(run_json) or 1.0,
    )
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": _about(origin, steps, costs, bool(pcaps), run_json),
    }


def _about(
    origin: float, steps: list[dict[str, Any]], costs: dict[int, Any], captured: bool, run_json: dict[str, Any]
) -> dict[str, Any]:
    """What the trace says about itself: its clock, its origin, its alignment bound, the samplers' cost."""
    cpu = [c["cpu_s"] / c["wall_s"] for c in costs.values() if c.get("wall_s")]
    return {
        "run_id": run_json.get("run_id"),
        "origin_unix_s": origin,
        "clock": "CLOCK_REALTIME of the host (workers: time.time() beside perf_counter(); capture: kernel "
        "packet stamps; TCP: time.time())",
        "alignment_bound_s": alignment_bound_s(steps),
        "links_from": "capture" if captured else "interface counters",
        "link_bin_s": links.BIN_S if captured else None,
        "dilation": run_json.get("dilation"),
        "tcp_sampler": {
            "nodes": len(costs),
            "interval_s": next((c.get("interval_s") for c in costs.values()), None),
            "cpu_fraction_of_a_core": round(statistics.mean(cpu), 5) if cpu else None,
        },
    }


def write_trace(
    run_dir: Path, node_of_rank: Mapping[int, int], pcaps: Mapping[int, Path], addresses: Mapping[int, str]
) -> Path:
    """Build the trace and write ``RUN_DIR/trace.json``; returns its path."""
    path = trace_path(run_dir)
    safe_files.write_text(path, json.dumps(build(run_dir, node_of_rank, pcaps, addresses), separators=(",", ":")))
    return path
