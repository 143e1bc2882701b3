#!/usr/bin/env python3
"""How fast ``netbench plan`` answers, and how its utilisation model compares with Streaming DiLoCo's Table 4.

1. Wall time of the planning commands (a fresh interpreter each, so no cache of the model is warm; gloo's
   calibration given as a file, ``reports/ci/calibration.json`` unless ``--calibration``, so nothing is measured),
   median of ``--repeat``, against the 3 s target:

       netbench plan --shapes llama-7b -r all --nodes 8,64,512
       netbench plan --shapes llama-7b -r all --nodes 8,64,512 --bw 10gbit --delay 5ms
       netbench plan --shapes llama-7b -r all --nodes 8,64,512 --bw 10gbit --delay 5ms --backend nccl \
           --accelerator h100-sxm
       netbench plan --shapes llama-7b -r all --topology scenarios/topologies/three_sites_asymmetric.toml

   and the interpreter's start with netbench's application imported (its commands' modules are imported when
   called), which every command pays before its own imports.

2. Table 4 of arXiv 2501.18512 (Gbit/s for 50/80/90/95/99 % compute utilisation; 1B/24 layers/0.1 s, 10B/48/0.8 s,
   100B/108/4.9 s; H = 100; Streaming DiLoCo with fragments of 3 layers, without and with one step of overlap, and
   with 4-bit outer gradients): the paper's figure, ours on the paper's grid (50 log-spaced points from 0.1 to
   1000 Gbit/s) and the difference in grid steps, with the ideal backend (the paper's assumptions) and with NCCL's
   model over RDMA (its latencies added).

   Each cell is compared twice: ours read as the first grid bandwidth that reaches the target (what ``plan``
   prints), and read as the paper reads its curves, the last grid bandwidth still below the target
   (:func:`below_grid`; docs/concepts/model.md gives the evidence).

3. With ``--bias``: the table again under each candidate cause of its one-step bias (``BIAS_CANDIDATES``), and the
   table from a second, independent simulator of the same assumptions (:func:`queue_simulator_utilization`).

    python3 scripts/bench_plan.py                   # both parts
    python3 scripts/bench_plan.py --against ../before   # and another checkout's commands, timed in turn with these
    python3 scripts/bench_plan.py --skip-timing     # the table alone (no subprocesses)
    python3 scripts/bench_plan.py --skip-timing --bias
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from netbench.model.schemes import SchemeSettings, build_scheme  # noqa: E402
from netbench.model.utilization import PAPER_GRID, on_grid  # noqa: E402
from netbench.planning import PlanRequest, plan  # noqa: E402

TARGET_S = 3.0
TOPOLOGY = REPO / "scenarios" / "topologies" / "three_sites_asymmetric.toml"
CALIBRATION = REPO / "reports" / "ci" / "calibration.json"  # a host's calibration, given as a file: nothing measured
ISSUE_LINK = ["--bw", "10gbit", "--delay", "5ms"]  # a WAN-like link, where gloo's window and pipeline matter
# label -> (arguments, whether gloo prices them with this host's calibration)
COMMANDS = {
    "llama-7b -r all --nodes 8,64,512": (["--shapes", "llama-7b", "-r", "all", "--nodes", "8,64,512"], True),
    "... --bw 10gbit --delay 5ms": (["--shapes", "llama-7b", "-r", "all", "--nodes", "8,64,512", *ISSUE_LINK], True),
    "... --bw 10gbit --delay 5ms --backend nccl": (
        ["--shapes", "llama-7b", "-r", "all", "--nodes", "8,64,512", *ISSUE_LINK, "--backend", "nccl"]
        + ["--accelerator", "h100-sxm"],
        False,
    ),
    "llama-7b -r all --topology three_sites_asymmetric": (
        ["--shapes", "llama-7b", "-r", "all", "--topology", str(TOPOLOGY)],
        True,
    ),
}
TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)
# arXiv 2501.18512, Table 4 (its appendix): Gbit/s to reach 50/80/90/95/99 % compute utilisation, H = 100, fragments
# of 3 layers (8, 16 and 36 fragments), tau = 1 where the communication overlaps, 4-bit outer gradients in the last row
TABLE4 = {
    ("1B", 1e9, 24, 0.1): {
        "Data-Parallel": (86.8, 152.6, 184.2, 222.3, 569.0),
        "DiLoCo": (1.4, 6.2, 13.3, 23.3, 86.8),
        "Streaming DiLoCo": (1.4, 5.2, 9.1, 16.0, 28.1),
        "+ overlap": (1.4, 4.3, 6.2, 9.1, 11.0),
        "+ overlap FP4": (0.4, 0.9, 1.7, 2.0, 3.0),
    },
    ("10B", 1e10, 48, 0.8): {
        "Data-Parallel": (104.8, 222.3, 222.3, 268.3, 471.5),
        "DiLoCo": (1.7, 7.5, 16.0, 33.9, 104.8),
        "Streaming DiLoCo": (1.7, 5.2, 9.1, 13.3, 19.3),
        "+ overlap": (1.7, 3.6, 5.2, 6.2, 7.5),
        "+ overlap FP4": (0.4, 0.9, 1.4, 1.4, 1.7),
    },
    ("100B", 1e11, 108, 4.9): {
        "Data-Parallel": (184.2, 323.8, 390.7, 390.7, 471.5),
        "DiLoCo": (3.0, 11.0, 23.3, 49.4, 184.2),
        "Streaming DiLoCo": (2.4, 6.2, 9.1, 11.0, 19.3),
        "+ overlap": (1.7, 3.6, 4.3, 5.2, 5.2),
        "+ overlap FP4": (0.5, 0.9, 1.1, 1.1, 1.4),
    },
}
LAYERS_PER_FRAGMENT = 3
# Candidate causes of the one-step bias, each as a factor on the step's compute time: with the ideal link (no
# latency) every time in the schedule scales together, so a step c times longer is the same as 1/c of the bytes.
BIAS_CANDIDATES = {
    "fp32 outer gradients instead of bf16 (2x the bytes)": 0.5,
    "an all-reduce of 3 datacenters, 2(M - 1)/M = 4/3 of the bytes": 0.75,
    "Gbit read as 2^30 bit (1.074x the bytes)": 1e9 / 2**30,
    "step time at MFU 40 % (section 3.1) for the 60 % the table names": 1.5,
    "step time at MFU 50 % for the 60 % the table names (= 5/6 of the bytes)": 1.2,
}


def table4_scheme(method: str, layers: int):
    """The replicator and settings each of Table 4's methods is in netbench."""
    fragments = {"fragments": layers // LAYERS_PER_FRAGMENT, "sync_every": 100, "grad_dtype": "bf16"}
    settings = {
        "Data-Parallel": ("full", {"grad_dtype": "bf16"}),
        "DiLoCo": ("diloco", {"grad_dtype": "bf16", "sync_every": 100}),
        "Streaming DiLoCo": ("streaming", fragments),
        "+ overlap": ("streaming", fragments | {"fragment_sync_delay": 1}),
        "+ overlap FP4": ("streaming", fragments | {"fragment_sync_delay": 1, "quant_bits": 4}),
    }
    name, values = settings[method]
    return build_scheme(name, SchemeSettings(**values))


def time_commands(
    repeat: int, calib: Path = CALIBRATION, roots: tuple[Path, ...] = (REPO,)
) -> dict[Path, dict[str, list[float]]]:
    """Each command's wall time ``repeat`` times in each checkout of ``roots`` (its own ``netbench``), the checkouts
    in turn command by command, so that a busy host slows each alike."""
    out: dict[Path, dict[str, list[float]]] = {root: {label: [] for label in COMMANDS} for root in roots}
    for _ in range(repeat):
        for label, (args, calibrated) in COMMANDS.items():
            given = ["--calibration", str(calib)] if calibrated else []
            for root in roots:
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "netbench", "plan", *args, *given, "--json"],
                    cwd=root,
                    capture_output=True,
                    text=True,
                )
                out[root][label].append(time.perf_counter() - start)
                if done.returncode != 0:
                    raise SystemExit(f"bench_plan: {label} failed in {root}: {done.stderr.strip()}")
    start = [sys.executable, "-c", "import netbench.cli.app"]
    for root in roots:
        out[root][START_LABEL] = [_timed(start, root) for _ in range(repeat)]
    return out


START_LABEL = "(interpreter start, the application imported)"


def _timed(argv: list[str], root: Path = REPO) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=root, capture_output=True, check=True)
    return time.perf_counter() - start


def steps_between(ours_bps: float | None, paper_gbit: float) -> int | None:
    """How many points of the paper's grid ours lies above (+) or below (-) the paper's figure."""
    if ours_bps is None:
        return None
    paper = min(range(len(PAPER_GRID)), key=lambda i: abs(PAPER_GRID[i] / 1e9 - paper_gbit))
    return PAPER_GRID.index(ours_bps) - paper


def below_grid(bw_bps: float | None) -> float | None:
    """The paper's reading of a utilisation curve sampled on its grid: the last grid bandwidth below ``bw_bps``, the
    bandwidth at which the target is reached (None without an answer or below the grid's first point).

    Why: netbench's model and the queue simulator the paper's first author publishes
    (:func:`queue_simulator_utilization`) both lie one grid step above the table in most cells when read as the first
    grid point reaching the target, and on the table's point in most when read this way."""
    if bw_bps is None:
        return None
    return next((g for g in reversed(PAPER_GRID) if g < bw_bps * (1 - 1e-9)), None)


# Table 4's cluster: two nodes of one accelerator each, a 1 Gbit/s link whose rate the utilisation answers vary, no
# codec time (the paper's assumptions); the ideal backend, or NCCL's model over RDMA between H100s
BACKENDS = {
    "ideal": {"backend": "ideal", "codec": False},
    "nccl-rdma": {
        "backend": "nccl",
        "accelerator_name": "h100-sxm",
        "transport": "rdma",
        "channels": 16,
        "codec": False,
    },
}


def table4(
    backends: tuple[str, ...] = ("ideal", "nccl-rdma"), step_scale: float = 1.0, only: tuple | None = None
) -> list[dict]:
    """Every cell of Table 4 (or of its model ``only``) for each backend: the paper's figure, ours exact and on its
    grid, steps apart; each model and backend one :func:`netbench.planning.plan` of every method."""
    rows = []
    for (name, params, layers, step_s), methods in TABLE4.items():
        if only is not None and (name, params, layers, step_s) != only:
            continue
        for label in backends:
            request = PlanRequest(
                schemes=tuple(table4_scheme(method, layers) for method in methods),
                params=str(int(params)),
                layers=layers,
                nodes=(2,),
                bw=1e9,
                compute_ms=step_s * step_scale * 1e3,
                target_utilization=",".join(str(t) for t in TARGETS),
                **BACKENDS[label],
            )
            answers = plan(request, derived=False).doc["bandwidth_for_utilization"]  # the table's answers alone
            for (method, paper), scheme_answers in zip(methods.items(), _by_scheme(answers, len(TARGETS))):
                for target, figure, answer in zip(TARGETS, paper, scheme_answers):
                    ours = on_grid(answer["bw_bps"])
                    read = below_grid(answer["bw_bps"])
                    rows.append(
                        {
                            "model": name,
                            "backend": label,
                            "method": method,
                            "target": target,
                            "paper_gbit": figure,
                            "ours_exact_gbit": answer["bw_bps"] / 1e9 if answer["bw_bps"] else None,
                            "ours_grid_gbit": ours / 1e9 if ours else None,
                            "grid_steps": steps_between(ours, figure),
                            "paper_read_gbit": read / 1e9 if read else None,
                            "paper_read_steps": steps_between(read, figure),
                        }
                    )
    return rows


def _by_scheme(answers: list[dict], targets: int) -> list[list[dict]]:
    """The plan's utilisation answers (scheme by scheme, each target in turn) cut into one list per scheme."""
    return [answers[i : i + targets] for i in range(0, len(answers), targets)]


def summary(cells: list[dict], key: str = "grid_steps") -> str:
    """How ``cells`` compare with the paper, by their grid steps apart under ``key`` (``grid_steps``: ours read as
    the first grid point reaching the target; ``paper_read_steps``: read as the paper reads, :func:`below_grid`)."""
    steps = [c[key] for c in cells if c[key] is not None]
    past = len(cells) - len(steps)
    exact = sum(d == 0 for d in steps)
    within = sum(abs(d) <= 1 for d in steps)
    above = sum(d > 0 for d in steps)
    worst = max((abs(d) for d in steps), default=0)
    text = f"{exact} of {len(cells)} on the paper's point, {within} within one step, {above} above, worst {worst}"
    return text + (f", {past} past the grid's 1000 Gbit/s" if past else "")


def print_table4(rows: list[dict]) -> None:
    print(
        "Streaming DiLoCo Table 4 (Gbit/s for 50/80/90/95/99 % compute utilization): paper | ours on its grid (steps)"
    )
    for backend in dict.fromkeys(r["backend"] for r in rows):
        print(f"  backend {backend}")
        for model in dict.fromkeys(r["model"] for r in rows):
            for method in dict.fromkeys(r["method"] for r in rows):
                cells = [r for r in rows if (r["backend"], r["model"], r["method"]) == (backend, model, method)]
                text = "  ".join(
                    f"{c['paper_gbit']:>6.1f}|{c['ours_grid_gbit'] or float('nan'):>6.1f} ({c['grid_steps']:+d})"
                    for c in cells
                )
                print(f"    {model:>4} {method:<17} {text}")
        within = [r for r in rows if r["backend"] == backend]
        dp = [r for r in within if r["method"] in ("Data-Parallel", "DiLoCo")]
        print(f"    Data-Parallel and DiLoCo: {summary(dp)}")
        print(f"    Streaming DiLoCo rows:    {summary([r for r in within if r not in dp])}")
        print(f"    all:                      {summary(within)}")
        print("    read as the paper reads its curves (the last grid bandwidth below the target):")
        print(f"    Data-Parallel and DiLoCo: {summary(dp, 'paper_read_steps')}")
        print(f"    Streaming DiLoCo rows:    {summary([r for r in within if r not in dp], 'paper_read_steps')}")
        print(f"    all:                      {summary(within, 'paper_read_steps')}")


QUEUE_SIM_BUCKETS = 128  # reductions per step (or per fragment sync), released evenly over backward
QUEUE_SIM_STEPS = 600


def queue_simulator_utilization(method: str, params: float, layers: int, step_s: float, bw_bps: float) -> float:
    """Compute utilisation from the simulator the paper's first author publishes beside the paper
    (arthurdouillard.com/diloco: "timeline + network queue"), written here from its description: every step's (or
    sync's) bytes cut into 128 equal reductions released evenly over backward (forward a third of the step), served
    in order by one queue at ``bw_bps``, each due when its step ends (a fragment's ``tau`` steps later); a step whose
    reductions finish late stalls the compute by the latest overrun. bf16 (4 bits with FP4), 2(M - 1)/M = 1 at
    M = 2, H = 100, fragments of 3 layers, one leaving every H / F steps. It shares netbench's inputs, not its code."""
    fwd, bwd = step_s / 3, 2 * step_s / 3
    bits = params * (4 if method.endswith("FP4") else 16)
    fragments, tau, period = 1, 0, 100
    if method == "Data-Parallel":
        period = 1
    elif method != "DiLoCo":
        fragments, tau = layers // LAYERS_PER_FRAGMENT, 0 if method == "Streaming DiLoCo" else 1
    releases = [fwd + (k + 1) / QUEUE_SIM_BUCKETS * bwd for k in range(QUEUE_SIM_BUCKETS)]
    size = bits / fragments / QUEUE_SIM_BUCKETS
    every = period / fragments
    now = queue_free = stalled = 0.0
    for step in range(QUEUE_SIM_STEPS):
        if fragments > 1:
            sends = step == 0 or int((step % period) // every) != int(((step - 1) % period) // every)
        else:
            sends = (step + 1) % period == 0
        overrun = 0.0
        for release in releases if sends else ():
            queue_free = max(now + release, queue_free) + size / bw_bps
            overrun = max(overrun, queue_free - (now + (tau + 1) * step_s))
        now += overrun + step_s
        stalled += overrun
    return QUEUE_SIM_STEPS * step_s / (QUEUE_SIM_STEPS * step_s + stalled)


def queue_simulator_table() -> list[dict]:
    """Table 4 from :func:`queue_simulator_utilization` on the paper's grid, read both ways."""
    rows = []
    for (name, params, layers, step_s), methods in TABLE4.items():
        for method, paper in methods.items():
            curve = [queue_simulator_utilization(method, params, layers, step_s, bw) for bw in PAPER_GRID]
            for target, figure in zip(TARGETS, paper):
                first = next((bw for bw, u in zip(PAPER_GRID, curve) if u >= target), None)
                below = PAPER_GRID[PAPER_GRID.index(first) - 1] if first and first != PAPER_GRID[0] else None
                rows.append(
                    {
                        "model": name,
                        "method": method,
                        "target": target,
                        "grid_steps": steps_between(first, figure),
                        "paper_read_steps": steps_between(below, figure),
                    }
                )
    return rows


def print_bias(as_stated: list[dict]) -> dict[str, str]:
    """Each candidate cause of the one-step bias applied to the whole table (ideal backend), beside the table as
    the paper states it (``as_stated``, its ideal rows)."""
    print("One-step bias: Table 4 (ideal backend) under each candidate cause")
    out = {
        "as the paper states it": summary(as_stated),
        "read as the paper reads: the last grid point below the target": summary(as_stated, "paper_read_steps"),
    }
    for label, scale in BIAS_CANDIDATES.items():
        out[label] = summary(table4(("ideal",), scale))
    sim = queue_simulator_table()
    out["queue simulator, first grid point reaching the target"] = summary(sim)
    out["queue simulator, read as the paper reads"] = summary(sim, "paper_read_steps")
    for label, text in out.items():
        print(f"  {label:<74} {text}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (median)")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument(
        "--calibration", type=Path, default=CALIBRATION, help="gloo's calibration for the timed commands"
    )
    parser.add_argument("--bias", action="store_true", help="also the table under each candidate cause of its bias")
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another checkout (the code before a change): its commands timed in turn with these, and the ratio",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    doc: dict = {}
    if not args.skip_timing:
        against = () if args.against is None else (args.against.resolve(),)
        by_root = time_commands(args.repeat, args.calibration, (REPO, *against))
        timings = by_root[REPO]
        print(f"netbench plan, fresh interpreter each, calibration from a file (median of {args.repeat}):")
        for label, runs in timings.items():
            median = statistics.median(runs)
            verdict = "meets" if median < TARGET_S else "misses"
            if label == START_LABEL:
                print(f"  {label:<48} {median:6.2f} s  (paid by every command above)")
                continue
            print(f"  {label:<48} {median:6.2f} s  ({median / TARGET_S:.2f} of the {TARGET_S:g} s target: {verdict})")
        doc["timings_s"] = timings
        for root in against:
            print(f"  against {root}, timed in turn with these (theirs | ours, ours / theirs):")
            for label, runs in by_root[root].items():
                theirs, ours = statistics.median(runs), statistics.median(timings[label])
                print(f"    {label:<48} {theirs:6.2f} s | {ours:6.2f} s  {ours / theirs:.2f}")
            doc["against"] = {"root": str(root), "timings_s": by_root[root]}
    start = time.perf_counter()
    rows = table4()
    print_table4(rows)
    print(f"  (the whole table, both backends: {time.perf_counter() - start:.2f} s)")
    doc["table4"] = rows
    if args.bias:
        doc["bias"] = print_bias([r for r in rows if r["backend"] == "ideal"])
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
