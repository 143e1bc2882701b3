"""Each rank's track: every step with its phases, the time between them, and each bucket's collective.

A step is the worker's ``t_start`` to ``t_end``; inside it the worker's spans
(:mod:`netbench.trace.spans`) mark compute, encode, communicate (a blocking collective), wait (a
rank blocked on an async collective: idle, waiting for the network or a peer), decode and apply.
Time inside a step that no span covers (launching collectives, bookkeeping) is ``other``. Each
collective goes on a bucket row of its own beside the phases, from its start to its completion;
collectives that travel at once get separate rows. A collective that overlaps later steps (a Streaming DiLoCo
fragment's, named by its fragment) is drawn from its start in the step that started it to its completion.
"""

from __future__ import annotations

from typing import Any

from netbench.rundir.steps_schema import Col
from netbench.trace import events as ev

PHASES = ("compute", "encode", "communicate", "wait", "decode", "apply")
COLLECTIVES = ("collective", "communicate")  # spans that put a bucket's collective on the wire
# a step's figures through leaves and joins, shown in its arguments where the run recorded them
QUORUM_FIGURES = (Col.QUORUM_REPLICAS, Col.COMMITTED, Col.HEAL_BYTES, Col.HEAL_S, Col.RESTART_QUORUM)
GAP_S = 20e-6  # untimed stretches shorter than this are clock-read noise, not shown


def step_events(pid: int, record: dict[str, Any], origin: float) -> list[ev.Event]:
    """One step of one rank: the step, its phases and gaps (tid 1), its collectives (tids 2 and up)."""
    start = record[Col.T_START] - origin
    spans = record.get("spans") or []
    end = max(record[Col.T_END] - origin, start + max((s[2] for s in spans), default=0.0))
    label = {"step": record[Col.STEP], "warmup": record.get(Col.WARMUP, False)}
    label |= {c.value: record[c] for c in QUORUM_FIGURES if record.get(c) is not None}
    out = [ev.span(pid, 1, f"step {record[Col.STEP]}", start, end, "step", **label, step_s=record.get(Col.STEP_S))]
    phases = sorted((s for s in spans if s[0] in PHASES), key=lambda s: s[1])
    cursor = 0.0
    for name, t0, t1, args in phases:
        if t0 - cursor > GAP_S:
            out.append(ev.span(pid, 1, "other", start + cursor, start + t0, "other", step=record[Col.STEP]))
        out.append(ev.span(pid, 1, name, start + t0, start + t1, "phase", step=record[Col.STEP], **args))
        cursor = max(cursor, t1)
    if end - (start + cursor) > GAP_S:
        out.append(ev.span(pid, 1, "other", start + cursor, end, "other", step=record[Col.STEP]))
    out += bucket_events(pid, [s for s in spans if s[0] in COLLECTIVES], start, record[Col.STEP])
    return out


def bucket_events(pid: int, collectives: list[list[Any]], start: float, step: int) -> list[ev.Event]:
    """Each collective on the first bucket row free at its start (rows are tids 2, 3, ...)."""
    rows: list[float] = []  # when each row frees up
    out = []
    for _name, t0, t1, args in sorted(collectives, key=lambda s: s[1]):
        row = next((i for i, free in enumerate(rows) if free <= t0), len(rows))
        if row == len(rows):
            rows.append(t1)
        rows[row] = t1
        unit = f"fragment {args['fragment']}" if "fragment" in args else f"bucket {args.get('bucket', '?')}"
        name = f"{unit} {args.get('op', '')}".strip()
        out.append(ev.span(pid, 2 + row, name, start + t0, start + t1, "collective", step=step, **args))
    return out


def rank_events(rank: int, records: list[dict[str, Any]], origin: float, node: int | None) -> list[ev.Event]:
    """Rank ``rank``'s process: its name, its tracks' names, and every step it recorded."""
    pid = ev.RANK_PID + rank
    steps = [r for r in records if r.get("event") == "step"]
    out = ev.process(pid, f"rank {rank}" + (f" (node {node})" if node is not None else ""), rank)
    out += ev.thread(pid, 1, "phases")
    body = [e for r in steps for e in step_events(pid, r, origin)]
    for tid in sorted({e["tid"] for e in body if e["tid"] > 1}):
        out += ev.thread(pid, tid, f"buckets {tid - 1}")
    return out + body
