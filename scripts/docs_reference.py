"""The docs site's reference pages, generated from the code at build time (an mkdocs hook).

``reference/cli.md`` walks the click command tree that typer builds from ``netbench.cli.app``: every
command, argument and option with its help and default. ``reference/metrics.md`` lists the summary's
table of metrics (``netbench.rundir.summary.METRICS``), ``reference/steps.md`` steps.csv's columns
(``netbench.rundir.steps_schema.Col``). Nothing here is written by hand, so an option, a metric or a
column cannot be added without appearing in the docs; ``tests/test_docs.py`` checks it.
"""

from __future__ import annotations

from typing import Any

CLI_PAGE = "reference/cli.md"
METRICS_PAGE = "reference/metrics.md"
STEPS_PAGE = "reference/steps.md"


def _text(value: str | None) -> str:
    """One table cell: markdown's table, emphasis and HTML characters escaped, whitespace folded."""
    text = " ".join((value or "").split()).replace("\\", "\\\\")
    for char in "|*_[]":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _default(param: Any) -> str:
    """The default as the help shows it: empty for required parameters and for none at all."""
    if param.required or param.default is None or callable(param.default):
        return ""
    if getattr(param, "is_flag", False) and param.secondary_opts:
        return f"`{param.opts[0] if param.default else param.secondary_opts[0]}`"
    if isinstance(param.default, (list, tuple)):
        return ", ".join(f"`{item}`" for item in param.default) if param.default else ""
    return f"`{param.default}`"


def _names(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`" + (" (required)" if param.required else "")
    names = " / ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    return names + (" (required)" if param.required else "")


def commands() -> dict[str, Any]:
    """Every command of ``netbench``, by name, as click sees it (in the order ``--help`` lists them)."""
    import typer

    from netbench.cli.app import app

    return dict(typer.main.get_command(app).commands)


def cli_page() -> str:
    """Markdown: a section per command with its usage, help and a table of its parameters."""
    lines = [
        "# Command reference",
        "",
        "Generated from the command-line application itself (`netbench COMMAND --help` says the same).",
        "",
    ]
    for name, command in commands().items():
        lines += [f"## netbench {name}", "", " ".join((command.help or "").split()), ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if not params:
            continue
        lines += ["| option | help | default |", "|---|---|---|"]
        lines += [f"| {_names(p)} | {_text(getattr(p, 'help', None))} | {_default(p)} |" for p in params]
        lines.append("")
    return "\n".join(lines)


def metrics_page() -> str:
    """Markdown: every metric of the run summary, in summary.csv's order, with label, unit and where it shows."""
    from netbench.rundir.summary import METRICS

    lines = [
        "# Metric reference",
        "",
        "Generated from the summary's table of metrics, the one declaration that run.json's `summary`, "
        "summary.csv, the terminal table, report.md and the figures read. Byte figures are per node per step; "
        "summary.csv carries the model's value of a metric as `pred_<key>`.",
        "",
        "| key | meaning | unit | summary.csv | steps.csv source | across nodes |",
        "|---|---|---|---|---|---|",
    ]
    units = {"s": "seconds", "B": "bytes", "x": "ratio", "": "", "text": "text", "count": "count"}
    for m in METRICS:
        csv = ", ".join({"measured": f"`{m.key}`", "predicted": f"`pred_{m.key}`"}[c] for c in m.csv)
        lines.append(
            f"| `{m.key}` | {_text(m.label)} | {units[m.unit]} | {csv} | "
            f"{f'`{m.source}`' if m.source else ''} | {m.across or ''} |"
        )
    return "\n".join(lines) + "\n"


def steps_page() -> str:
    """Markdown: every column of steps.csv, in declaration order, with its meaning, type, unit and writers."""
    from netbench.rundir.steps_schema import UNITS, Col

    lines = [
        "# steps.csv reference",
        "",
        "Generated from steps.csv's schema, the one declaration that its writers and every reader use. One row "
        "per node per step, warm-up steps included (`warmup`); times are each node's own. Written by: `worker`, "
        "the training loop of `netbench run` and `netbench worker`; `exec`, `netbench.step()` in a program under "
        "`netbench exec`; `sharded`, a worker sharing its node with others; `capture`, the run writer from the "
        "node's packet capture; `schedule`, the run writer under a link schedule. An optional column may be "
        "empty, and a run's rows carry only the columns its writers write.",
        "",
        "| column | meaning | type | unit | written by | optional |",
        "|---|---|---|---|---|---|",
    ]
    for c in Col:
        writers = ", ".join(f"`{w}`" for w in c.writers)
        lines.append(
            f"| `{c.value}` | {_text(c.meaning)} | {c.kind.__name__} | {UNITS[c.unit]} | {writers} | "
            f"{'yes' if c.optional else ''} |"
        )
    return "\n".join(lines) + "\n"


PAGES = {CLI_PAGE: cli_page, METRICS_PAGE: metrics_page, STEPS_PAGE: steps_page}


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the site (they exist only in the build, never in docs/)."""
    from mkdocs.structure.files import File

    for path, build in PAGES.items():
        files.append(File.generated(config, path, content=build()))
    return files


if __name__ == "__main__":  # print the pages, e.g. to read them without building the site
    import sys

    for path, build in PAGES.items():
        if len(sys.argv) < 2 or sys.argv[1] == path:
            print(build())
