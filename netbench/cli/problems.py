"""What went wrong in a finished run that did not fail it: leftovers of earlier runs and stalled steps."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from netbench.reports.terminal import make_console

console = make_console(stderr=True)


class Finished(Protocol):
    """A finished run as `run` and `exec` hold it: its run.json and its summary."""

    run_json: dict[str, Any]
    summary: dict[str, Any]


def report_problems(result: Finished) -> None:
    """Warnings (leftovers of earlier runs) and stalls, one line each, on stderr; the slow steps that a change of the
    quorum's members explains (a heal, a re-formation) are counted apart from the stalls nothing explains."""
    for warning in result.run_json.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}")
    found = [s for s in result.summary.get("stalls") or [] if isinstance(s, dict)]
    stalls = [s for s in found if not s.get("membership")]
    if stalls:
        listed = ", ".join(f"step {s['step']} took {s['seconds']:.1f} s" for s in stalls[:5]) + (
            ", ..." if len(stalls) > 5 else ""
        )
        console.print(
            f"[yellow]stalled:[/] {len(stalls)} step(s) ({listed}; a typical step took {stalls[0]['typical_s']:.2f} s)"
        )
    held = Counter(str(s["membership"]) for s in found if s.get("membership"))
    if held:
        kinds = ", ".join(f"{n} {kind}" for kind, n in held.most_common())
        console.print(f"slow steps the changes of members explain: {sum(held.values())} ({kinds})")
