"""Counter tracks of TCP per connection, from the samplers' files (``tcp/nodeN.jsonl``).

A node's connections are its own sockets (the local end is the node). Only connections that
carried data are shown: gloo's pairs, not the idle rendezvous store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from netbench.trace import events as ev

MIN_BYTES = 64 * 1024  # a connection that sent less is control traffic
SERIES = (
    ("cwnd", "cwnd (segments)", 1.0),
    ("srtt_us", "srtt (ms)", 1e-3),
    ("in_flight_bytes", "in flight (bytes)", 1.0),
    ("retrans", "retransmissions", 1.0),
)


def read_samples(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A sampler's samples and its done line ({} when it never wrote one); broken lines are skipped."""
    samples, done = [], {}
    for line in path.read_text().splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        if item.get("event") == "tcp" and isinstance(item.get("conns"), list):
            samples.append(item)
        elif item.get("event") == "done":
            done = item
    return samples, done


def busy_connections(samples: list[dict[str, Any]]) -> set[str]:
    sent: dict[str, int] = {}
    for s in samples:
        for c in s["conns"]:
            sent[c.get("conn", "")] = max(sent.get(c.get("conn", ""), 0), int(c.get("bytes_sent") or 0))
    return {conn for conn, n in sent.items() if n >= MIN_BYTES}


def node_events(node: int, path: Path, origin: float) -> tuple[list[ev.Event], dict[str, Any]]:
    """Node ``node``'s TCP tracks and its sampler's cost (samples, CPU seconds, wall seconds)."""
    samples, done = read_samples(path)
    pid = ev.TCP_PID + node
    out = ev.process(pid, f"TCP node {node}", 1000 + node)
    keep = busy_connections(samples)
    for s in samples:
        for c in s["conns"]:
            if c.get("conn") in keep:
                for field, label, scale in SERIES:
                    out.append(
                        ev.counter(
                            pid,
                            f"{c['conn']} {label}",
                            s["t"] - origin,
                            value=round(float(c.get(field) or 0) * scale, 3),
                        )
                    )
    return out, done


def tcp_events(folder: Path, origin: float) -> tuple[list[ev.Event], dict[str, Any]]:
    """Every node's TCP tracks, and each sampler's cost by node."""
    out, costs = [], {}
    for path in sorted(folder.glob("node*.jsonl")) if folder.is_dir() else []:
        suffix = path.stem[4:]
        if not suffix.isdigit():
            continue
        events, done = node_events(int(suffix), path, origin)
        out += events
        costs[int(suffix)] = done
    return out, costs
