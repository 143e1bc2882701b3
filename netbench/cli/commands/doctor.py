"""`netbench doctor`: what this host supports, and what each missing piece disables."""

from __future__ import annotations

import json
import os
import shutil

from rich.table import Table

from netbench.capture.tcpdump import unavailable_reason
from netbench.cli.json_option import JSON
from netbench.cli.options import option
from netbench.cli.privileges import require_privileges
from netbench.emulation import delayline_native
from netbench.emulation.capabilities import detect
from netbench.reports.terminal import make_console
from netbench.rootless import MARKER

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
