"""`netbench sweep`: a grid of runs, resumable, with its report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from netbench.cli.cluster_options import network_group
from netbench.cli.errors import UserError, make_output_folder
from netbench.cli.fields import (
    FROM_FIELDS,
    REPLICATOR,
    RUN,
    TRAINING_REPLICATOR_FIELDS,
    WORKLOAD,
    Settings,
    expand,
    group,
    option_names,
)
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges, require_torch
from netbench.cli.run_config import (
    check_capture_room,
    check_delay_line_env,
    check_host_fit,
    check_settings,
    dilation_factor,
)
from netbench.cli.run_options import check_workload
from netbench.emulation.tcpsettings import TCP
from netbench.model.calibration import CALIBRATION, CalibrationError
from netbench.orchestrator.forked_workers import Launcher
from netbench.orchestrator.run.dilation import DILATION
from netbench.orchestrator.sweep.calibration import sweep_calibration
from netbench.orchestrator.sweep.scenario import ScenarioError, read_toml, scenario_from_dict
from netbench.orchestrator.sweep.scenario import points as grid_points
from netbench.orchestrator.sweep.sweep import SweepBusy, done_keys, run_sweep, sweep_lock, write_sweep_json
from netbench.reports.escape import printable
from netbench.reports.report import generate_report
from netbench.reports.terminal import make_console
from netbench.rundir.sweepdir import read_summary
from netbench.settings import DRY_RUN, Setting
from netbench.topology.presets import TOPOLOGY
from netbench.untrusted import BadInput

console = make_console(stderr=True)

# the network settings a sweep takes: the axes its scenario's grid has, and the nodes' TCP settings
_NETWORK_FIELDS = (
    "nodes",
    "bw",
    "delay",
    "tcp_cc",
    "tcp_wmem_max",
    "no_slow_start_after_idle",
    *(s.field for s in TOPOLOGY.values()),
)
_NETWORK = network_group("sweep", optional=True, axis_note="; a comma list, one point per value", only=_NETWORK_FIELDS)
_TCP_FIELDS = {
    "tcp_cc": "tcp.cc",
    "tcp_wmem_max": "tcp.wmem_max",
    "no_slow_start_after_idle": "tcp.slow_start_after_idle",
}

# scenario field -> the sweep option that sets it, so errors name what the user typed
_OPTIONS = {
    **{f"grid.{s.field}": s.name for s in _NETWORK.settings if s.axis},
    **{where: TCP[field].name for field, where in _TCP_FIELDS.items()},
    "grid.replicator": "--replicator",
    "grid.shard": RUN["shard"].name,
    "steps": "--steps",
    "warmup": "--warmup",
    "name": "--name",
    "workload": "--workload/--shapes",
    **option_names(WORKLOAD, "workload."),
    **option_names(REPLICATOR, "replicator."),
    "capture": RUN["capture"].name,
    "schedule": "--schedule",
}


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _nodes(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in _csv(text)]


def _numbers(text: str, kind: type) -> list[Any]:
    """A comma list of numbers; what does not read as one stays text, for the scenario's check to name."""
    out: list[Any] = []
    for t in _csv(text):
        try:
            out.append(kind(t))
        except ValueError:
            out.append(t)
    return out


def _rank_orders(text: str) -> list[str]:
    """``topology,interleaved`` is two orders; ``0,2,1,3`` (every part a node index) is one."""
    parts = _csv(text)
    return [",".join(parts)] if parts and all(p.isdigit() for p in parts) else parts


def _axis(setting: Setting, text: str) -> list[Any]:
    """A comma list of one axis, read as its unit asks (the scenario's grid checks each value)."""
    if setting.field == "nodes":
        return _nodes(text)
    if setting.field == "rank_order":
        return _rank_orders(text)
    return (
        _numbers(text, {"count": int, "factor": float}[setting.unit])
        if setting.unit in ("count", "factor")
        else _csv(text)
    )


def _network_overrides(network: Settings) -> dict[str, Any]:
    """The scenario fields the network options set (None: not given, the scenario's value)."""
    out: dict[str, Any] = {}
    for setting in _NETWORK.settings:
        value = network[setting.field]
        if setting.axis:
            out[f"grid.{setting.field}"] = _axis(setting, value) if value else None
    out.update({where: network[field] for field, where in _TCP_FIELDS.items()})
    out["tcp.slow_start_after_idle"] = False if network["no_slow_start_after_idle"] else None
    return out


def _scenario(path: Path | None, overrides: dict[str, Any]):
    """The file's scenario (if any) with every option given on the command line on top."""

    try:
        data = read_toml(path) if path else {}
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    given = {k: v for k, v in overrides.items() if v is not None}
    for dotted, value in given.items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserError(f"{path}: {part}: expected a table")
        node[leaf] = value
    names = {field: _OPTIONS[field] for field in given if field in _OPTIONS}
    if "workload.kind" in given or "workload.shapes" in given:
        names["workload"] = _OPTIONS["workload"]
    try:
        return scenario_from_dict(data, str(path) if path else "", names)
    except ScenarioError as exc:
        raise UserError(str(exc)) from None


@expand(
    network=_NETWORK,
    work_settings=group(WORKLOAD, "kind", "shapes", "compute_ms", optional=True),
    rep_settings=group(REPLICATOR, *TRAINING_REPLICATOR_FIELDS, optional=True),
    run_settings=group(RUN, "capture", optional=True),
)
def sweep(
    scenario_file: Path | None = typer.Argument(
        None, metavar="[SCENARIO.toml]", help="Scenario file (see scenarios/); options override it."
    ),
    network: Settings = FROM_FIELDS,
    replicator: str | None = REPLICATOR["name"].option("sweep", optional=True),
    shard: str | None = RUN["shard"].option("sweep", optional=True),
    steps: int | None = RUN["steps"].option("sweep", optional=True),
    warmup: int | None = RUN["warmup_steps"].option("sweep", optional=True),
    work_settings: Settings = FROM_FIELDS,
    rep_settings: Settings = FROM_FIELDS,
    run_settings: Settings = FROM_FIELDS,
    calibrate: bool | None = typer.Option(
        None, "--calibrate/--no-calibrate", help="Measure model constants on this workload first."
    ),
    calibration: Path | None = option(CALIBRATION, "sweep"),
    name: str | None = typer.Option(None, "--name", help="Sweep name (default: the scenario file's name, else sweep)."),
    out: Path | None = RUN["out_dir"].option("sweep", optional=True),
    fresh: bool = typer.Option(False, "--fresh", help="Re-run every point instead of resuming."),
    dilation: str = option(DILATION, "sweep"),
    dry_run: bool = option(DRY_RUN, "sweep"),
    reuse: bool = typer.Option(
        True,
        "--reuse/--no-reuse",
        help="Run points that share a network on one cluster, re-shaped between "
        "them, with every point's workers forked from one server that imported torch once (--no-reuse: a "
        "fresh cluster and a fresh fork server for every point).",
    ),
    schedule: Path | None = RUN["schedule"].option(),
) -> None:
    """Run a grid of bandwidth x replicator x nodes x delay x network; resumable; writes summary.csv and a report."""

    overrides = {
        **_network_overrides(network),
        "grid.replicator": _csv(replicator) if replicator else None,
        "grid.shard": _csv(shard) if shard else None,
        "steps": steps,
        "warmup": warmup,
        **{f"workload.{k}": v for k, v in work_settings.items()},
        **{f"replicator.{k}": v for k, v in rep_settings.items()},
        **run_settings,
        "calibrate": calibrate,
        "name": name,
        "schedule": str(schedule.resolve()) if schedule else None,
    }
    if calibration is not None and not calibration.is_file():
        raise UserError(f"--calibration: {str(calibration)!r} is not a file")
    scenario = _scenario(scenario_file, overrides)
    dilation_factor(dilation)  # bad input: one line, before any point runs
    check_delay_line_env()
    folder = out or Path("reports/sweeps") / scenario.name
    try:  # the scenario is valid; the folder its runs go to is checked here
        plan = grid_points(scenario, folder.resolve() / "runs", names={"out_dir": "--out"})
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    check_host_fit([p.config for p in plan])
    if not dry_run:  # a dry run imports no python: workload (it only lists the points)
        check_workload(scenario.workload, max(p.config.cluster.nodes for p in plan))
    known = [p.config for p in plan if not dry_run or p.config.workload.kind != "python"]  # shapes known unbuilt
    check_settings(known, f"{scenario_file or 'scenario'}: replicator.")
    if not dry_run:
        check_capture_room([p.config for p in plan])
    if dry_run:
        for p in plan:
            print(f"{p.key}  {p.label}")
        return
    _run(scenario, plan, folder, calibration, fresh, dilation, reuse)


def _run(
    scenario, plan, folder: Path, calibration: Path | None, fresh: bool, dilation: str = "auto", reuse: bool = True
) -> None:

    require_privileges()
    require_torch("sweep")
    make_output_folder(folder, "--out")
    try:
        with sweep_lock(folder):
            _run_held(scenario, plan, folder, calibration, fresh, dilation, reuse)
    except SweepBusy as exc:
        raise UserError(f"--out: {exc}") from None


def _run_held(
    scenario, plan, folder: Path, calibration: Path | None, fresh: bool, dilation: str, reuse: bool = True
) -> None:
    """The sweep proper, while this process holds the folder's lock."""

    with Launcher() as launcher:  # the fork server: it imports torch once for the calibration and every point
        if plan:
            launcher.start_server(plan[0].config.threads)
        _sweep_with(scenario, plan, folder, calibration, fresh, dilation, reuse, launcher)


def _sweep_with(
    scenario, plan, folder: Path, calibration: Path | None, fresh: bool, dilation: str, reuse: bool, launcher
) -> None:
    """Calibrate, run the points, write the report: every process forked by ``launcher``'s server."""

    try:
        host_calib = sweep_calibration(
            scenario,
            folder,
            calibration,
            fresh,
            on_measure=lambda p: console.print(f"measuring this host's model constants (a few seconds) into {p}"),
            replicators=[p.config.replicator for p in plan],
            fork=launcher.forker(plan[0].config.threads) if plan else None,
        )
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None
    calib, calib_path = host_calib.calibration, host_calib.path
    write_sweep_json(folder, scenario, calib, calib_path)
    try:
        done = set() if fresh else done_keys(read_summary(folder), folder)
    except BadInput as exc:  # a damaged summary.csv from an earlier sweep: one line, nothing run
        raise UserError(f"--out: {printable(exc)} (--fresh starts the sweep over)") from None
    todo = [p for p in plan if p.key not in done]
    per_point = scenario.warmup + scenario.steps
    console.print(
        f"sweep {scenario.name}: {len(plan)} points, {len(plan) - len(todo)} already done, "
        f"calibration: {calib.source} ({calib_path})"
    )
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("sweep", total=len(todo) * per_point)
        finished = {"points": 0}

        def step_progress(point, done_steps: int, _total: int) -> None:
            bar.update(
                task,
                completed=finished["points"] * per_point + min(done_steps, per_point),
                description=f"[{finished['points'] + 1}/{len(todo)}] {point.label}",
            )

        def point_done(point, status: str) -> None:
            finished["points"] += 1
            bar.update(task, completed=finished["points"] * per_point)
            console.print(f"{point.label}: {status}")

        outcome = run_sweep(
            plan,
            folder,
            host_calib,
            fresh=fresh,
            progress=step_progress,
            on_point_done=point_done,
            dilation=dilation,
            reuse=reuse,
            launcher=launcher,
        )
    report = generate_report(folder)
    console.print(f"ran {outcome.ran}, skipped {outcome.skipped} (done earlier); report: {report.markdown}")
    for line in report.accuracy_lines() + report.target_lines():
        print(line)
    if outcome.interrupted:
        console.print("[yellow]interrupted[/]: run the same command again to resume")
        raise typer.Exit(130)
    if outcome.failed:
        console.print(f"[red]{len(outcome.failed)} point(s) failed[/]: " + "; ".join(outcome.failed))
        raise typer.Exit(1)
