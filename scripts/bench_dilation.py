"""Many nodes on few cores, with and without time dilation: measured vs predicted step and the fidelity verdict.

    python3 scripts/bench_dilation.py [--nodes 16,32] [--dilation 1,auto] [--steps 10]

Each point is one `netbench run --bw 1gbit -r dct` of small llama shapes with 50 ms of compute;
it prints the measured and predicted step, their ratio (target: within 25 %), and whether the
run judged its own emulation faithful (and why not). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

SHAPES = "llama:d_model=128,layers=2,ffn=256,vocab=256"


def run(nodes: int, dilation: str, steps: int, out: str) -> dict:
    argv = [
        "netbench",
        "run",
        "--nodes",
        str(nodes),
        "--bw",
        "1gbit",
        "-r",
        "dct",
        "-w",
        "shapes",
        "--shapes",
        SHAPES,
        "--compute-ms",
        "50",
        "--steps",
        str(steps),
        "--warmup",
        "2",
        "--dilation",
        dilation,
        "--json",
        "--out",
        out,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="16,32")
    parser.add_argument("--dilation", default="1,auto")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print(f"{'nodes':>5} {'dilation':>8} {'measured':>9} {'model':>7} {'ratio':>6}  fidelity")
    with tempfile.TemporaryDirectory() as out:
        for nodes in (int(n) for n in args.nodes.split(",")):
            for dilation in args.dilation.split(","):
                s = run(nodes, dilation, args.steps, out)
                if "error" in s:
                    print(f"{nodes:>5} {dilation:>8}  failed: {s['error']}")
                    continue
                meas, pred = s["step_time_s"], (s.get("predicted") or {}).get("step_time_s")
                fid = s.get("fidelity", {})
                k = fid.get("dilation", 1.0)
                verdict = "ok" if fid.get("ok") else "NOT faithful: " + "; ".join(fid.get("reasons", []))
                ratio = f"{meas / pred:.2f}" if pred else "-"
                print(f"{nodes:>5} {k:>8.3g} {meas:>9.3f} {pred or float('nan'):>7.3f} {ratio:>6}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
