"""The GitHub Action (action.yml) and the example workflow name only netbench commands and options that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "action.yml"
WORKFLOW = REPO / "examples" / "github" / "netbench.yml"
COMMAND = re.compile(r"(?<![/\w-])netbench[ ]+([a-z][a-z-]*)")
ARGS = re.compile(r"\bargs\+?=\(")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _scripts(doc: dict) -> list[str]:
    steps = doc["runs"]["steps"] if "runs" in doc else [s for job in doc["jobs"].values() for s in job["steps"]]
    return [step["run"] for step in steps if "run" in step]


def _help(command: str) -> str:
    env = {**os.environ, "COLUMNS": "250", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-m", "netbench", command, "--help"], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, f"netbench {command} --help: {done.stderr.strip()}"
    return done.stdout


def _netbench_calls(script: str) -> tuple[set[str], set[str]]:
    """The netbench subcommands a script runs and the --options it passes to them (options of sudo, cp or git
    excluded).
    """
    commands = set(COMMAND.findall(script))
    options = set()
    for line in script.splitlines():
        if COMMAND.search(line):
            options |= set(OPTION.findall(line.split("netbench ", 1)[-1]))
        elif ARGS.search(line):  # arguments gathered in a bash array for the netbench call
            options |= set(OPTION.findall(line[ARGS.search(line).end() :]))
    return commands, options


@pytest.mark.parametrize("path", [ACTION, WORKFLOW], ids=["action.yml", "example workflow"])
def test_every_netbench_command_and_option_named_exists(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    seen = set()
    for script in _scripts(doc):
        commands, options = _netbench_calls(script)
        helps = {c: _help(c) for c in commands}
        for option in options:
            assert any(re.search(rf"{re.escape(option)}\b", text) for text in helps.values()), (
                f"{path.name}: {option} is no option of netbench {', '.join(sorted(commands))}"
            )
        seen |= commands
    if path == ACTION:
        assert {"sweep", "compare", "doctor"} <= seen  # installs, runs a scenario, compares


def test_the_action_is_composite_and_every_input_it_reads_is_declared() -> None:
    doc = yaml.safe_load(ACTION.read_text())
    assert doc["runs"]["using"] == "composite"
    declared = set(doc["inputs"])
    used = set(re.findall(r"inputs\.([a-z-]+)", ACTION.read_text()))
    assert used <= declared, used - declared
    scenario = REPO / doc["inputs"]["scenario"]["default"]
    assert scenario.is_file()
    assert any("upload-artifact" in step.get("uses", "") for step in doc["runs"]["steps"])
    assert any("GITHUB_STEP_SUMMARY" in step.get("run", "") for step in doc["runs"]["steps"])


def test_the_example_workflow_uses_the_action_with_its_inputs() -> None:
    doc = yaml.safe_load(WORKFLOW.read_text())
    inputs = set(yaml.safe_load(ACTION.read_text())["inputs"])
    steps = [s for job in doc["jobs"].values() for s in job["steps"]]
    ours = [s for s in steps if s.get("uses") == "./"]
    assert len(ours) == 1 and set(ours[0].get("with", {})) <= inputs
    chart = next(s for s in steps if "github-action-benchmark" in s.get("uses", ""))
    assert chart["with"]["tool"] == "customSmallerIsBetter"
    assert chart["with"]["output-file-path"] == ours[0]["with"]["benchmark-json"]
