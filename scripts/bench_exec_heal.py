#!/usr/bin/env python3
"""A torchft example under `netbench exec --torchft` through churn: what each join cost on the wire, beside the model.

Printed for RUN_DIR (an exec with member rows and a capture):

* per node and schedule window (before the first change, then each segment): the payload bytes it sent and received;
* per join: what the joining node received from its program's start until it first sent a full segment (its heal,
  for a torchft trainer) against :func:`netbench.model.heal.heal_payload_bytes` for the example's model, state and
  checkpoint transport (target: within 5 %: the measurement adds the lighthouse's and store's chatter), and how long
  after its start it first sent;
* per heal the joining node's torchft logged: how long its fetch took (``HTTPTransport``), beside the model's time
  for the same bytes on the run's link (:func:`netbench.model.heal.heal_time_s`, the wire's share).

``--example``: ``diloco`` and ``ddp`` are ``examples/torchft_diloco.py`` and ``examples/torchft_ddp.py``; ``upstream``
is torchft's published ``train_diloco.py`` (pytorch/torchft, run unmodified: docs/how-to/churn.md), whose model is
declared here from the published file's constants (:func:`upstream_diloco_shapes`).

    flock -x /tmp/nb-heavy.lock python3 -m netbench exec --nodes 3 --bw 100mbit --delay 10ms --torchft \\
        --schedule-clock traffic --schedule churn.csv -- python3 examples/torchft_diloco.py 40
    python3 scripts/bench_exec_heal.py RUN_DIR --example diloco
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.model.heal import HealTransport, heal_payload_bytes, heal_time_s  # noqa: E402
from netbench.shapes import ParamShape  # noqa: E402

TARGET = 0.05
FETCH = re.compile(r"fetching checkpoint from \S+ took ([0-9.]+)s")  # torchft's HTTPTransport, on the joining node


def upstream_diloco_shapes() -> list[ParamShape]:
    """torchft's published ``train_diloco.py``: ``MultiMLP(d_hid=128, n_layers=2)``, each layer two 128x128
    ``Linear`` and a ``useless`` ``Embedding`` of 500 MiB of fp32 (``500 * 2**20 // d_hid // 4`` rows), then a
    ``Linear(128, 10)`` classifier: 262,211,338 parameters."""
    d_hid, classes, rows = 128, 10, 500 * (1 << 20) // 128 // 4
    layer = lambda i: [  # noqa: E731 - one layer's parameters, in the module's order
        ParamShape(f"layers.{i}.net1.weight", (d_hid, d_hid)),
        ParamShape(f"layers.{i}.net1.bias", (d_hid,)),
        ParamShape(f"layers.{i}.net2.weight", (d_hid, d_hid)),
        ParamShape(f"layers.{i}.net2.bias", (d_hid,)),
        ParamShape(f"layers.{i}.useless.weight", (rows, d_hid)),
    ]
    head = [ParamShape("classifier.weight", (classes, d_hid)), ParamShape("classifier.bias", (classes,))]
    return layer(0) + layer(1) + head


def example_state(example: str) -> tuple[list[ParamShape], str, HealTransport]:
    """(parameter shapes, the replicator whose kept state the Manager's state holds, the checkpoint transport).
    DiLoCo: weights, AdamW's moments and step, the global weights and the outer momentum (the published example
    registers the outer optimizer twice, its own state and DiLoCo's: the same tensors, which ``torch.save`` writes
    once); DDP: weights, AdamW's moments and step."""
    if example == "upstream":
        return upstream_diloco_shapes(), "diloco", "http"
    if example == "diloco":
        from torchft_diloco import MultiMLP as Model
    else:
        from torchft_ddp import Net as Model
    shapes = [ParamShape(name, tuple(p.shape)) for name, p in Model().named_parameters()]
    return (shapes, "diloco", "http") if example == "diloco" else (shapes, "full", "pg")


def fetch_times(run_dir: Path, rank: int) -> list[float]:
    """Seconds each checkpoint fetch took, as the node's torchft logged them (HTTPTransport only)."""
    log = run_dir / "workers" / f"rank{rank}.log"
    return [float(m) for m in FETCH.findall(log.read_text(errors="replace"))] if log.exists() else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--example", choices=("diloco", "ddp", "upstream"), default="diloco")
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
    shapes, replicator, transport = example_state(args.example)
    config = ReplicatorConfig(name=replicator)
    model = heal_payload_bytes(config, shapes, transport)
    spec = run["cluster"]["spec"]
    rate = min(spec["up"]["rate_bps"], spec["down"]["rate_bps"])
    model_s = heal_time_s(config, shapes, rate, spec["up"]["delay_s"], transport=transport)
    params = sum(s.numel for s in shapes)
    print(
        f"model heal ({args.example}: {params:,} parameters in {len(shapes)} tensors, {replicator}'s state, "
        f"{transport} transport): {model:,} B, {model_s:.2f} s on the wire at {rate / 1e9:g} Gbit/s"
    )
    worst = 0.0
    for node in nodes:
        for join in node.get("joins") or []:
            ratio = join["rx_payload_bytes"] / model
            worst = max(worst, abs(ratio - 1))
            print(
                f"node {node['rank']} join: received {join['rx_payload_bytes']:,} B before it first sent "
                f"({join['first_send_s']} s after its start): {ratio:.4f} x the model"
            )
        for took in fetch_times(args.run_dir, node["rank"]):
            print(f"node {node['rank']} heal: its fetch took {took:.2f} s, {took / model_s:.2f} x the wire's time")
    ok = run["status"] == "ok" and worst <= TARGET
    print(f"{'PASS' if ok else 'FAIL'}: status {run['status']}, worst heal error {worst:.1%} (target {TARGET:.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
