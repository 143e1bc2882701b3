#!/usr/bin/env python3
"""Does packet capture change the step time it measures? Runs with and without it, interleaved.

For each case, ``--pairs`` pairs of identical runs are made, one with header capture on every
switch port (tcpdump, snaplen 96) and one without, alternating which goes first so that host load
drifting over time falls on both arms alike. Prints each run's median step time (slowest node,
after warm-up, as `netbench run` reports it), each arm's median over its runs, and the ratio
captured / uncaptured. The target is a ratio within 1.05.

    python3 scripts/bench_capture_overhead.py                  # 3 pairs of each default case
    python3 scripts/bench_capture_overhead.py --pairs 5 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.emulation.spec import ClusterSpec  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.orchestrator.run.runner import run  # noqa: E402
from netbench.units import parse_rate  # noqa: E402
from netbench.workloads.config import WorkloadConfig  # noqa: E402


@dataclass(frozen=True)
class Case:
    """One configuration measured with and without capture."""

    label: str
    replicator: str
    nodes: int
    bw: str
    workload: WorkloadConfig


CASES = (
    # the main job's defaults: the transformer LM, dct, 2 nodes at 100mbit
    Case("default run (dct, 2 nodes, 100mbit)", "dct", 2, "100mbit", WorkloadConfig()),
    # the most packets per second netbench captures with offloads off: a dense all-reduce at 1gbit
    Case(
        "dense at 1gbit (full, 2 nodes, shapes)",
        "full",
        2,
        "1gbit",
        WorkloadConfig(kind="shapes", shapes="llama:d_model=256,layers=2,ffn=512,vocab=512", compute_ms=50),
    ),
    # four tcpdumps and four workers on the host's cores: where capture competes hardest
    Case(
        "dense at 1gbit (full, 4 nodes, shapes)",
        "full",
        4,
        "1gbit",
        WorkloadConfig(kind="shapes", shapes="llama:d_model=256,layers=2,ffn=512,vocab=512", compute_ms=50),
    ),
)


def _config(case: Case, capture: bool, steps: int, out: Path) -> RunConfig:
    rate = parse_rate(case.bw)
    cluster = ClusterSpec(nodes=case.nodes, up={"rate_bps": rate}, down={"rate_bps": rate})
    return RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name=case.replicator),
        workload=case.workload,
        steps=steps,
        warmup_steps=2,
        capture=capture,
        out_dir=out,
    )


def measure(case: Case, pairs: int, steps: int, out: Path) -> dict:
    """Interleaved pairs; each arm's per-run step times, medians and the ratio."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(pairs):
        for capture in (True, False) if i % 2 == 0 else (False, True):
            result = run(_config(case, capture, steps, out))
            if result.status != "ok":
                raise SystemExit(f"{case.label}: run failed: {result.reason}")
            times[capture].append(result.summary["step_time_s"])
            print(
                f"  {case.label}: capture={'on ' if capture else 'off'} step {result.summary['step_time_s']:.4f} s",
                file=sys.stderr,
            )
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return {
        "case": case.label,
        "pairs": pairs,
        "steps": steps,
        "capture_on_s": times[True],
        "capture_off_s": times[False],
        "median_on_s": on,
        "median_off_s": off,
        "ratio": on / off,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs per case (default 3)")
    parser.add_argument("--steps", type=int, default=20, help="measured steps per run (default 20)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="netbench-capture-bench-") as tmp:
        rows = [measure(case, args.pairs, args.steps, Path(tmp)) for case in CASES]
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'case':42} {'capture on':>11} {'capture off':>12} {'ratio':>7}")
    for row in rows:
        print(f"{row['case']:42} {row['median_on_s']:>10.4f}s {row['median_off_s']:>11.4f}s {row['ratio']:>7.3f}")


if __name__ == "__main__":
    main()
