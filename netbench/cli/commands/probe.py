"""`netbench doctor`, `probe` and `clean`: the network half of the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import typer
from rich.table import Table

from netbench.capture.tcpdump import unavailable_reason
from netbench.cli import cluster_options as opt
from netbench.cli.errors import UserError
from netbench.cli.fields import FROM_FIELDS, RUN, Settings, expand
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges
from netbench.cli.schedule_option import read_schedule
from netbench.emulation import delayline_native
from netbench.emulation.capabilities import detect
from netbench.emulation.cleanup import clean as do_clean
from netbench.emulation.cleanup import find_leftovers
from netbench.emulation.cleanup import host_qdiscs as clean_host_qdiscs
from netbench.emulation.naming import RegistryError
from netbench.emulation.probe import probe as run_probe
from netbench.reports.terminal import JSON, make_console
from netbench.rootless import MARKER
from netbench.safe_files import NAME_PATTERN
from netbench.schedule.fits import check_fits
from netbench.schedule.probe import probe_segments
from netbench.settings import DRY_RUN
from netbench.units import format_rate

console = make_console()


def doctor(as_json: bool = option(JSON, "doctor")) -> None:
    """What this host supports, and what each missing piece disables."""

    if os.geteuid() != 0:
        require_privileges()  # enter the user namespace so the checks run where netbench would
    caps = detect()
    no_capture = unavailable_reason()
    errors = {**caps.errors, **({"tcpdump": no_capture} if no_capture and shutil.which("tcpdump") else {})}
    if as_json:
        found = {**caps.as_dict(), "tcpdump": no_capture is None, "errors": errors}
        print(json.dumps({**found, "rootless": bool(os.environ.get(MARKER))}))
        return
    table = Table(title="netbench doctor")
    for column in ("feature", "status", "if missing"):
        table.add_column(column)
    capture = ("tcpdump", no_capture is None, "packet capture: wire bytes come from interface counters only")
    for feature, present, disables in [*caps.consequences(), capture]:
        table.add_row(feature, "[green]yes[/]" if present else "[red]no[/]", "" if present else disables)
    console.print(table)
    engine = "netem" if caps.netem else ("delay line" if caps.delay_line else "none (rate shaping only)")
    console.print(f"delay/jitter/loss engine: [bold]{engine}[/]")
    if caps.delay_line:
        console.print(f"delay line: [bold]{_delay_line_build()}[/]")
    for what, err in errors.items():
        console.print(f"[yellow]{what}[/]: {err}")


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


def clean(
    run_ids: list[str] | None = typer.Argument(
        None, metavar="[RUN_ID]...", help="Only these runs (default: every run whose owner is gone)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Also remove runs whose owner process is still alive (never a live worker's host qdisc)."
    ),
    dry_run: bool = option(DRY_RUN, "clean"),
    host_qdiscs: bool = typer.Option(
        False,
        "--host-qdiscs",
        help="Only the host qdiscs that killed `netbench worker`s left "
        "(by their records; plain clean removes them too).",
    ),
) -> None:
    """Remove namespaces, links, qdiscs, rules, processes and delay-line counters left by killed runs (netbench's
    only).
    """

    pattern, what = (
        (NAME_PATTERN, "a worker's --run-id")
        if host_qdiscs
        else (r"[0-9a-f]{6}", "6 hex digits as in netbench-<run_id>-n0 (see `ip netns`)")
    )
    bad = [r for r in run_ids or () if not re.fullmatch(pattern, r)]
    if bad:
        raise UserError(f"RUN_ID: expected {what}, got {bad[0]!r}")
    require_privileges()
    verb = "would remove" if dry_run else "removed"
    try:
        qdiscs = clean_host_qdiscs(dry_run, run_ids or ())
    except RegistryError as exc:
        raise UserError(str(exc)) from None
    for q in qdiscs:
        console.print(f"{verb}: {'qdisc and record' if q.present else 'record'} of run {q.run_id} on {q.iface}")
    if host_qdiscs:
        if not qdiscs:
            console.print("nothing to clean")
        return
    found = find_leftovers(force, run_ids or ()) if dry_run else do_clean(force, run_ids or ())
    if found.empty:
        if not qdiscs:
            console.print("nothing to clean")
        return
    console.print(
        f"{verb}: {len(found.namespaces)} namespace(s) of {len(found.run_ids)} run(s), {len(found.pids)} process(es), "
        f"{len(found.stats_folders)} delay-line counter folder(s)"
    )
    for name in [*found.namespaces, *map(str, found.stats_folders)]:
        console.print(f"  {name}")


def _delay_line_build() -> str:
    """Which delay line a run would start here: the native one (built now if need be) or the Python fallback, and
    why.
    """

    try:
        chosen = delayline_native.choose()
    except (
        ValueError,
        delayline_native.NativeUnavailable,
    ) as exc:  # a delayed run would stop here, before building anything
        return f"none: a delayed run would stop ({exc})"
    return f"native ({chosen.program})" if chosen.program is not None else f"python ({chosen.note})"
