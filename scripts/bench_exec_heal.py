#!/usr/bin/env python3
"""A torchft example under `netbench exec --torchft` through churn: what each join cost on the wire, beside the model.

Printed for RUN_DIR (an exec with member rows and a capture):

* per node and schedule window (before the first change, then each segment): the payload bytes it sent and received;
* per join: what the joining node received from its program's start until it first sent a full segment (its heal,
  for a torchft trainer) against :func:`netbench.model.heal.heal_bytes` for the example's model and state (target:
  within 5 %: the measurement adds the transport's framing and the lighthouse's and store's chatter), and how long
  after its start it first sent.

    flock -x /tmp/nb-heavy.lock python3 -m netbench exec --nodes 3 --bw 100mbit --delay 10ms --torchft \\
        --schedule-clock traffic --schedule churn.csv -- python3 examples/torchft_diloco.py 40
    python3 scripts/bench_exec_heal.py RUN_DIR --example diloco
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.model.heal import heal_bytes  # noqa: E402
from netbench.shapes import ParamShape  # noqa: E402

TARGET = 0.05


def model_heal(example: str) -> tuple[int, int]:
    """(the model's heal bytes, parameters) for the example's model and what its Manager's state holds."""
    if example == "diloco":  # weights, AdamW's moments and step, DiLoCo's global weights and outer momentum
        from torchft_diloco import MultiMLP as Model
    else:  # weights, AdamW's moments and step
        from torchft_ddp import Net as Model
    model = Model()
    shapes = [ParamShape(name, tuple(p.shape)) for name, p in model.named_parameters()]
    return heal_bytes(ReplicatorConfig(name="diloco" if example == "diloco" else "full"), shapes), sum(
        p.numel() for p in model.parameters()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--example", choices=("diloco", "ddp"), default="diloco")
    args = parser.parse_args()
    run = json.loads((args.run_dir / "run.json").read_text())
    nodes = run["exec"]["nodes"]
    applied = run["cluster"].get("schedule", {}).get("applied", [])
    print(f"{run['run_id']}: {run['status']}, {' '.join(run['exec']['command'])}")
    clock = run["cluster"].get("schedule", {}).get("clock") or {}
    launched, time0 = run["exec"].get("launched_wall"), clock.get("time0_wall")
    since = f"{time0 - launched:.1f} s after launch" if launched and time0 else "unknown"
    print(f"schedule time 0 ({clock.get('from', 'step')}): {since}")
    print("changes: " + ", ".join(f"{row['what']} at {row['time_s']:g} s" for row in applied))
    print("payload bytes per node and window, times from the programs' launch")
    print(f"{'node':>4} {'window':>8} {'from s':>8} {'to s':>8} {'tx bytes':>12} {'rx bytes':>12}")
    for node in nodes:
        for s in node.get("segments") or []:
            window = "before" if s["segment"] is None else str(s["segment"])
            print(
                f"{node['rank']:>4} {window:>8} {s['from_s']:>8.1f} {s['to_s']:>8.1f} "
                f"{s['tx_payload_bytes']:>12,} {s['rx_payload_bytes']:>12,}"
            )
    model, params = model_heal(args.example)
    print(f"model heal ({args.example}, {params:,} parameters): {model:,} B")
    worst = 0.0
    for node in nodes:
        for join in node.get("joins") or []:
            ratio = join["rx_payload_bytes"] / model
            worst = max(worst, abs(ratio - 1))
            print(
                f"node {node['rank']} join: received {join['rx_payload_bytes']:,} B before it first sent "
                f"({join['first_send_s']} s after its start): {ratio:.3f} x the model"
            )
    ok = run["status"] == "ok" and worst <= TARGET
    print(f"{'PASS' if ok else 'FAIL'}: status {run['status']}, worst heal error {worst:.1%} (target {TARGET:.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
