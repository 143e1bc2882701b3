"""Gossip's syncs one by one, from a run directory: who waited for whom, how long each exchange took, what TCP saw.

A gossip sync is priced as if every pair entered its exchange together, at that sync's own pairs (the pairing the
replicator draws from the seed and the step), and the step at the mean over the run's syncs. This prints, for each
sync after the warm-up (steps.csv: a rank's exchange ends where its decode begins, and began ``comm_s`` before that),
each rank's partner, how long it waited for that partner to enter, and the exchange's time from the later entry to
the rank's exit, beside the model's call for that sync (the run's replay priced at that sync alone: its
``comm_time_s`` times the period) and, in the header, the mean call over the run's syncs and the replay the run
stored beside the one this code computes. Where the run kept TCP samples (``tcp/nodeN.jsonl``), each direction of
each pair during the sync: bytes sent, when they stopped growing (to the sampling interval), the most smoothed round
trip and the least and most congestion window at that time: whether a direction ran slower than the other, whether
its round trip grew, and whether its window fell to bbr's PROBE_RTT floor of 4 segments (then in how many samples,
and how long after the connection first appeared in them: bbr's 10 s min-RTT window runs on wall time from there).
Then, for each direction of each link between two sites that carried the sync, how well its flows used it: the
bytes they sent over the sync's span (first entry to last exit) against the link's goodput, and the samples split by
how many of its flows had data in flight, each group's median delivery rate (the kernel's, summed over the flows)
against the goodput and against the sum of the flows' windows over their smoothed round trips (a flow limited by its
window delivers its window a round trip), beside the median round trip: whether a direction ran below its rate, and
whether its flows' windows and round trips account for it.

    PYTHONPATH=. python3 scripts/gossip_syncs.py RUN_DIR [RUN_DIR ...]
    PYTHONPATH=. python3 scripts/gossip_syncs.py SWEEP_DIR/runs/*gossip*

Times are emulated seconds (a dilated run's wall time over its dilation: steps.csv's durations are divided already,
its wall clock is divided here). Nothing is run or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from netbench.calibrate.hostcache import load_calibration
from netbench.declarations.gossip_spec import partner
from netbench.model.calibration import Calibration
from netbench.model.framing import Framing
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import (
    kernel_clock,
    mean_codec_s,
    measured_codec_s,
    measured_step_numbers,
    predict,
    replay_run,
    run_local_time_s,
    workload_shapes,
)
from netbench.rundir.layout import read_records
from netbench.rundir.reading import read_csv
from netbench.rundir.runjson import recorded_dilation
from netbench.trace.sampling import tcp_folder

CPUS = 2  # the project's hosts: the replay prices the codec on 2 shared cores
PROBE_RTT_CWND = 4  # bbr_cwnd_min_target: the window bbr's PROBE_RTT holds


def model_call_s(
    config: RunConfig, steps: pd.DataFrame, calibration: Calibration, dilation: float, sync: int | None = None
) -> float | None:
    """The replay's time of one exchange: its communication per step times the period (None where it has none), at
    the pairs of the sync that ends 1-based step ``sync``, or averaged over the run's syncs (bbr's PROBE_RTT priced
    as its expectation over the run's steps, :func:`~netbench.orchestrator.prediction.kernel_clock`)."""
    shapes = workload_shapes(config.workload, config.cluster.nodes)
    local, codec = run_local_time_s(steps, config, shapes), measured_codec_s(steps)
    if local is None or codec is None:
        return None
    priced = (sync,) if sync is not None else measured_step_numbers(steps)
    clock = kernel_clock(steps, dilation)
    est = predict(config, shapes, local, calibration, CPUS, codec, mean_codec_s(steps), priced, clock=clock)
    return est.comm_time_s * config.replicator.sync_every


def exchanges(steps: pd.DataFrame, nodes: int, seed: int, dilation: float) -> pd.DataFrame:
    """One row per rank and measured sync: partner, wait for the partner's entry, exchange from the later entry."""
    measured = steps[(steps["warmup"] == 0) & (steps["payload_bytes"] > 0)]
    rows = []
    for step, group in measured.groupby("step"):
        g = group.set_index("rank")
        leave = g["t_end"] / dilation - g["decode_s"]  # emulated seconds: steps.csv's durations are divided already
        enter = leave - g["comm_s"]
        for rank in g.index:
            other = partner(int(rank), nodes, int(step) + 1, seed)  # steps.csv counts from 0, the pairing from 1
            if other == rank or other not in g.index:
                continue
            later = max(enter[rank], enter[other])
            rows.append(
                {
                    "step": int(step),
                    "rank": int(rank),
                    "partner": other,
                    "enter": enter[rank],
                    "leave": leave[rank],
                    "wait_ms": 1e3 * (later - enter[rank]),
                    "exchange_ms": 1e3 * (leave[rank] - later),
                }
            )
    return pd.DataFrame(rows)


def directions(run_dir: Path, addresses: dict[str, int], lo: float, hi: float, dilation: float) -> list[str]:
    """Each connection's TCP samples between wall times ``lo`` and ``hi``, one line per direction that sent."""
    lines = []
    for path in sorted(tcp_folder(run_dir).glob("node*.jsonl")):
        node = int(path.stem[4:])
        seen: dict[str, list[tuple[float, dict]]] = {}
        opened: dict[str, float] = {}  # the wall time each connection first appears in the samples
        for record in read_records(path):
            if record.get("event") != "tcp":
                continue
            for conn in record["conns"]:
                opened.setdefault(conn["conn"], record["t"])
            if lo - 1.0 <= record["t"] <= hi:
                for conn in record["conns"]:
                    seen.setdefault(conn["conn"], []).append((record["t"], conn))
        for name, samples in seen.items():
            inside = [(t, c) for t, c in samples if t >= lo]
            before = [c for t, c in samples if t < lo]
            if not inside:
                continue
            start = before[-1]["bytes_sent"] if before else inside[0][1]["bytes_sent"]
            sent = inside[-1][1]["bytes_sent"] - start
            if sent < 64 * 1024:  # a notification or ACKs only
                continue
            last = next(t for t, c in inside if c["bytes_sent"] == inside[-1][1]["bytes_sent"])
            srtt = max(c["srtt_us"] for _, c in inside) / 1e3 / dilation
            cwnd = max(c["cwnd"] for _, c in inside)
            least = min(c["cwnd"] for _, c in inside)  # 4 segments: bbr's PROBE_RTT (1: a retransmission timeout)
            peer = addresses.get(name.split("->")[1].rsplit(":", 1)[0], "?")
            probing = [t for t, c in inside if c["cwnd"] == PROBE_RTT_CWND]
            probe = (
                f", at 4 segments in {len(probing)} samples from {probing[0] - opened[name]:5.1f} s of wall time "
                "after it opened"
                if probing
                else ""
            )
            lines.append(
                f"    n{node}->n{peer}: {sent / 1e3:7.0f} kB, done by +{1e3 * (last - lo) / dilation:5.0f} ms, "
                f"srtt up to {srtt:6.1f} ms, cwnd {least:3d} to {cwnd:4d}{probe}"
            )
    return lines


def site_links(data: dict) -> tuple[dict[int, str], dict[tuple[str, str], float]]:
    """Each node's site (its switch) and each direction of a link between two sites: its rate in bit/s."""
    topology = data["config"]["cluster"].get("topology") or {}
    names = {n["name"]: i for i, n in enumerate(topology.get("nodes", []))}
    site = {names[n["name"]]: n["switch"] for n in topology.get("nodes", [])}
    switches = set(topology.get("switches", []))
    rates = {}
    for link in topology.get("links", []):
        if link["a"] in switches and link["b"] in switches:
            rates[(link["a"], link["b"])] = float(link["forward"]["rate_bps"])
            rates[(link["b"], link["a"])] = float(link["reverse"]["rate_bps"])
    return site, rates


def crossings(run_dir: Path, data: dict, lo: float, hi: float, dilation: float) -> list[str]:
    """Each direction of each link between two sites during the sync between wall times ``lo`` and ``hi``: bytes
    over the span against the goodput, and delivery against windows over round trips by flows in flight."""
    site, rates = site_links(data)
    if not rates:
        return []
    framing = Framing()
    mss = framing.mss
    addresses = {n["address"]: n["index"] for n in data["cluster"]["nodes"]}
    sent: dict[tuple[str, str], float] = {}
    loaded: dict[tuple[str, str], dict[float, list[dict]]] = {}
    for path in sorted(tcp_folder(run_dir).glob("node*.jsonl")):
        node = int(path.stem[4:])
        last: dict[str, int] = {}
        for record in read_records(path):
            if record.get("event") != "tcp" or not lo - 1.0 <= record["t"] <= hi:
                continue
            for conn in record["conns"]:
                peer = addresses.get(conn["conn"].split("->")[1].rsplit(":", 1)[0])
                key = (site.get(node), site.get(peer))
                if peer is None or key not in rates:
                    continue
                if record["t"] > lo and conn["conn"] in last:  # the bytes since the sample before
                    sent[key] = sent.get(key, 0.0) + conn["bytes_sent"] - last[conn["conn"]]
                last[conn["conn"]] = conn["bytes_sent"]
                if record["t"] >= lo and conn["in_flight_bytes"] > PROBE_RTT_CWND * mss:
                    loaded.setdefault(key, {}).setdefault(record["t"], []).append(conn)
    span = (hi - lo) / dilation
    lines = []
    for key in sorted(sent):
        goodput = rates[key] / 8 * framing.efficiency()  # bytes/s of payload
        if sent[key] < 64 * 1024:
            continue
        groups: dict[int, list[tuple[float, float, float]]] = {}
        for conns in loaded.get(key, {}).values():
            delivered = sum(c["delivery_rate_bps"] for c in conns) * dilation / 8
            windows = sum(c["cwnd"] * mss / max(c["srtt_us"], 1) * 1e6 for c in conns) * dilation
            rtt = max(c["srtt_us"] for c in conns) / 1e3 / dilation
            groups.setdefault(len(conns), []).append((delivered, windows, rtt))
        parts = []
        for n, rows in sorted(groups.items()):
            frame = pd.DataFrame(rows, columns=["delivered", "windows", "rtt"])
            parts.append(
                f"{n} in flight {len(rows):2d} samples: {frame['delivered'].median() / goodput:4.2f} of it, "
                f"windows/rtt {min(frame['windows'].median(), goodput) / max(frame['delivered'].median(), 1):4.2f} of "
                f"that, rtt {frame['rtt'].median():4.0f} ms"
            )
        lines.append(
            f"    {key[0]}->{key[1]}: {sent[key] / 1e3:7.0f} kB in {span:4.2f} s, {sent[key] / span / goodput:4.2f} of "
            f"the goodput; " + "; ".join(parts)
        )
    return lines


def calibration_for(run_dir: Path, explicit: Path | None) -> Calibration:
    """``explicit``, else the sweep's own calibration.json (a sweep keeps its runs in ``SWEEP/runs``), else this
    host's."""
    beside = run_dir.parent.parent / "calibration.json"
    return load_calibration(explicit if explicit is not None else beside if beside.is_file() else None)


def show(run_dir: Path, calibration: Calibration) -> None:
    data = json.loads((run_dir / "run.json").read_text())
    config = RunConfig.model_validate(data["config"])
    recorded = recorded_dilation(data)
    dilation = recorded or 1.0
    nodes = {n["address"]: n["index"] for n in data["cluster"]["nodes"]}
    steps = read_csv(run_dir / "steps.csv")
    summary = data.get("summary", {})
    call = model_call_s(config, steps, calibration, dilation)
    replay = replay_run(config, steps, calibration, CPUS, kernel_clock(steps, recorded)) or 0.0
    print(
        f"== {run_dir.name}: {len(nodes)} nodes, dilation {dilation:g}, step {summary.get('step_time_s', 0):.4f} s, "
        f"replay stored {summary.get('replay_step_time_s') or 0:.4f} s, now {replay:.4f} s, model call "
        f"{'-' if call is None else f'{1e3 * call:.0f} ms'} (mean over its syncs)"
    )
    table = exchanges(steps, len(nodes), config.replicator.seed, dilation)
    for step, group in table.groupby("step"):
        pairs = "  ".join(
            f"r{r.rank}<->r{r.partner} wait {r.wait_ms:4.0f} exch {r.exchange_ms:5.0f}" for r in group.itertuples()
        )
        priced = model_call_s(config, steps, calibration, dilation, int(step) + 1)
        slowest = (group["wait_ms"] + group["exchange_ms"]).max()
        print(
            f"  sync ending step {step}: {pairs}  | longest wait+exch {slowest:5.0f} ms, model "
            f"{'-' if priced is None else f'{1e3 * priced:.0f}'} ms"
        )
        wall = group["enter"].min() * dilation, group["leave"].max() * dilation  # the TCP samples' clock
        for line in directions(run_dir, nodes, *wall, dilation):
            print(line)
        for line in crossings(run_dir, data, *wall, dilation):
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="gossip run directories (run.json and steps.csv)")
    parser.add_argument("--calibration", type=Path, help="calibration.json [default: the sweep's, else this host's]")
    args = parser.parse_args()
    for run_dir in args.runs:
        if not (run_dir / "run.json").is_file() or not (run_dir / "steps.csv").is_file():
            print(f"error: {run_dir} is not a run directory (no run.json and steps.csv)", file=sys.stderr)
            sys.exit(2)
    for run_dir in args.runs:
        show(run_dir, calibration_for(run_dir, args.calibration))


if __name__ == "__main__":
    main()
