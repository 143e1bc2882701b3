"""Step-time error of the current model on stored sweeps, re-predicted without rerunning any training.

Every finished point of each sweep folder is predicted again with the code on PYTHONPATH and the sweep's own
calibration.json: from its run directory where one is kept (its run.json, steps.csv; the replay fed the run's
measured codec as well; the run's dilation and steps.csv's wall clock say how bbr's timers met it), otherwise from
the sweep.json scenario's point of the same label with the point's recorded local work (``pred_local_time_s``).
Nothing is written. Prints, per sweep, the median and max |error| of the forecast (and of the replay where run
directories exist) over faithful points (``fidelity_ok`` where present).

    PYTHONPATH=. python scripts/model_error_on_stored.py reports/fidelity reports/topology reports/ci
    PYTHONPATH=. python scripts/model_error_on_stored.py reports/topology --runs-root CHECKOUT/reports/topology
    PYTHONPATH=. python scripts/model_error_on_stored.py --runs reports/flexdemo/runs/* --dump FILE

``--links`` prints, for every kept run directory, each link direction's bytes per step by the model beside the
counters' mean over the measured steps after the first (interface counters for access links, ``trunks.csv`` for
trunks): a run whose warm-up is a phase that ends (1-bit Adam's dense steps) is compared on the phase that lasts, and
the first measured step, which books the warm-up's last queued bytes, is left out.

    PYTHONPATH=. python scripts/model_error_on_stored.py reports/onebit-sites --points --links

``--runs`` takes run directories without a sweep (each its own point, priced with ``--calibration``: the
calibration a run used lives in its host's cache, not beside it). ``--dump FILE`` writes, per point, what the
model said and why (forecast, replay, predicted wire bytes, the graph model's bytes per link direction and its
bottleneck) as JSON: two dumps of one set of folders, taken with two versions of the code, compare the model's
numbers beyond the printed errors.

Run it once with the code before a model change and once after to compare.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from netbench.calibrate.hostcache import load_calibration
from netbench.model.network import direction_name, direction_of
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import (
    KernelClock,
    clock_over,
    kernel_clock,
    model_step,
    predict,
    predict_run,
    replay_run,
    run_local_time_s,
    workload_shapes,
)
from netbench.orchestrator.run.links import read_trunks
from netbench.orchestrator.sweep.scenario import points, scenario_from_dict
from netbench.rundir.reading import read_csv
from netbench.rundir.runjson import recorded_dilation
from netbench.rundir.steps_schema import Col
from netbench.rundir.summary import measured_steps
from netbench.topology.graph import Hop

DEFAULT_FOLDERS = ("reports/fidelity", "reports/topology", "reports/ci")
CPUS = 2  # the sweeps were measured on 2-core hosts: the codec is priced on 2 shared cores as they were


def _run_dir(folder: Path, runs_root: Path | None, rel: str) -> Path | None:
    for root in (folder, runs_root):
        if root is not None and (root / rel / "steps.csv").is_file() and (root / rel / "run.json").is_file():
            return root / rel
    return None


def _from_run(run_dir: Path, calibration) -> dict:
    """Forecast and replay step of a kept run directory, with the model's bytes and bottleneck (:func:`_model_view`)."""
    doc = json.loads((run_dir / "run.json").read_text())
    config = RunConfig.model_validate(doc["config"])
    steps = read_csv(run_dir / "steps.csv")
    clock = kernel_clock(steps, recorded_dilation(doc))  # its recorded dilation, the min-RTT windows its steps hold
    predicted = predict_run(config, steps, None, calibration, cpus=CPUS, clock=clock)
    replay = replay_run(config, steps, calibration, cpus=CPUS, clock=clock)
    return {
        "forecast": float(predicted.get("step_time_s", math.nan)),
        "replay": math.nan if replay is None else float(replay),
        "pred_wire_tx": predicted.get("wire_tx_bytes_per_step"),
        "pred_wire_rx": predicted.get("wire_rx_bytes_per_step"),
        **_model_view(config, _local_s(config, steps), calibration),
        "measured_links": measured_link_bytes(run_dir, config),
    }


def _local_s(config: RunConfig, steps: pd.DataFrame) -> float | None:
    """The run's measured local work per step, as its prediction takes it."""
    return run_local_time_s(steps, config, workload_shapes(config.workload, config.cluster.nodes))


def measured_link_bytes(run_dir: Path, config: RunConfig) -> dict[str, float]:
    """Each link direction's mean bytes per step over the measured steps after the first, named as the model names
    them: the access links from each rank's interface counters, the trunks from ``trunks.csv``."""
    steps = measured_steps(read_csv(run_dir / "steps.csv"))
    kept = steps[steps[Col.STEP] > steps[Col.STEP].min()]
    topology, placement = config.cluster.topology, config.cluster.placement
    out: dict[str, float] = {}
    for rank, rows in kept.groupby(Col.RANK):
        link = topology.access_link(placement[int(rank)]).name
        out[direction_name(topology, Hop(link, True))] = float(rows[Col.TX_BYTES].mean())
        out[direction_name(topology, Hop(link, False))] = float(rows[Col.RX_BYTES].mean())
    # trunks.csv's row k holds what a direction sent since the previous row until the end of step k (1-based), and a
    # row the orchestrator sampled late holds the steps it missed: the span runs from the first row at or after the
    # end of the first measured step to the last row, divided by the steps it spans.
    trunks = read_trunks(run_dir / "trunks.csv")
    for (link, way), rows in trunks.groupby(["link", "direction"]):
        after = rows[rows["step"] >= int(steps[Col.STEP].min()) + 1]
        if len(after) < 2:
            continue
        first, last = int(after["step"].min()), int(after["step"].max())
        sent = float(after.loc[after["step"] > first, "tx_bytes"].sum())
        out[direction_of(topology, str(link), way == "fwd")] = sent / (last - first)
    return out


def _model_view(config: RunConfig, local: float | None, calibration) -> dict:
    """The graph model's bytes per link direction and bottleneck for a run of one worker per node (none else)."""
    if local is None or getattr(config, "gpus_per_node", 1) > 1:
        return {}
    try:
        est = model_step(config, workload_shapes(config.workload, config.cluster.nodes), local, calibration)
    except Exception as exc:  # noqa: BLE001 - recorded in the dump: a point the model cannot price is a finding
        return {"model_error": str(exc)}
    return {"link_bytes": est.link_bytes, "bottleneck": est.bottleneck.name}


def _from_scenario(configs: dict[str, RunConfig], row: pd.Series, calibration) -> dict:
    """Forecast of a point whose run directory is gone: the scenario's config, the recorded local work, and the
    kernel's clock from its recorded step and dilation (its warm-up and measured steps at the measured step each)."""
    config = configs.get(str(row["label"]))
    local = row.get("pred_local_time_s")
    if config is None or not isinstance(local, float) or math.isnan(local):
        return {"forecast": math.nan, "replay": math.nan}
    shapes = workload_shapes(config.workload, config.cluster.nodes)
    est = predict(config, shapes, local, calibration, CPUS, clock=_recorded_clock(config, row))
    return {
        "forecast": float(est.step_time_s),
        "replay": math.nan,
        "pred_wire_tx": est.tx.total,
        "pred_wire_rx": est.rx.total,
        **_model_view(config, local, calibration),
    }


def _recorded_clock(config: RunConfig, row: pd.Series) -> KernelClock:
    """How the kernel's timers met a point whose steps.csv is gone, from summary.csv: its warm-up and measured steps
    taken at its measured step each, in wall time (times its dilation)."""
    step, dilation = row.get("step_time_s"), row.get("dilation")
    dilation = float(dilation) if isinstance(dilation, float) and not math.isnan(dilation) else 1.0
    count = row.get("steps_measured")
    count = int(count) if isinstance(count, (int, float)) and not math.isnan(count) else config.steps
    if not isinstance(step, float) or math.isnan(step):
        return KernelClock(dilation)
    wall = step * dilation
    return clock_over(config.warmup_steps * wall, (config.warmup_steps + count) * wall, dilation)


def sweep_errors(folder: Path, runs_root: Path | None) -> pd.DataFrame:
    """One row per finished point: label, measured, forecast and replay steps, and whether it is faithful."""
    summary = pd.read_csv(folder / "summary.csv")
    calibration = load_calibration(folder / "calibration.json")
    scenario = scenario_from_dict(json.loads((folder / "sweep.json").read_text())["scenario"])
    configs = {p.label: p.config for p in points(scenario, Path("."))}  # keys change with new settings
    rows = []
    for _, row in summary.iterrows():
        if row.get("status") != "ok":
            continue
        run_dir = _run_dir(folder, runs_root, str(row["run_dir"]))
        model = _from_run(run_dir, calibration) if run_dir else _from_scenario(configs, row, calibration)
        ok = row.get("fidelity_ok", True)
        rows.append(
            {
                "point": row["label"],
                "measured": float(row["step_time_s"]),
                **model,
                "faithful": True if ok is None or (isinstance(ok, float) and math.isnan(ok)) else bool(ok),
            }
        )
    return _with_errors(pd.DataFrame(rows))


def run_errors(run_dirs: list[Path], calibration_path: Path) -> pd.DataFrame:
    """One row per run directory (no sweep around it): its measured step and the model's, as :func:`sweep_errors`."""
    calibration = load_calibration(calibration_path)
    rows = []
    for run_dir in run_dirs:
        measured = (json.loads((run_dir / "run.json").read_text()).get("summary") or {}).get("step_time_s")
        if measured and (run_dir / "steps.csv").is_file():
            rows.append({"point": run_dir.name, "measured": float(measured), **_from_run(run_dir, calibration)})
    return _with_errors(pd.DataFrame(rows).assign(faithful=True))


def _with_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each point's forecast and replay error against its measured step."""
    frame["forecast_err"] = frame["forecast"] / frame["measured"] - 1
    frame["replay_err"] = frame["replay"] / frame["measured"] - 1
    return frame


def _links_text(point: pd.Series) -> str:
    """One point's bytes per link direction, model / counters and the error, busiest by the model first."""
    model, seen = point.get("link_bytes"), point.get("measured_links")
    if not isinstance(model, dict) or not isinstance(seen, dict):
        return "        (no per-link view)"
    lines = []
    for name in sorted(model, key=lambda n: -model[n]):
        if name in seen and model[name]:
            lines.append(
                f"        {name:<16} model {model[name] / 1e3:9.1f} kB  counters {seen[name] / 1e3:9.1f} kB  "
                f"{100 * (seen[name] / model[name] - 1):+6.1f} %"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help=f"sweep folders (default: {' '.join(DEFAULT_FOLDERS)})")
    ap.add_argument("--runs-root", type=Path, action="append", default=[], help="where a sweep's run_dir paths live")
    ap.add_argument("--points", action="store_true", help="also print every point's errors")
    ap.add_argument("--links", action="store_true", help="also print each kept run's bytes per link direction")
    ap.add_argument("--runs", type=Path, nargs="+", default=[], help="run directories without a sweep")
    ap.add_argument("--calibration", type=Path, default=Path("reports/ci/calibration.json"), help="for --runs")
    ap.add_argument("--dump", type=Path, help="write every point's model numbers here as JSON")
    args = ap.parse_args()
    roots = {root.name: root for root in args.runs_root}
    folders = args.folders or ([] if args.runs else [Path(f) for f in DEFAULT_FOLDERS])
    frames = [(folder.name, sweep_errors(folder, roots.get(folder.name))) for folder in folders]
    if args.runs:
        frames.append(("runs", run_errors(args.runs, args.calibration)))
    print(f"{'sweep':<10} {'points':>6} {'faithful':>8} {'forecast med':>12} {'max':>7} {'replay med':>10} {'max':>7}")
    for name, frame in frames:
        judged = frame[frame["faithful"]]
        f, r = judged["forecast_err"].abs().dropna(), judged["replay_err"].abs().dropna()

        def pct(s: pd.Series, how: str) -> str:
            return f"{100 * getattr(s, how)():.1f} %" if len(s) else "-"

        print(
            f"{name:<10} {len(frame):>6} {len(judged):>8} {pct(f, 'median'):>12} {pct(f, 'max'):>7} "
            f"{pct(r, 'median'):>10} {pct(r, 'max'):>7}"
        )
        if args.points:
            for _, p in frame.iterrows():
                print(
                    f"    {p['point']:<44} measured {p['measured']:.4f} forecast {100 * p['forecast_err']:+6.1f} % "
                    f"replay {100 * p['replay_err']:+6.1f} % {'' if p['faithful'] else '(not faithful)'}"
                )
                if args.links:
                    print(_links_text(p))
    if args.dump:
        dump = {
            name: frame.drop(columns=["forecast_err", "replay_err"]).to_dict(orient="records") for name, frame in frames
        }
        args.dump.write_text(json.dumps(dump, indent=1, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
