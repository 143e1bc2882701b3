#!/usr/bin/env python3
"""NCCL's tuner model against public nccl-tests logs of one cluster at several node counts.

Two clusters of 8 x H100 with 8 x 400G InfiniBand NICs a node (tests/fixtures/nccl_tests/, from
github.com/NVIDIA/nccl-tests/issues/309): A at 2, 4 and 8 nodes, B at 2 and 4. For each cluster:

* fit: :func:`netbench.model.nccl_fit.fit_tuned` on the smallest node count, then per larger node count and size
  >= 64 MiB the predicted and measured bus bandwidth and time, and the error (target: within 15 %); the fit's own
  error on its log (in sample);
* without a log: NCCL's model from the NIC count and rate alone (:func:`netbench.model.nccl.nccl_time`), every
  node count, sizes >= 256 MiB (target: within 15 %).

    python3 scripts/bench_nccl_fit.py
    python3 scripts/bench_nccl_fit.py --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from netbench.model.nccl import bus_factor, nccl_time
from netbench.model.nccl_fit import ClusterHardware, fit_tuned
from netbench.model.nccl_tests import NcclTestsLog, read_log

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nccl_tests"
CLUSTERS = {
    "A (8 x H100, 8 x 400G IB)": [
        "nccl-tests-issue309-2x8-h100-ib400-all_reduce.txt",
        "nccl-tests-issue309-4x8-h100-ib400-all_reduce.txt",
        "nccl-tests-issue309-8x8-h100-ib400-all_reduce.txt",
    ],
    "B (XE9680, 8 x H100, 8 x 400G IB)": [
        "nccl-tests-issue309-2x8-h100-xe9680-all_reduce_mpi.txt",
        "nccl-tests-issue309-4x8-h100-vm-all_reduce_mpi.txt",
    ],
}
HARDWARE = ClusterHardware(accelerator="h100-sxm", nics=8, nic_bps=400e9, transport="rdma")
FIT_FROM = 64 << 20
NO_LOG_FROM = 256 << 20


def rows(log: NcclTestsLog, predict, smallest: int) -> list[dict]:
    """Per size of at least ``smallest``: measured and predicted time and bus bandwidth, and the error."""
    out = []
    factor = bus_factor(log.collective, log.ranks)  # type: ignore[arg-type]
    for r in log.rows:
        if r.size < smallest:
            continue
        measured = (r.oop_s + r.ip_s) / 2
        predicted = predict(r.size)
        out.append(
            {
                "nodes": log.nodes,
                "size": r.size,
                "measured_s": measured,
                "predicted_s": predicted,
                "measured_busbw_GBps": r.size * factor / measured / 1e9,
                "predicted_busbw_GBps": r.size * factor / predicted / 1e9,
                "error": predicted / measured - 1,
            }
        )
    return out


def bench() -> dict:
    doc: dict = {"hardware": HARDWARE.model_dump(), "clusters": {}}
    for name, files in CLUSTERS.items():
        logs = [read_log(FIXTURES / f, "all_reduce") for f in files]
        fit = fit_tuned(logs[0], HARDWARE)
        in_sample = [abs(e) for s, e in fit.residuals if s >= FIT_FROM]
        carried = [row for log in logs[1:] for row in rows(log, lambda n, f=fit, k=log.nodes: f.time_s(n, k), FIT_FROM)]
        no_log = []
        for log in logs:
            c = HARDWARE.cluster(log.ranks, log.nodes)  # type: ignore[arg-type]
            no_log += rows(log, lambda n, c=c: nccl_time("all_reduce", n, c).time_s, NO_LOG_FROM)
        doc["clusters"][name] = {
            "fitted_on": logs[0].source,
            "efficiencies": fit.efficiencies,
            "latency_scales": fit.latency_scales,
            "unfitted": fit.unfitted(),
            "in_sample_max_error": max(in_sample),
            "carried": carried,
            "carried_max_error": max(abs(r["error"]) for r in carried),
            "no_log": no_log,
            "no_log_max_error": max(abs(r["error"]) for r in no_log),
        }
    return doc


def show(doc: dict) -> None:
    print(f"hardware: {HARDWARE.describe()}")
    for name, c in doc["clusters"].items():
        print(f"\ncluster {name}: fitted on {Path(c['fitted_on']).name}")
        eff = ", ".join(f"{k} {v:.3f}" for k, v in c["efficiencies"].items())
        lat = ", ".join(f"{k} x{v:.2f}" for k, v in c["latency_scales"].items())
        print(f"  efficiencies {eff}; latency {lat}; left at NCCL's model: {', '.join(c['unfitted'])}")
        print(f"  in sample (>= {FIT_FROM >> 20} MiB): max |error| {c['in_sample_max_error']:.1%}")
        for title, key in (("fit carried", "carried"), ("without a log", "no_log")):
            print(f"  {title}: nodes  size MiB  busbw meas  pred (GB/s)   time meas  pred (ms)  error")
            for r in c[key]:
                busbw = f"{r['measured_busbw_GBps']:11.1f} {r['predicted_busbw_GBps']:6.1f}"
                ms = f"{r['measured_s'] * 1e3:10.3f} {r['predicted_s'] * 1e3:6.3f}"
                print(
                    f"  {'':{len(title)}}  {r['nodes']:5d} {r['size'] >> 20:9d} {busbw}      {ms}  {r['error']:+6.1%}"
                )
            print(f"  {title}: max |error| {c[key + '_max_error']:.1%} (target 15 %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    doc = bench()
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        show(doc)


if __name__ == "__main__":
    main()
