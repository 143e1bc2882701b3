"""`netbench probe`: build a cluster, measure each link's goodput and RTT against what was configured."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from netbench.cli import cluster_options as opt
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, RUN, Settings, expand
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges
from netbench.cli.schedule_option import read_schedule
from netbench.emulation.probe import probe as run_probe
from netbench.reports.terminal import make_console
from netbench.schedule.fits import check_fits
from netbench.schedule.probe import probe_segments
from netbench.units import format_rate

console = make_console()


@expand(network=opt.network_group("probe"))
def probe(
    network: Settings = FROM_FIELDS,
    seconds: float = typer.Option(4.0, "--seconds", min=1.0, max=60.0, help="Goodput measurement time."),
    schedule: Path | None = RUN["schedule"].option(),
    as_json: bool = option(JSON, "probe"),
) -> None:
    """Build a cluster, measure goodput and RTT between two nodes, print configured vs measured (each segment of
    --schedule in turn).
    """

    spec = opt.cluster_spec(network)
    nodes = spec.nodes
    link_schedule = _checked_schedule(schedule, spec)
    require_privileges()
    opt.check_engine(spec)
    if link_schedule is not None:
        return _probe_schedule(spec, link_schedule, seconds, as_json)
    result = run_probe(spec, seconds=seconds)
    if as_json:
        print(json.dumps(result.as_dict()))
        return
    table = Table(title=f"netbench probe: {nodes} nodes, engine {result.delay_engine}")
    for column in ("", "configured", "measured", "ratio"):
        table.add_column(column, justify="right")
    table.add_row(
        "goodput", format_rate(result.configured_bps), format_rate(result.goodput_bps), f"{result.goodput_ratio:.3f}"
    )
    rtt = "n/a" if result.rtt_ms is None else f"{result.rtt_ms:.3f} ms"
    ratio = (
        "" if result.rtt_ms is None or not result.expected_rtt_ms else f"{result.rtt_ms / result.expected_rtt_ms:.3f}"
    )
    table.add_row("RTT", f"{result.expected_rtt_ms:.3f} ms", rtt, ratio)
    console.print(table)
    console.print(f"goodput by {result.goodput_tool}; TCP ceiling at MTU 1500 is 0.956 of the line rate")


def _checked_schedule(path: Path | None, spec):
    """The --schedule file, checked against the cluster (one line, exit 2, before anything is built); None without
    one.
    """

    link_schedule = read_schedule(path)
    if link_schedule is not None:
        try:
            check_fits(link_schedule, spec)
        except ValueError as exc:
            raise UserError(f"--schedule: {exc}") from None
    return link_schedule


def _probe_schedule(spec, link_schedule, seconds: float, as_json: bool) -> None:
    """Each segment's goodput and RTT, as JSON or a table."""

    rows = probe_segments(spec, link_schedule, seconds)
    if as_json:
        print(json.dumps({"segments": rows}))
        return
    table = Table(title=f"netbench probe --schedule {link_schedule.source}: {spec.nodes} nodes")
    for column in ("segment", "configured", "goodput", "ratio", "RTT expected", "RTT"):
        table.add_column(column, justify="right")
    for r in rows:
        good = "link down" if r["goodput_bps"] is None else format_rate(r["goodput_bps"])
        ratio = "" if r["goodput_bps"] is None else f"{r['goodput_bps'] / r['configured_bps']:.3f}"
        rtt = "" if r["rtt_ms"] is None else f"{r['rtt_ms']:.2f} ms"
        table.add_row(r["label"], format_rate(r["configured_bps"]), good, ratio, f"{r['expected_rtt_ms']:.2f} ms", rtt)
    console.print(table)
