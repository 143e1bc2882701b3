#!/usr/bin/env python3
"""Soak: many small runs back to back in ONE orchestrator process; report everything that leaked.

Each run is tiny (2 nodes, a small shapes workload, a few steps, capture on; every other run with
1 ms of delay, so the delay line and its iptables rules come and go too) and goes through the
Python API, :func:`netbench.orchestrator.run.runner.run`, so this process's open descriptors and
memory are the orchestrator's. Afterwards it prints, for the measured runs:

* leaked namespaces, registry entries and processes of the soak's own runs (never another's);
* host-namespace links and iptables rules, counted before and after;
* this process's children still alive, its open descriptors and its RSS: growth from the end of
  the warm-up runs (imports, caches and pools settle there) to the end, and RSS's least-squares
  slope per run, so steady growth shows apart from noise;
* interrupted collects: every ``--interrupt-every``-th measured run gets a real SIGINT while its
  pcaps are being parsed (Ctrl-C at the worst moment); it must still leave steps.csv and run.json
  with every step, the capture marked as interrupted, and nothing else behind.

``--churn MTBF[,away=..,for=..]`` makes every run train through a random churn (3 nodes, ``full`` through torchft,
enough steps to outlast ``for``), seeded with the run's index: nodes leave (their workers killed) and join (fresh
workers, healed from a peer) at different moments in each run; the leak checks are the same.

``--reuse`` runs them as a sweep does: through one :class:`ClusterReuse`, workers forked from its
fork server, the link rate alternating (re-shaped in place) and the delay changing every third run
(a new cluster); leaks are then counted once the held cluster and the fork server are gone.

Needs root. Exit status 1 when anything leaked or a run failed.

    python3 scripts/soak.py               # 50 runs after 3 warm-up runs
    python3 scripts/soak.py --runs 10 --json
    python3 scripts/soak.py --runs 30 --warmup-runs 0 --interrupt-every 0 --churn 3s,away=1.5s,for=8s
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from pyroute2 import IPRoute  # noqa: E402

from netbench.declarations.config import ReplicatorConfig  # noqa: E402
from netbench.emulation.cleanup import running, traces_of  # noqa: E402
from netbench.emulation.spec import ClusterSpec, DirectionSpec  # noqa: E402
from netbench.orchestrator.cluster_reuse import ClusterReuse  # noqa: E402
from netbench.orchestrator.config import RunConfig  # noqa: E402
from netbench.orchestrator.run import results  # noqa: E402
from netbench.orchestrator.run.runner import run  # noqa: E402
from netbench.schedule.churn import Churn, parse_churn, with_churn  # noqa: E402
from netbench.workloads.config import WorkloadConfig  # noqa: E402

SHAPES = "llama:d_model=64,layers=1,ffn=128,vocab=256"  # ~60k parameters
CHURN_STEPS_PER_S = 20  # a churn run's steps per second of its churn: a step takes tens of milliseconds


def small_config(index: int, out: Path, reuse: bool = False, churn: Churn | None = None) -> RunConfig:
    delay = 0.001 if (index // 3 if reuse else index) % 2 else 0.0
    rate = 1e9 if reuse and index % 2 else 100e6
    nodes = 3 if churn is not None else 2
    cluster = ClusterSpec(
        nodes=nodes, up=DirectionSpec(rate_bps=rate, delay_s=delay), down=DirectionSpec(rate_bps=rate)
    )
    schedule = None
    if churn is not None:  # each run its own draws
        names = tuple(n.name for n in cluster.topology.nodes)
        schedule = with_churn(None, churn.model_copy(update={"seed": index}), names)
    return RunConfig(
        cluster=cluster,
        replicator=ReplicatorConfig(name="full"),
        steps=CHURN_STEPS_PER_S * round(churn.for_s) if churn is not None else 3,
        warmup_steps=1,
        out_dir=out,
        workload=WorkloadConfig(kind="shapes", shapes=SHAPES, compute_ms=10.0),
        schedule=schedule,
    )


def host_links() -> int:
    with IPRoute() as ipr:
        return len(ipr.get_links())


def host_iptables_rules() -> int:
    """Rules (``-A`` lines) in the host namespace, both iptables back ends where installed."""
    total = 0
    for tool in ("iptables-legacy-save", "iptables-save"):
        if shutil.which(tool):
            out = subprocess.run([tool], capture_output=True, text=True, timeout=30).stdout
            total += sum(line.startswith("-A ") for line in out.splitlines())
    return total


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> float:
    return psutil.Process().memory_info().rss / 1024


def live_children() -> list[int]:
    return [p.pid for p in psutil.Process().children(recursive=True) if running(p.pid)]


def slope(values: list[float]) -> float:
    """Least-squares slope per run (0 for fewer than two points)."""
    if len(values) < 2:
        return 0.0
    xs = range(len(values))
    mx, my = statistics.fmean(xs), statistics.fmean(values)
    return sum((x - mx) * (y - my) for x, y in zip(xs, values)) / sum((x - mx) ** 2 for x in xs)


def interrupted_collect(config: RunConfig, held: ClusterReuse | None = None) -> tuple[str, str, str | None]:
    """Run once with a real SIGINT raised in this process as its pcaps start being parsed.

    Returns (run id, status, reason): status ``kept`` when the run raised KeyboardInterrupt and its
    directory still holds steps.csv (every step) and run.json (capture marked interrupted).
    """
    real, fired = results.bin_pcap, []

    def parse_then_ctrl_c(*args, **kwargs):
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # Python's default handler: KeyboardInterrupt right here
        return real(*args, **kwargs)

    before = set(config.out_dir.iterdir()) if config.out_dir.exists() else set()
    results.bin_pcap = parse_then_ctrl_c
    try:
        run(config, reuse=held)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        results.bin_pcap = real
    new = sorted(set(config.out_dir.iterdir()) - before)
    if len(new) != 1:
        return "?", "lost", f"expected one new run directory, found {len(new)}"
    run_dir = new[0]
    run_id = run_dir.name.rsplit("-", 1)[-1]
    if not fired or not interrupted:
        return run_id, "lost", "the SIGINT never reached the capture parsing" if not fired else "Ctrl-C was swallowed"
    try:
        doc = json.loads((run_dir / "run.json").read_text())
        rows = sum(1 for _ in (run_dir / "steps.csv").open()) - 1
    except (OSError, ValueError) as exc:
        return run_id, "lost", f"{type(exc).__name__}: {exc}"
    expected = config.cluster.nodes * (config.steps + config.warmup_steps)
    if rows != expected or doc.get("capture", {}).get("error") != "interrupted while parsing the capture":
        return run_id, "lost", f"steps.csv has {rows} rows of {expected}; capture: {doc.get('capture')}"
    return run_id, "kept", None


def soak(
    runs: int, warmup_runs: int, out: Path, interrupt_every: int = 10, reuse: bool = False, churn: Churn | None = None
) -> dict:
    links0, rules0 = host_links(), host_iptables_rules()
    per_run = []
    baseline: dict[str, float] = {}
    held = ClusterReuse() if reuse else None
    for index in range(warmup_runs + runs):
        started = time.monotonic()
        interrupt = (
            interrupt_every > 0
            and index >= warmup_runs
            and (index - warmup_runs) % interrupt_every == interrupt_every - 1
        )
        if interrupt:
            run_id, status, reason = interrupted_collect(small_config(index, out, reuse, churn), held)
        else:
            result = run(small_config(index, out, reuse, churn), reuse=held)
            run_id, status, reason = result.summary["run_id"], result.status, result.reason
        server = held.launcher.server.proc.pid if held is not None and held.launcher.server is not None else None
        entry = {
            "run": index,
            "warmup": index < warmup_runs,
            "run_id": run_id,
            "status": status,
            "interrupted": interrupt,
            "reason": reason,
            "wall_s": time.monotonic() - started,
            "fds": open_fds(),
            "rss_kib": rss_kib(),
            "children": len([pid for pid in live_children() if pid != server]),
        }
        if held is None:
            entry.update(_leaks(run_id))
        per_run.append(entry)
        if index == warmup_runs - 1 or (warmup_runs == 0 and index == 0):
            baseline = {"fds": entry["fds"], "rss_kib": entry["rss_kib"]}
        print(
            f"run {index + 1:3d}/{warmup_runs + runs} {entry['run_id']} {entry['status']:6s} {entry['wall_s']:5.1f} s  "
            f"fds {entry['fds']:4d}  rss {entry['rss_kib'] / 1024:7.1f} MiB"
            + ("  (warm-up)" if entry["warmup"] else ""),
            file=sys.stderr,
            flush=True,
        )
    if held is not None:  # a held cluster is no leak while it is held: count once everything is gone
        held.close()
        for entry in per_run:
            entry.update(_leaks(entry["run_id"]))
        per_run[-1]["children"] = len(live_children())
    measured = [e for e in per_run if not e["warmup"]]
    last = per_run[-1]
    return {
        "runs": len(measured),
        "warmup_runs": warmup_runs,
        "failed_runs": [f"{e['run_id']}: {e['reason']}" for e in measured if e["status"] not in ("ok", "kept")],
        "interrupted_collects": sum(e["interrupted"] for e in measured),
        "interrupted_collects_kept": sum(e["status"] == "kept" for e in measured),
        "leaked_namespaces": sum(e["namespaces"] for e in per_run),
        "leaked_registrations": sum(e["registered"] for e in per_run),
        "leaked_processes": sum(e["processes"] for e in per_run),
        "live_children": last["children"],
        "host_links_delta": host_links() - links0,
        "host_iptables_rules_delta": host_iptables_rules() - rules0,
        "fds_after_warmup": baseline["fds"],
        "fds_at_end": last["fds"],
        "fds_growth": last["fds"] - baseline["fds"],
        "rss_after_warmup_mib": baseline["rss_kib"] / 1024,
        "rss_at_end_mib": last["rss_kib"] / 1024,
        "rss_growth_mib": (last["rss_kib"] - baseline["rss_kib"]) / 1024,
        "rss_slope_kib_per_run": slope([e["rss_kib"] for e in measured]),
        "rss_range_mib": (max(e["rss_kib"] for e in measured) - min(e["rss_kib"] for e in measured)) / 1024
        if measured
        else 0.0,
        "median_run_s": statistics.median(e["wall_s"] for e in measured) if measured else 0.0,
    }


def _leaks(run_id: str) -> dict[str, int]:
    """What run ``run_id`` left: namespaces, registrations and processes, counted."""
    return {k: len(v) if isinstance(v, list) else int(bool(v)) for k, v in traces_of(run_id).items()}


LEAKS = (
    "leaked_namespaces",
    "leaked_registrations",
    "leaked_processes",
    "live_children",
    "host_links_delta",
    "host_iptables_rules_delta",
    "fds_growth",
)


def print_table(report: dict) -> None:
    rows = [
        (
            "runs (after warm-up)",
            f"{report['runs']} (+{report['warmup_runs']} warm-up), median {report['median_run_s']:.1f} s each",
        ),
        ("failed runs", str(len(report["failed_runs"]))),
        (
            "Ctrl-C while parsing pcaps: results kept",
            f"{report['interrupted_collects_kept']} of {report['interrupted_collects']}",
        ),
        ("leaked namespaces", str(report["leaked_namespaces"])),
        ("leaked registry entries", str(report["leaked_registrations"])),
        ("leaked processes", str(report["leaked_processes"])),
        ("orchestrator children alive at the end", str(report["live_children"])),
        ("host links, change", f"{report['host_links_delta']:+d}"),
        ("host iptables rules, change", f"{report['host_iptables_rules_delta']:+d}"),
        (
            "open fds (after warm-up -> end)",
            f"{report['fds_after_warmup']} -> {report['fds_at_end']} ({report['fds_growth']:+d})",
        ),
        (
            "RSS MiB (after warm-up -> end)",
            f"{report['rss_after_warmup_mib']:.1f} -> {report['rss_at_end_mib']:.1f} "
            f"({report['rss_growth_mib']:+.1f}; range {report['rss_range_mib']:.1f})",
        ),
        ("RSS slope", f"{report['rss_slope_kib_per_run']:+.1f} KiB/run"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for failure in report["failed_runs"]:
        print(f"failed: {failure}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="measured runs (default 50)")
    parser.add_argument("--warmup-runs", type=int, default=3, help="runs before the fd/RSS baseline (default 3)")
    parser.add_argument("--out", type=Path, help="keep run folders here (default: a temporary folder, removed)")
    parser.add_argument(
        "--interrupt-every",
        type=int,
        default=10,
        help="SIGINT every Nth measured run while its pcaps are parsed (0: never)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--reuse", action="store_true", help="run as a sweep does: clusters and workers reused across runs"
    )
    parser.add_argument("--churn", help="every run through a random churn: MTBF[,away=S][,for=S] (seeded per run)")
    args = parser.parse_args()
    churn = parse_churn(args.churn) if args.churn else None
    if churn is not None and args.reuse:
        parser.error("--churn runs each on a cluster of its own (not with --reuse)")
    if args.runs < 1 or args.warmup_runs < 0:
        parser.error("--runs must be >= 1 and --warmup-runs >= 0")
    if os.geteuid() != 0:
        parser.error("needs root (it builds real clusters)")
    out = args.out or Path(tempfile.mkdtemp(prefix="netbench-soak-"))
    try:
        report = soak(args.runs, args.warmup_runs, out, args.interrupt_every, args.reuse, churn)
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    leaked = any(report[k] for k in LEAKS) or report["failed_runs"]
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
