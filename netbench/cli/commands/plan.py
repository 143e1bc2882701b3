"""``netbench plan``: the command's options read into a :class:`~netbench.planning.PlanRequest`, the plan made by
:func:`netbench.planning.plan`, then printed (``--json``: its document) and drawn.

Every input is validated before anything is computed or measured; a bad value is one line naming the option and
what it accepts, exit 2.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import typer

from netbench import untrusted
from netbench.calibrate.hostcache import host_calibration
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, REPLICATOR, RUN, WORKLOAD, Settings, expand, group
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.replicator_choice import parse_schemes, scheme_settings
from netbench.cli.run_options import bucket_choice
from netbench.emulation.spec import NETWORK
from netbench.emulation.tcpsettings import TCP
from netbench.model.backends import BACKEND_SETTINGS
from netbench.model.calibration import CALIBRATION, Calibration, CalibrationError, read_calibration
from netbench.model.collectives import ALGORITHM
from netbench.model.compute import COMPUTE_SETTINGS
from netbench.model.framing import FRAMING_SETTINGS
from netbench.model.goodput import CHURN_SETTINGS
from netbench.model.nccl_tests import NcclFit
from netbench.model.parallelism import PARALLEL_SETTINGS
from netbench.model.schemes import PLAN_SETTING_FIELDS
from netbench.model.steptime import MAX_PLANNED_WORKERS
from netbench.model.utilization import UTILIZATION_SETTINGS
from netbench.planning import PlanInputError, PlanRequest, plan_inputs
from netbench.planning import plan as make_plan
from netbench.planning.request import OPTION_NAMES, read_nccl_fit
from netbench.topology.graph import MIN_NODES
from netbench.topology.presets import TOPOLOGY
from netbench.validation import one_line

F = TypeVar("F", bound=Callable[..., Any])
# plan's range of --nodes (machines; the same option as run's): a model is not bounded by this host
PLANNED_NODES = (
    f"; one or a comma list, {MIN_NODES}-{MAX_PLANNED_WORKERS} workers in all (a topology file sets its own; the GPU "
    "backends plan one node of --gpus-per-node GPUs too)"
)


def _options(
    shapes: str | None = WORKLOAD["shapes"].option("plan"),
    params: str | None = typer.Option(
        None, "--params", help="parameter count instead of --shapes, e.g. 1.5e9 (synthetic square matrices)"
    ),
    nodes: str | None = option(NETWORK["nodes"], "plan", note=PLANNED_NODES, optional=True),
    bw: str = option(NETWORK["bw"], "plan"),
    up: str | None = option(NETWORK["up"], "plan"),
    down: str | None = option(NETWORK["down"], "plan"),
    delay: str = option(NETWORK["delay"], "plan"),
    replicator: str = REPLICATOR["name"].option("plan"),
    rep_settings: Settings = FROM_FIELDS,
    compute_ms: float = WORKLOAD["compute_ms"].option("plan"),
    gpus_per_node: int = RUN["gpus_per_node"].option(),
    intra_bw: str | None = RUN["intra_bw_bps"].option(
        note="; needed with gloo and --gpus-per-node > 1. With --backend nccl each GPU gets 1/G of it (800gbit over 8 "
        "GPUs: 12.5 GB/s a GPU); leave it out for the accelerator's own NVLink or PCIe per GPU"
    ),
    algorithm: str = option(ALGORITHM, "plan"),
    mtu: int = option(FRAMING_SETTINGS["mtu"], "plan"),
    acks_per_segment: float | None = option(FRAMING_SETTINGS["acks_per_segment"], "plan"),
    calibration: Path | None = option(CALIBRATION, "plan"),
    tcp_cc: str = option(TCP["tcp_cc"], "plan"),
    tcp_wmem_max: int = option(TCP["tcp_wmem_max"], "plan"),
    no_slow_start_after_idle: bool = option(TCP["no_slow_start_after_idle"], "plan"),
    bucket_mb: str = REPLICATOR["bucket_mb"].option(),
    topology: str | None = option(TOPOLOGY["topology"], "plan"),
    sites: int | None = option(TOPOLOGY["sites"], "plan"),
    racks: int | None = option(TOPOLOGY["racks"], "plan"),
    wan_bw: str | None = option(TOPOLOGY["wan_bw"], "plan"),
    wan_delay: str | None = option(TOPOLOGY["wan_delay"], "plan"),
    oversubscription: float | None = option(TOPOLOGY["oversubscription"], "plan"),
    rank_order: str = option(TOPOLOGY["rank_order"], "plan"),
    backend: str = option(BACKEND_SETTINGS["backend"], "plan"),
    accelerator_name: str | None = option(COMPUTE_SETTINGS["accelerator_name"], "plan"),
    mfu: float = option(COMPUTE_SETTINGS["mfu"], "plan"),
    batch: int | None = option(COMPUTE_SETTINGS["batch"], "plan"),
    seq_len: int = option(COMPUTE_SETTINGS["seq_len"], "plan"),
    tokens_per_step: str | None = option(COMPUTE_SETTINGS["tokens_per_step"], "plan"),
    layers: int | None = option(COMPUTE_SETTINGS["layers"], "plan"),
    target_utilization: str | None = option(UTILIZATION_SETTINGS["target_utilization"], "plan"),
    tokens: str | None = option(UTILIZATION_SETTINGS["tokens"], "plan"),
    figure: Path | None = option(UTILIZATION_SETTINGS["figure"], "plan"),
    mtbf: str | None = option(CHURN_SETTINGS["mtbf"], "plan"),
    away: str | None = option(CHURN_SETTINGS["away"], "plan", optional=True),
    churn_for: str | None = option(CHURN_SETTINGS["churn_for"], "plan"),
    churn_seed: str | None = option(CHURN_SETTINGS["churn_seed"], "plan"),
    churn_steps: str | None = option(CHURN_SETTINGS["churn_steps"], "plan"),
    transport: str = option(BACKEND_SETTINGS["transport"], "plan"),
    channels: int | None = option(BACKEND_SETTINGS["channels"], "plan"),
    socket_threads: int = option(BACKEND_SETTINGS["socket_threads"], "plan"),
    socks_per_thread: int = option(BACKEND_SETTINGS["socks_per_thread"], "plan"),
    nics: int | None = option(BACKEND_SETTINGS["nics"], "plan"),
    nic_vendor: str = option(BACKEND_SETTINGS["nic_vendor"], "plan"),
    nccl_calibration: Path | None = option(BACKEND_SETTINGS["nccl_calibration"], "plan"),
    tp: int = option(PARALLEL_SETTINGS["tp"], "plan"),
    pp: int = option(PARALLEL_SETTINGS["pp"], "plan"),
    microbatches: int | None = option(PARALLEL_SETTINGS["microbatches"], "plan"),
    virtual_stages: int = option(PARALLEL_SETTINGS["virtual_stages"], "plan"),
    shard: str = option(PARALLEL_SETTINGS["shard"], "plan"),
    shard_nodes: int | None = option(PARALLEL_SETTINGS["shard_nodes"], "plan"),
    json_out: bool = option(JSON, "plan"),
) -> None:
    """``netbench plan``'s options, as ``--help`` lists them: a signature only, :func:`plan` takes them."""


def _takes(options: Callable[..., None]) -> Callable[[F], F]:
    """Give ``command`` the signature of ``options`` (typer reads its options from there)."""

    def decorate(command: F) -> F:
        signature = inspect.signature(options, eval_str=True)
        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return command

    return decorate


def _calibration(path: Path | None, replicators=()) -> tuple[Calibration, Path]:
    """``--calibration`` as given, else this host's cached calibration (measured first when there is none)."""

    def told(target: Path) -> None:
        print(f"measuring this host's model constants once (a few seconds), cached in {target}", file=sys.stderr)

    try:
        found = host_calibration(path, on_measure=told, replicators=replicators)
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None
    if found.origin == "defaults":
        print(
            "torch is not installed, so this host's constants cannot be measured: the model uses its defaults "
            "(pass --calibration FILE to use constants measured on a host with torch)",
            file=sys.stderr,
        )
    return found.calibration, found.path


def _codec_profile(path: Path | None) -> Calibration | None:
    """A GPU backend's codec profile: ``--calibration FILE`` as given (None: the accelerator's shipped one)."""
    if path is None:
        return None
    try:
        return read_calibration(path)
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None


def _nccl_fit(path: Path | None) -> NcclFit | None:
    """``--nccl-calibration``'s fit of nccl-tests logs, read as untrusted input (one line, never its content)."""
    try:
        return read_nccl_fit(path)
    except untrusted.BadInput as exc:
        raise UserError(f"--nccl-calibration: {exc}") from None
    except pydantic.ValidationError as exc:
        raise UserError(
            one_line(exc, prefix=f"--nccl-calibration: {untrusted.shown_path(path)}: ", echo=False)
            + " (write one with netbench calibrate --from-nccl-tests)"
        ) from None


def _request(given: dict[str, Any], replicator: str, rep_settings: Settings) -> PlanRequest:
    """The options as a validated request; one line naming the option where one is wrong."""
    auto, megabytes = bucket_choice(given.pop("bucket_mb"))
    try:
        request = PlanRequest(**given, bucket_mb=None if auto else megabytes)
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, OPTION_NAMES)) from None
    schemes = parse_schemes(replicator, scheme_settings(**rep_settings))
    # both checked where they are made: the schemes by their settings, the fit as the file's own model
    return request.model_copy(update={"schemes": tuple(schemes), "nccl_fit": _nccl_fit(request.nccl_calibration)})


@expand(
    rep_settings=group(REPLICATOR, *(f for f in PLAN_SETTING_FIELDS if f != "bucket_mb"))  # --bucket-mb: its own
)
@_takes(_options)
def plan(replicator: str, rep_settings: Settings, calibration: Path | None, json_out: bool, **given: Any) -> None:
    """Predict payload, wire bytes, communication and step time per replicator and node count (or network graph)."""
    request = _request(given, replicator, rep_settings)
    try:
        inputs = plan_inputs(request)
        if request.backend == "gloo":
            # the "measuring" line goes to stderr, so --json's stdout stays clean; non-default settings get their own
            # encode/decode cost
            calib, path = _calibration(calibration, replicators=[s.config for s in inputs.schemes])
        else:
            calib, path = _codec_profile(calibration), calibration
        result = make_plan(request, calib, path, inputs)
    except PlanInputError as exc:
        raise UserError(str(exc)) from None
    if result.curves is not None and request.figure is not None:
        from netbench.cli.commands.plan_text import write_figure  # late: the figure's module prints tables too

        write_figure(request.figure, result.curves, result.figure_title)
        result.doc["figure"] = str(request.figure)
    if json_out:
        print(json.dumps(result.doc, indent=2))
        return
    from netbench.cli.commands.plan_text import print_plan  # late: rich's tables; --json prints none

    print_plan(result, request, path)
