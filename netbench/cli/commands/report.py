"""`netbench report`: a sweep's report regenerated from its folder, or one run's measurement beside the model."""

from __future__ import annotations

from pathlib import Path

import typer

from netbench.cli.commands.exec import nodes_table
from netbench.cli.errors import UserError, make_output_folder
from netbench.cli.options import option
from netbench.model.calibration import CALIBRATION, CalibrationError
from netbench.orchestrator.sweep.repredict import recorded_calibration, repredict
from netbench.reports.escape import for_terminal, printable
from netbench.reports.report import generate_report
from netbench.reports.terminal import make_console, print_summary
from netbench.rundir.layout import RunDir
from netbench.rundir.runjson import read_run_doc
from netbench.rundir.sweepdir import is_sweep
from netbench.untrusted import BadInput

console = make_console(stderr=True)


def report(
    folder: Path = typer.Argument(
        ..., help="Sweep folder (holds summary.csv), or one run's directory (holds run.json)."
    ),
    calibration: Path | None = option(CALIBRATION, "report"),
    target_loss: float | None = typer.Option(
        None, "--target-loss", help="Loss for the time-to-target table (default: the worst replicator's final loss)."
    ),
) -> None:
    """Regenerate a sweep's report.md, report.html and plots from its folder, or show one run's measurement beside the
    model.
    """

    try:
        if RunDir(folder).written and not is_sweep(folder):
            _run_report(folder, calibration)
            return
        if not is_sweep(folder):
            raise UserError(f"{folder}: no summary.csv here (is it a sweep folder?)")
        make_output_folder(folder, "FOLDER")  # report.md and the figures are written there
        if calibration is not None:
            if not calibration.is_file():
                raise UserError(f"--calibration: {str(calibration)!r} is not a file")
            repredict(folder, calibration)
        recorded_calibration(folder)  # what the stored predictions came from: a damaged record is bad input
        result = generate_report(folder, target_loss)
    except (BadInput, CalibrationError) as exc:  # a folder's files are input: a damaged or crafted one is one line
        raise UserError(printable(exc)) from None
    console.print(f"report: {for_terminal(result.markdown)} ({result.html.name})")
    for line in result.accuracy_lines() + result.target_lines():
        print(printable(line))


def _run_report(run_dir: Path, calibration: Path | None) -> None:
    """One run (`netbench run` or `netbench worker`): its summary table, measured beside the prediction made when it
    ran.
    """

    if calibration is not None:
        raise UserError(
            "--calibration re-predicts sweep folders; a run directory keeps the prediction made when it ran"
        )
    make_output_folder(run_dir, "RUN_DIR")  # its figures are written there: a folder others may write is refused
    doc = read_run_doc(run_dir)
    summary = doc.summary.model_dump(exclude_none=True)
    launcher = doc.launcher or "netbench run"
    if (
        doc.exec is not None
    ):  # `netbench exec`: the per-node table first; the step table when the program recorded steps
        nodes = [
            {**n.model_dump(), "stopped_by": for_terminal(n.stopped_by) if n.stopped_by else None}
            for n in doc.exec.nodes
        ]
        make_console().print(
            nodes_table(nodes, for_terminal(f"netbench exec {doc.summary.run_id}: {' '.join(doc.exec.command)}"))
        )
    if doc.exec is None or summary.get("steps_measured"):
        print_summary(summary, "netbench worker" if launcher == "torchrun" else launcher)
    if summary.get("prediction_error"):
        console.print(f"model: {for_terminal(summary['prediction_error'])}")
    from netbench.reports.schedule_figure import (  # late: keeps matplotlib off this module's import
        schedule_figure,
        segment_lines,
    )  # late: keeps matplotlib off this module's import

    for line in segment_lines(summary):
        print(printable(line))
    drawn = schedule_figure(run_dir, summary, run_dir / "schedule.png")  # step time over the link schedule
    if drawn is not None:
        console.print(f"figure: {for_terminal(str(drawn))}")
    from netbench.reports.timeline import timeline_figure  # late: keeps matplotlib off this module's import

    try:
        figure = timeline_figure(run_dir, run_dir / "timeline.png")  # the median and slowest step, from trace.json
    except BadInput as exc:
        figure = None
        console.print(f"timeline: not drawn ({for_terminal(exc)})")
    if figure is not None:
        console.print(
            f"timeline: {for_terminal(str(figure))} (trace: {for_terminal(str(figure.with_name('trace.json')))})"
        )
    if doc.status != "ok":
        console.print(f"[red]run failed:[/] {for_terminal(doc.reason)}")
