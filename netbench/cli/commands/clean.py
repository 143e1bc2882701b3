"""`netbench clean`: remove what killed runs left behind (netbench's own only)."""

from __future__ import annotations

import re

import typer

from netbench.cli.errors import UserError
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges
from netbench.emulation.cleanup import clean as do_clean
from netbench.emulation.cleanup import find_leftovers
from netbench.emulation.cleanup import host_qdiscs as clean_host_qdiscs
from netbench.emulation.naming import RegistryError
from netbench.reports.terminal import make_console
from netbench.safe_files import NAME_PATTERN
from netbench.settings import DRY_RUN

console = make_console()


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
        f"{len(found.folders)} temporary folder(s)"
    )
    for name in [*found.namespaces, *map(str, found.folders)]:
        console.print(f"  {name}")
