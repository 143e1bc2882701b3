#!/usr/bin/env python3
"""Does tracing change what a run measures? Step time and wire bytes of traced and untraced runs, interleaved.

Each pair is one run with trace.json (worker spans, a TCP sampler per node, the trace built after
the run) and one with ``trace=False``, alternating which goes first so that host load drifting
over time falls on both arms alike. Prints each run's median step time (slowest node, after
warm-up, as `netbench run` reports it) and wire bytes sent per node per step (capture), each
arm's median over its runs, the ratios traced / untraced (of the medians, and the median of the
pairs' ratios, which host load drifting over the runs affects less), and what the TCP samplers cost.

    python3 scripts/bench_trace.py                 # 5 runs of each arm, 10 measured steps each
    python3 scripts/bench_trace.py --pairs 3 --steps 6 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.emulation.spec import ClusterSpec, DirectionSpec  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.orchestrator.run.runner import run  # noqa: E402
from netbench.workloads.config import WorkloadConfig  # noqa: E402


def config(out: Path, traced: bool, steps: int) -> RunConfig:
    """The issue's run: 2 nodes, 100mbit, 20 ms, dct on two GPT-2-small blocks, no compute."""
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6, delay_s=0.02), down=DirectionSpec(rate_bps=100e6))
    return RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="dct"),
        steps=steps,
        warmup_steps=2,
        out_dir=out,
        workload=WorkloadConfig(kind="shapes", shapes="gpt2-small:blocks=2", compute_ms=0),
        trace=traced,
    )


def one(out: Path, traced: bool, steps: int) -> dict:
    result = run(config(out, traced, steps), dilation=None)
    if result.status != "ok":
        raise SystemExit(f"run failed: {result.reason}")
    s = result.summary
    row = {
        "traced": traced,
        "step_time_s": s["step_time_s"],
        "wire_bytes": s.get("capture_wire_bytes_per_step") or s["wire_tx_bytes_per_step"],
        "run_dir": str(result.run_dir),
    }
    trace = result.run_dir / "trace.json"
    if traced and trace.is_file():
        row["tcp_sampler_cpu_fraction"] = json.loads(trace.read_text())["otherData"]["tcp_sampler"][
            "cpu_fraction_of_a_core"
        ]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="netbench-bench-trace-") as tmp:
        for i in range(args.pairs):
            for traced in (True, False) if i % 2 == 0 else (False, True):
                rows.append(one(Path(tmp), traced, args.steps))
                r = rows[-1]
                print(
                    f"{'traced  ' if traced else 'untraced'} step {r['step_time_s'] * 1e3:7.1f} ms  wire "
                    f"{r['wire_bytes']:>10.0f} B/step"
                    + (
                        f"  sampler {r['tcp_sampler_cpu_fraction'] * 100:.2f} % of a core per node"
                        if r.get("tcp_sampler_cpu_fraction")
                        else ""
                    ),
                    file=sys.stderr,
                )
    arms = {t: [r for r in rows if r["traced"] is t] for t in (True, False)}
    med = {t: {k: statistics.median(r[k] for r in arms[t]) for k in ("step_time_s", "wire_bytes")} for t in arms}
    out = {
        "pairs": args.pairs,
        "steps": args.steps,
        "traced": med[True],
        "untraced": med[False],
        "step_time_ratio": med[True]["step_time_s"] / med[False]["step_time_s"],
        "wire_bytes_ratio": med[True]["wire_bytes"] / med[False]["wire_bytes"],
        # each pair's traced / untraced: host load drifting over the runs falls on both runs of a pair alike
        "paired_step_time_ratio_median": statistics.median(
            t["step_time_s"] / u["step_time_s"] for t, u in zip(arms[True], arms[False])
        ),
        "step_time_spread_untraced_s": [
            min(r["step_time_s"] for r in arms[False]),
            max(r["step_time_s"] for r in arms[False]),
        ],
        "tcp_sampler_cpu_fraction": statistics.median(r.get("tcp_sampler_cpu_fraction") or 0 for r in arms[True]),
        "runs": rows,
    }
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(
            f"median step time: traced {med[True]['step_time_s'] * 1e3:.1f} ms, untraced "
            f"{med[False]['step_time_s'] * 1e3:.1f} ms "
            f"(ratio {out['step_time_ratio']:.3f}, median of the pairs' ratios "
            f"{out['paired_step_time_ratio_median']:.3f}); wire bytes ratio {out['wire_bytes_ratio']:.4f}; "
            f"TCP sampler {out['tcp_sampler_cpu_fraction'] * 100:.2f} % of a core per node"
        )


if __name__ == "__main__":
    main()
