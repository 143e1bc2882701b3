"""Step-time error of the current model on stored sweeps, re-predicted without rerunning any training.

Every finished point of each sweep folder is predicted again with the code on PYTHONPATH and the sweep's own
calibration.json: from its run directory where one is kept (its run.json, steps.csv; the replay fed the run's
measured codec as well), otherwise from the sweep.json scenario's point of the same label with the point's recorded
local work (``pred_local_time_s``). Nothing is written. Prints, per sweep, the median and max |error| of the
forecast (and of the replay where run directories exist) over faithful points (``fidelity_ok`` where present).

    PYTHONPATH=. python scripts/model_error_on_stored.py reports/fidelity reports/topology reports/ci
    PYTHONPATH=. python scripts/model_error_on_stored.py reports/topology --runs-root CHECKOUT/reports/topology

Run it once with the code before a model change and once after to compare.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from netbench.calibrate.hostcache import load_calibration
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import predict, predict_run, replay_run, workload_shapes
from netbench.orchestrator.sweep_scenario import points, scenario_from_dict
from netbench.rundir.reading import read_csv

DEFAULT_FOLDERS = ("reports/fidelity", "reports/topology", "reports/ci")
CPUS = 2  # the sweeps were measured on 2-core hosts: the codec is priced on 2 shared cores as they were


def _run_dir(folder: Path, runs_root: Path | None, rel: str) -> Path | None:
    for root in (folder, runs_root):
        if root is not None and (root / rel / "steps.csv").is_file() and (root / rel / "run.json").is_file():
            return root / rel
    return None


def _from_run(run_dir: Path, calibration) -> tuple[float, float]:
    """(forecast, replay) step of a kept run directory."""
    config = RunConfig.model_validate(json.loads((run_dir / "run.json").read_text())["config"])
    steps = read_csv(run_dir / "steps.csv")
    forecast = predict_run(config, steps, None, calibration, cpus=CPUS).get("step_time_s", math.nan)
    replay = replay_run(config, steps, calibration, cpus=CPUS)
    return float(forecast), math.nan if replay is None else float(replay)


def _from_scenario(configs: dict[str, RunConfig], row: pd.Series, calibration) -> float:
    """Forecast step of a point whose run directory is gone: the scenario's config, the recorded local work."""
    config = configs.get(str(row["label"]))
    if config is None or not isinstance(row.get("pred_local_time_s"), float) or math.isnan(row["pred_local_time_s"]):
        return math.nan
    shapes = workload_shapes(config.workload, config.cluster.nodes)
    return float(predict(config, shapes, float(row["pred_local_time_s"]), calibration, CPUS).step_time_s)


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
        forecast, replay = (
            _from_run(run_dir, calibration) if run_dir else (_from_scenario(configs, row, calibration), math.nan)
        )
        ok = row.get("fidelity_ok", True)
        rows.append(
            {
                "point": row["label"],
                "measured": float(row["step_time_s"]),
                "forecast": forecast,
                "replay": replay,
                "faithful": True if ok is None or (isinstance(ok, float) and math.isnan(ok)) else bool(ok),
            }
        )
    frame = pd.DataFrame(rows)
    frame["forecast_err"] = frame["forecast"] / frame["measured"] - 1
    frame["replay_err"] = frame["replay"] / frame["measured"] - 1
    return frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[Path(f) for f in DEFAULT_FOLDERS])
    ap.add_argument("--runs-root", type=Path, action="append", default=[], help="where a sweep's run_dir paths live")
    ap.add_argument("--points", action="store_true", help="also print every point's errors")
    args = ap.parse_args()
    roots = {root.name: root for root in args.runs_root}
    print(f"{'sweep':<10} {'points':>6} {'faithful':>8} {'forecast med':>12} {'max':>7} {'replay med':>10} {'max':>7}")
    for folder in args.folders:
        frame = sweep_errors(folder, roots.get(folder.name))
        judged = frame[frame["faithful"]]
        f, r = judged["forecast_err"].abs().dropna(), judged["replay_err"].abs().dropna()

        def pct(s: pd.Series, how: str) -> str:
            return f"{100 * getattr(s, how)():.1f} %" if len(s) else "-"

        print(
            f"{folder.name:<10} {len(frame):>6} {len(judged):>8} {pct(f, 'median'):>12} {pct(f, 'max'):>7} "
            f"{pct(r, 'median'):>10} {pct(r, 'max'):>7}"
        )
        if args.points:
            for _, p in frame.iterrows():
                print(
                    f"    {p['point']:<44} measured {p['measured']:.4f} forecast {100 * p['forecast_err']:+6.1f} % "
                    f"replay {100 * p['replay_err']:+6.1f} % {'' if p['faithful'] else '(not faithful)'}"
                )


if __name__ == "__main__":
    main()
