"""`netbench exec` against the model: the examples' wire bytes and times beside what the model predicts.

1. examples/allreduce.py (a plain torch.distributed program, 5 all-reduces of 10 MB) on N nodes:
   each node's wire bytes (interface counters and capture, the whole program: rendezvous and
   start-up included) against 5 x the model's bytes per all-reduce (ring pattern + TCP/IP/Ethernet
   framing and ACKs, :mod:`netbench.model.framing`), and the measured all-reduce time against the
   model's; target: bytes within 3 %.
2. examples/train_replicator.py with dct and full on 2 and 4 nodes: step time and wire bytes per
   step against the model.

Run it alone on the machine (figures are timings): ``sudo python scripts/bench_exec.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BYTES_TARGET = 0.03
ALLREDUCES = 5


def exec_json(out: Path, nodes: int, bw: str, command: list[str]) -> dict:
    netbench = shutil.which("netbench", path=str(Path(sys.executable).parent)) or "netbench"
    done = subprocess.run(
        [netbench, "exec", "--json", "--nodes", str(nodes), "--bw", bw, "--out", str(out), "--", *command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"netbench exec failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def allreduce(out: Path, nodes: int, bw: str) -> bool:
    result = exec_json(out, nodes, bw, [sys.executable, "examples/allreduce.py"])
    summary, predicted = result["summary"], result["summary"]["predicted"]
    expected = ALLREDUCES * predicted["wire_tx_bytes_per_step"]
    print(f"\nexamples/allreduce.py, {nodes} nodes at {bw} ({result['run_dir']})")
    print(
        f"  model: {predicted['wire_tx_bytes_per_step']:.0f} B on the wire per node per all-reduce "
        f"({predicted['payload_bytes_per_step']:.0f} B payload), {predicted['step_time_s']:.3f} s per all-reduce"
    )
    ok = True
    for node in result["nodes"]:
        for source in ("wire", "capture_wire"):
            for way in ("tx", "rx"):
                measured = node[f"{source}_{way}_bytes"] if source == "capture_wire" else node[f"wire_{way}_bytes"]
                ratio = measured / expected
                ok &= abs(ratio - 1) <= BYTES_TARGET
                print(
                    f"  node {node['rank']} {way} ({'capture' if source == 'capture_wire' else 'counters'}): "
                    f"{measured:.0f} B measured, {expected:.0f} B = {ALLREDUCES} x model; ratio {ratio:.4f}"
                )
    step, model_step = summary["step_time_s"], predicted["step_time_s"]
    print(
        f"  all-reduce time (median of the 4 after warm-up, slowest node): {step:.3f} s, model {model_step:.3f} s, "
        f"ratio {step / model_step:.3f}"
    )
    cpu = ", ".join(f"{n['cpu_time_s']:.2f} s" for n in result["nodes"])
    print(
        f"  whole program: {result['wall_time_s']:.2f} s wall; {ALLREDUCES} x model all-reduce = "
        f"{ALLREDUCES * model_step:.2f} s, "
        f"the rest is interpreter start-up, import torch and the rendezvous "
        f"(node CPU: {cpu})"
    )
    print(f"  bytes within {BYTES_TARGET:.0%}: {'yes' if ok else 'NO'}")
    return ok


def train(out: Path, replicator: str, nodes: int, bw: str) -> None:
    result = exec_json(out, nodes, bw, [sys.executable, "examples/train_replicator.py", replicator, "12"])
    s, p = result["summary"], result["summary"].get("predicted", {})

    def ratio(key: str) -> str:
        return f"{s[key] / p[key]:.3f}" if p.get(key) else "-"

    print(
        f"  {replicator:5s} {nodes} nodes: {s['steps_measured']} steps; step {s['step_time_s'] * 1e3:.1f} ms (model "
        f"{p.get('step_time_s', float('nan')) * 1e3:.1f} ms, x{ratio('step_time_s')}); wire tx/step "
        f"{s['wire_tx_bytes_per_step']:.0f} B "
        f"(model {p.get('wire_tx_bytes_per_step', float('nan')):.0f} B, x{ratio('wire_tx_bytes_per_step')}); "
        f"payload {s['payload_bytes_per_step']:.0f} B (model {p.get('payload_bytes_per_step', float('nan')):.0f} B)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", default="100mbit")
    parser.add_argument("--nodes", default="2,4", help="node counts, comma list")
    parser.add_argument("--skip-train", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        ok = all([allreduce(Path(tmp), n, args.bw) for n in counts])
        if not args.skip_train:
            print(f"\nexamples/train_replicator.py (12 steps, 1 warm-up) at {args.bw}")
            for n in counts:
                for name in ("dct", "full"):
                    train(Path(tmp), name, n, args.bw)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
