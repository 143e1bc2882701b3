"""What went wrong in a finished run that did not fail it: leftovers of earlier runs and stalled steps."""

from __future__ import annotations

from typing import Any, Protocol

from netbench.reports.terminal import make_console

console = make_console(stderr=True)


class Finished(Protocol):
    """A finished run as `run` and `exec` hold it: its run.json and its summary."""

    run_json: dict[str, Any]
    summary: dict[str, Any]


def report_problems(result: Finished) -> None:
    """Warnings (leftovers of earlier runs) and stalls, one line each, on stderr."""
    for warning in result.run_json.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}")
    stalls = result.summary.get("stalls") or []
    if stalls:
        listed = ", ".join(f"step {s['step']} took {s['seconds']:.1f} s" for s in stalls[:5]) + (
            ", ..." if len(stalls) > 5 else ""
        )
        console.print(
            f"[yellow]stalled:[/] {len(stalls)} step(s) ({listed}; a typical step took {stalls[0]['typical_s']:.2f} s)"
        )
