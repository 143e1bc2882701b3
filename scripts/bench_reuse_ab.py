#!/usr/bin/env python3
"""Does a shared cluster change what a point measures? The same points run alone and through one, interleaved.

Each round runs every chosen point of a scenario twice: once on a cluster and worker processes of its
own (as ``--no-reuse`` does) and once through one :class:`ClusterReuse` held for the whole bench
(as a sweep does), alternating which goes first so that host load drifting over time falls on
both arms alike. Prints each point's median step time (slowest rank, after warm-up) per arm, the
ratio reused / alone of the arms' medians, whether the payload bytes agree exactly, and the ratio
of wire bytes sent per step.

    python3 scripts/bench_reuse_ab.py                                    # 3 CI points, 3 rounds
    python3 scripts/bench_reuse_ab.py --points "full 4n 10mbit 0ms;dct 4n 100mbit 20ms" --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from netbench.calibrate.hostcache import host_calibration  # noqa: E402
from netbench.orchestrator.cluster_reuse import ClusterReuse  # noqa: E402
from netbench.orchestrator.run.runner import run  # noqa: E402
from netbench.orchestrator.sweep.scenario import points, read_toml, scenario_from_dict  # noqa: E402

DEFAULT_POINTS = "dct 2n 100mbit 0ms;full 2n 1gbit 0ms;dct 2n 1gbit 0ms"


def measured(run_dir: Path) -> tuple[float, tuple[int, ...], float]:
    """Median step (slowest rank per step), the payload bytes per step seen, and mean wire bytes sent per rank and
    step.
    """
    steps = pd.read_csv(run_dir / "steps.csv")
    steps = steps[~steps["warmup"]]
    return (
        float(steps.groupby("step")["step_s"].max().median()),
        tuple(sorted(steps["payload_bytes"].unique())),
        float(steps["tx_bytes"].mean()),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "ci.toml")
    parser.add_argument("--points", default=DEFAULT_POINTS, help="point labels, ';'-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    wanted = [label.strip() for label in args.points.split(";") if label.strip()]
    with tempfile.TemporaryDirectory(prefix="netbench-reuse-ab-") as tmp:
        scenario = scenario_from_dict(read_toml(args.scenario), str(args.scenario), {})
        chosen = [p for p in points(scenario, Path(tmp) / "runs") if p.label in wanted]
        if len(chosen) != len(wanted):
            parser.error(f"--points: not all of {wanted} are points of {args.scenario}")
        calibration = host_calibration(replicators=[p.config.replicator for p in chosen])
        results: dict[tuple[str, str], list[tuple[float, tuple[int, ...], float]]] = {}
        with ClusterReuse() as held:
            for round_ in range(args.rounds):
                for point in chosen:
                    for arm in ("reused", "alone") if round_ % 2 == 0 else ("alone", "reused"):
                        result = run(
                            point.config,
                            calibration=calibration,
                            dilation=None,
                            reuse=held if arm == "reused" else None,
                        )
                        if result.status != "ok":
                            print(f"{point.label} {arm}: {result.reason}", file=sys.stderr)
                            return 1
                        results.setdefault((point.label, arm), []).append(measured(result.run_dir))
    for point in chosen:
        alone, reused = results[(point.label, "alone")], results[(point.label, "reused")]
        step_a, step_r = statistics.median(r[0] for r in alone), statistics.median(r[0] for r in reused)
        same_payload = {r[1] for r in alone} == {r[1] for r in reused}
        wire = statistics.median(r[2] for r in reused) / statistics.median(r[2] for r in alone)
        print(
            f"{point.label:24s} step alone {step_a:.4f} s  reused {step_r:.4f} s  ratio {step_r / step_a:.3f}  "
            f"payload bytes {'identical' if same_payload else 'DIFFER'}  wire bytes ratio {wire:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
