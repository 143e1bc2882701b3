"""The validated RunConfig of `run`, `worker` and `exec`, and the run-wide settings they parse with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic

from netbench.calibrate.hostcache import host_calibration
from netbench.capture.space import NoRoom, check_room
from netbench.cli.errors import UserError
from netbench.cli.fields import REPLICATOR, RUN, option_names
from netbench.declarations.spec import SettingError
from netbench.emulation.delayline_native import wanted
from netbench.model.calibration import CalibrationError
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.host_fit import HostUnfit, check_host
from netbench.orchestrator.run.dilation import parse_dilation
from netbench.orchestrator.run.resolve import check_payload, resolve
from netbench.reports.terminal import make_console
from netbench.validation import as_option, one_line

console = make_console(stderr=True)


def build_run_config(**settings: Any):
    """``RunConfig(**settings)``, resolved (:func:`netbench.orchestrator.run.resolve.resolve`) and checked against this
    host; a bad value is one UserError line naming its option."""

    try:
        config = RunConfig(**settings)
        check_payload(config)
        config = resolve(config)
    except pydantic.ValidationError as exc:
        raise UserError(one_line(exc, option_names(RUN), options=True)) from None
    except SettingError as exc:  # a setting the workload's shapes rule out
        raise UserError(f"{setting_option(exc.field)}: {exc}") from None
    except ValueError as exc:  # the replicator's payload formula rejects the workload's shapes
        raise UserError(f"--bucket-mb: {exc}") from None
    check_host_fit([config])
    check_delay_line_env()
    return config


def setting_option(field: str) -> str:
    """The option that sets replicator ``field`` (``fragments`` -> ``--fragments``)."""
    return option_names(REPLICATOR).get(field, as_option(field))


def check_settings(runs: list, where: str) -> None:
    """A UserError naming ``where`` + the field when the workload of one of ``runs`` (RunConfigs) rules out a
    replicator setting (Streaming DiLoCo's fragments that do not divide its layers)."""

    for run in runs:
        try:
            check_payload(run)
        except SettingError as exc:
            raise UserError(f"{where}{exc.field}: {exc} [replicator {run.replicator.name}]") from None


def check_host_fit(runs: list) -> None:
    """A UserError naming the option when this host cannot hold one of ``runs`` (RunConfigs): its memory, a writable
    and safe ``--out`` (netbench.orchestrator.host_fit; a run checks the same when it is prepared)."""

    for run in runs:
        try:
            check_host(run)
        except HostUnfit as exc:
            raise UserError(exc.named(option_names(RUN))) from None


def check_capture_room(runs: list) -> None:
    """A UserError when the run folder's filesystem cannot hold the capture of ``runs`` (RunConfigs, run in turn)."""

    try:
        check_room(runs)
    except NoRoom as exc:
        raise UserError(str(exc)) from None


def check_delay_line_env() -> None:
    """A bad ``$NETBENCH_DELAY_LINE`` is bad input: one line before anything is built (a delayed run would stop at
    it).
    """

    try:
        wanted()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def dilation_factor(text: str) -> float | None:
    """``--dilation`` as a factor (None: auto, resolved from the run's prediction); bad input is a UserError."""

    try:
        return parse_dilation(text)
    except ValueError as exc:
        raise UserError(f"--dilation: {exc}") from None


def run_calibration(explicit: Path | None, quiet: bool = False, replicators=()):
    """This host's calibration for a run or sweep, measured first (with a line on stderr) when the cache has none
    or lacks the encode/decode cost of ``replicators``' settings."""

    def told(path: Path) -> None:
        if not quiet:
            console.print(f"measuring this host's model constants once (a few seconds), cached in {path}")

    try:
        return host_calibration(explicit, on_measure=told, replicators=replicators)
    except CalibrationError as exc:
        raise UserError(f"--calibration: {exc}") from None
