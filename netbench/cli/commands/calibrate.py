"""`netbench calibrate`: measure this host's constants for the model, or fit NCCL's from nccl-tests logs."""

from __future__ import annotations

import sys
from pathlib import Path

import pydantic
import typer
from rich.table import Table

from netbench.calibrate import measure as measuring
from netbench.calibrate.hostcache import cache_path
from netbench.calibrate.measure import MeasureOptions
from netbench.cli.commands.calibrate_nccl import calibrate_from_nccl_tests, checked_output, cluster_hardware
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, REPLICATOR, RUN, WORKLOAD, Settings, expand, group
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.replicator_choice import parse_schemes, scheme_settings
from netbench.model.backends import BACKEND_SETTINGS
from netbench.model.calibration import default_path, save_calibration
from netbench.model.compute import COMPUTE_SETTINGS
from netbench.model.framing import FRAMING_SETTINGS
from netbench.model.nccl_fit import FIT_SETTINGS
from netbench.model.schemes import CALIBRATE_SETTING_FIELDS
from netbench.reports.terminal import make_console
from netbench.shapes import ShapeError, resolve_shapes
from netbench.units import format_rate, format_time
from netbench.validation import one_line


@expand(rep_settings=group(REPLICATOR, *CALIBRATE_SETTING_FIELDS))
def calibrate(
    out: Path | None = RUN["out_dir"].option("calibrate"),
    iters: int = typer.Option(400, "--iters", help="tiny collectives timed per kind (>= 25)"),
    shapes: str = WORKLOAD["shapes"].option("calibrate"),
    replicator: str = REPLICATOR["name"].option("calibrate"),
    steps: int = RUN["steps"].option("calibrate"),
    rep_settings: Settings = FROM_FIELDS,
    acks_per_segment: float = option(FRAMING_SETTINGS["acks_per_segment"], "calibrate"),
    from_nccl_tests: list[Path] | None = typer.Option(
        None,
        "--from-nccl-tests",
        help="fit NCCL's latency and bandwidth terms to nccl-tests output instead (all_reduce_perf, all_gather_perf, "
        "reduce_scatter_perf; repeat the option for several logs) and write them to --out for plan --nccl-calibration",
    ),
    collective: str | None = typer.Option(
        None, "--collective", help="with --from-nccl-tests: the test of a log that does not name it (all_reduce...)"
    ),
    accelerator_name: str | None = option(COMPUTE_SETTINGS["accelerator_name"], "calibrate"),
    nics: int | None = option(BACKEND_SETTINGS["nics"], "calibrate"),
    nic_bw: str | None = option(FIT_SETTINGS["nic_bw"], "calibrate"),
    transport: str = option(BACKEND_SETTINGS["transport"], "calibrate"),
    json_out: bool = option(JSON, "calibrate"),
) -> None:
    """Measure this host's per-message software overhead, loopback bandwidth and compression costs."""
    if from_nccl_tests:
        hardware = cluster_hardware(accelerator_name, nics, nic_bw, transport)
        calibrate_from_nccl_tests(from_nccl_tests, collective, out, json_out, hardware)
        return
    if accelerator_name or nics or nic_bw:
        raise UserError("--accelerator, --nics, --nic-bw: describe the cluster of nccl-tests logs (--from-nccl-tests)")
    if collective is not None:
        raise UserError("--collective: names the test of an nccl-tests log (with --from-nccl-tests)")

    try:
        resolve_shapes(shapes)
    except ShapeError as exc:
        raise UserError(f"--shapes: {exc}") from None
    settings = scheme_settings(**rep_settings)
    names = [] if replicator.strip().lower() == "none" else [s.name for s in parse_schemes(replicator, settings)]
    try:
        opts = MeasureOptions(
            iters=iters,
            shapes=shapes,
            schemes=tuple(names),
            steps=steps,
            settings=settings,
            acks_per_segment=acks_per_segment,
        )
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, options=True)) from None

    target = checked_output(out or default_path() or cache_path())
    result = measuring.measure(opts)
    saved = save_calibration(result, target)
    if json_out:
        print(result.model_dump_json(indent=2))
        return
    console = make_console()
    table = Table(show_header=True, header_style="bold")
    table.add_column("constant")
    table.add_column("value", justify="right")
    table.add_column("how")
    table.add_row(
        "software overhead / hop (all_reduce)",
        format_time(result.overhead("all_reduce")),
        result.notes.get("software_overhead_s", ""),
    )
    table.add_row(
        "software overhead / hop (all_gather)",
        format_time(result.overhead("all_gather")),
        result.notes.get("software_overhead_by_collective.all_gather", ""),
    )
    table.add_row(
        "loopback bandwidth (reference)",
        format_rate(result.loopback_bandwidth_bps or 0),
        result.notes.get("loopback_bandwidth_bps", ""),
    )
    for name in result.encode_s_per_param:
        cost = (
            f"enc {result.encode_s_per_param.get(name, 0) * 1e9:.3g} + dec "
            f"{result.decode_s_per_param.get(name, 0) * 1e9:.3g} ns/param, "
            f"{(result.encode_s_per_tensor.get(name, 0) + result.decode_s_per_tensor.get(name, 0)) * 1e6:.3g} us/tensor"
        )
        table.add_row(f"compression {name}", cost, result.notes.get(f"compression.{name}", ""))
    for key, note in result.notes.items():
        if key.startswith("compression.") and key.removeprefix("compression.") not in result.encode_s_per_param:
            table.add_row(key, "-", note)
    console.print(table)
    print(f"saved {saved}", file=sys.stderr)
