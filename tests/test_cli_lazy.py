"""Commands load their modules when called: `netbench plan` imports none of the emulator's, report's or figures'
heavy libraries, and `netbench --help` still lists every command with its help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from netbench.cli.app import COMMANDS, main

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = REPO / "reports" / "ci" / "calibration.json"
HEAVY = ("pandas", "pyroute2", "matplotlib", "torch", "networkx")
PLAN = ["plan", "--params", "1e8", "--nodes", "4", "-r", "full,dct", "--bw", "10gbit", "--delay", "5ms", "--json"]


def imported_by(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after running ``netbench ARGV`` (its stdout kept aside)."""
    program = (
        "import contextlib, io, json, sys\n"
        "from netbench.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as exc:\n"
        "        assert not exc.code, exc.code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    "extra",
    [["--calibration", str(CALIBRATION)], ["--backend", "nccl", "--accelerator", "h100-sxm"], ["--backend", "ideal"]],
    ids=["gloo", "nccl", "ideal"],
)
def test_plan_imports_no_heavy_library(extra):
    modules = imported_by(PLAN + extra)
    assert "netbench.planning.plan" in modules  # it did plan
    assert not [m for m in HEAVY if m in modules]
    assert not [m for m in modules if m.startswith("netbench.cli.commands.") and "plan" not in m]


def test_app_imports_no_command_module():
    program = "import sys, netbench.cli.app; print([m for m in sys.modules if m.startswith('netbench.cli.commands.')])"
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_help_lists_every_command_with_its_help(capsys):
    main(["--help"])
    out = capsys.readouterr().out
    for name, target, _ in COMMANDS:
        module, function = target.split(":")
        first = __import__(module, fromlist=[function]).__dict__[function].__doc__.split()[0]
        assert any(line.split()[:2] == ["│", name] and first in line for line in out.splitlines()), name


def test_a_command_keeps_its_settings():
    from typer.main import get_command

    from netbench.cli.app import app

    assert get_command(app).commands["exec"].context_settings == {"allow_interspersed_args": False}
    with pytest.raises(KeyError):
        get_command(app).commands["nonesuch"]
