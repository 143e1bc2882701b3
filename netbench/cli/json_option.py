"""``--json``, the one option every printing command shares: its own module, so that a command whose --json skips
the tables (``plan``) does not import the console that prints them."""

from __future__ import annotations

from netbench.settings import Override, Setting

__all__ = ["JSON"]

# What a command prints instead of its tables; each command says what its one JSON object holds.
JSON = Setting(
    "--json",
    "as_json",
    "flag",
    "Print one JSON object.",
    False,
    overrides={
        "run": Override("the object is the run's summary", help="Print the summary as one JSON object."),
        "worker": Override("only rank 0 prints", help="Rank 0 prints the summary as one JSON object."),
        "exec": Override(
            "stdout holds the object alone", help="Print one JSON object (the program's output goes to stderr)."
        ),
        "compare": Override("the object is the comparison", help="Print the comparison as JSON instead of a table."),
        "plan": Override(
            "plan's help is lower case, as its other options'", help="print one JSON object instead of tables"
        ),
        "calibrate": Override("the object is the saved calibration", help="print the saved calibration as JSON"),
    },
)
