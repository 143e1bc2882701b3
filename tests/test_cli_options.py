"""Each command-line option that sets a config field is declared once, from that field (netbench/cli/fields.py).

These tests read the commands as click sees them (what `--help` prints and what the parser accepts),
so an option declared by hand beside the generated one, or a help text that drifted from the
field's description, fails here rather than in a user's terminal.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main

from netbench.cli import cluster_options, fields
from netbench.cli.app import app

REPO = Path(__file__).resolve().parents[1]
TABLES = {"ReplicatorConfig": fields.REPLICATOR, "WorkloadConfig": fields.WORKLOAD, "RunConfig": fields.RUN}
ALL = [o for table in TABLES.values() for o in table.values()]

# Options that share a field option's name but mean something else in that command, with why. A command's own
# default or help of a field's option is declared as that option's override (netbench/cli/fields.py), not here.
OWN: dict[tuple[str, str], str] = {
    ("plan", "--intra-bw"): "the same field; plan's help adds how --backend nccl divides it among a node's GPUs",
    ("plan", "--steps"): "the same word: the steps of the run plan prices through churn (with --for), as run's "
    "--steps; plan sets no run config, so it lives with the churn settings (model/goodput.py CHURN_SETTINGS)",
    ("plan", "--shard"): "the same word; plan's (model/parallelism.py) prices every sharding on a GPU layout, run's "
    "trains zero3 and hsdp (its Override names plan's help)",
}


def commands() -> dict[str, Any]:
    return dict(typer.main.get_command(app).commands)


def long_name(param: Any) -> str:
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def generated_from(param: Any, command: str = "") -> fields.FieldOption | None:
    """The field option ``param`` of ``command`` was generated from (its declarations, default and help all match, the
    command's override applied), or None."""
    for o in ALL:
        if tuple(param.opts + param.secondary_opts) != tuple(d for decl in o.decls for d in decl.split("/")):
            continue
        for optional in (False, True):
            info = o.option(command, optional=optional)
            if param.help == info.help and param.default == info.default:
                return o
    return None


def test_every_option_maps_to_one_field_with_a_description() -> None:
    names = [o.name for o in ALL]
    assert len(names) == len(set(names)), "two fields share an option name"
    for o in ALL:
        assert o.field in o.model.model_fields, f"{o.name}: {o.model.__name__} has no field {o.field}"
        assert o.description.endswith("."), (
            f"{o.model.__name__}.{o.field}: its description is {o.name}'s help: end it with a period"
        )
    for table in TABLES.values():
        assert fields.option_names(table) == {f: o.name for f, o in table.items()}


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_field_a_command_takes_has_exactly_one_option(command: str) -> None:
    by_field: dict[str, list[str]] = {}
    field_names = {o.name for o in ALL}
    for param in commands()[command].params:
        if not param.opts[0].startswith("-"):
            continue  # an argument
        name = long_name(param)
        source = generated_from(param, command)
        if source is not None:
            by_field.setdefault(f"{source.model.__name__}.{source.field}", []).append(name)
        elif name in field_names:
            assert (command, name) in OWN, (
                f"`netbench {command} {name}` is declared by hand but sets a config field: "
                "take it from netbench/cli/fields.py (or list it in OWN with why it differs)"
            )
    assert all(len(options) == 1 for options in by_field.values()), by_field


def test_every_command_override_of_a_field_option_says_why_and_is_taken() -> None:
    for o in ALL:
        for command, override in o.overrides.items():
            assert override.why and override.help, (o.name, command)
            params = commands()[command].params
            (param,) = [p for p in params if long_name(p) == o.name]
            assert generated_from(param, command) is o, (o.name, command)


def test_run_and_plan_share_the_help_of_every_shared_option() -> None:
    run = {long_name(p): p for p in commands()["run"].params}
    plan = {long_name(p): p for p in commands()["plan"].params}
    shared = [
        name
        for name in run.keys() & plan.keys()
        if ("plan", name) not in OWN and generated_from(run[name]) and generated_from(plan[name])
    ]
    assert {"--topk", "--value-dtype", "--grad-dtype", "--rank", "--bucket-mb"} <= set(shared)
    for name in shared:
        assert run[name].help == plan[name].help, name
        assert run[name].default == plan[name].default, name


def test_value_dtype_help_names_every_replicator_it_applies_to() -> None:
    for command in ("run", "worker", "plan", "calibrate"):
        (param,) = [p for p in commands()[command].params if long_name(p) == "--value-dtype"]
        assert param.help.startswith("dct/random/striding/sparseloco:"), (command, param.help)


def test_error_names_are_options_that_exist() -> None:
    run_options = {o for p in commands()["run"].params for o in p.opts + p.secondary_opts}
    for field, names in cluster_options.OPTION_NAMES.items():
        for name in names.split("/"):
            assert name in run_options, f"ClusterSpec.{field} is reported as {name}, which `netbench run` does not have"
    for o in ALL:
        assert o.name in run_options | {"--sign", "--overlap-backward", "--capture"}


# Long flags netbench's text names that belong to another program: the program, and what netbench does with it.
OTHER_PROGRAMS_FLAGS = {
    "--help": "click's: every command prints its help",
    "--get-server-output": "iperf3: probe reads the receiver's own figures",
    "--immediate-mode": "tcpdump: capture writes packets as they come",
    "--queue-num": "iptables NFQUEUE: the delay line's queue",
    "--queue-bypass": "iptables NFQUEUE: packets pass while no delay line reads the queue",
    "--nproc-per-node": "torchrun: workers per host under `netbench worker`",
    "--rdzv-id": "torchrun: the rendezvous a multi-host run joins",
    "--spec": "python -m netbench.worker: the worker's spec file",
    "--node": "python -m netbench.trace.tcp_sampler: the node it samples",
    "--folder": "python -m netbench.trace.tcp_sampler: where it writes",
    "--interval": "python -m netbench.trace.tcp_sampler: how often it samples",
    "--opt": "a placeholder in a docstring: any option taking a path",
    "--bind": "python -m netbench.worker.lighthouse: the address it listens on",
    "--min-replicas": "python -m netbench.worker.lighthouse: the fewest nodes a quorum holds",
    "--join-timeout-ms": "python -m netbench.worker.lighthouse: its wait for a node heard but not asking",
    "--heartbeat-timeout-ms": "python -m netbench.worker.lighthouse: a node unheard for this long has left",
    "--quorum-tick-ms": "python -m netbench.worker.lighthouse: how often it looks for a quorum",
    "--store-port": "python -m netbench.worker.lighthouse: a group store it also holds",
}


def test_every_option_netbench_text_names_is_declared() -> None:
    """A message, docstring or comment that names ``--x`` names an option some command declares (or another
    program's flag, listed above): a renamed option leaves no message pointing at the old name."""
    declared = {o for c in commands().values() for p in c.params for o in p.opts + p.secondary_opts}
    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
    unknown = [
        f"{path.relative_to(REPO)}:{number}: {name}"
        for path in sorted((REPO / "netbench").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for name in flag.findall(line)
        if name not in declared and name not in OTHER_PROGRAMS_FLAGS
    ]
    assert not unknown, "options no command declares:\n" + "\n".join(unknown)
    assert not set(OTHER_PROGRAMS_FLAGS) & declared, (
        "a listed program's flag is now netbench's own: drop it from the list"
    )


def test_scheme_settings_are_replicator_config_fields() -> None:
    from netbench.declarations.config import ReplicatorConfig
    from netbench.model.schemes import SchemeSettings

    for name, info in SchemeSettings.model_fields.items():
        original = ReplicatorConfig.model_fields[name]
        assert (info.annotation, info.default, info.metadata) == (
            original.annotation,
            original.default,
            original.metadata,
        ), name


def test_no_cli_module_imports_the_app_or_a_private_name() -> None:
    for path in Path(fields.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("netbench"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {node.module}.{private[0]}"
                if path.name not in ("app.py", "entry.py"):  # entry.py: the console script calls app.main
                    assert node.module != "netbench.cli.app", (
                        f"{path.name} imports the app: commands register in app.py"
                    )


@pytest.mark.skipif(shutil.which("netbench") is None, reason="the netbench console script is not installed")
def test_console_script_help_and_errors_come_from_the_fields(tmp_path: Path) -> None:
    from netbench.declarations.config import ReplicatorConfig

    env = {**os.environ, "COLUMNS": "400", "NETBENCH_CALIBRATION": str(tmp_path / "calibration.json")}
    shown = subprocess.run(["netbench", "plan", "--help"], capture_output=True, text=True, env=env, check=True).stdout
    assert ReplicatorConfig.model_fields["value_dtype"].description in shown
    bad = subprocess.run(["netbench", "plan", "--value-dtype", "fp8"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--value-dtype" in bad.stderr, bad.stderr


# ---- every long option declared once: a Setting, or a config field's option, or one hand declaration --------------

# Long options still declared by hand in more than one place, with how many: each is one meaning written out again.
# The count may only fall; a new second declaration fails test_no_option_is_declared_twice_by_hand.
HAND_DECLARED_AGAIN: dict[str, int] = {}


def all_settings() -> dict[str, Any]:
    """Long option -> its Setting (netbench/settings.py), wherever it is declared: a config field's option as the
    Setting it renders (``FieldOption.setting``)."""
    from netbench.cli.json_option import JSON
    from netbench.model.backends import BACKEND_SETTINGS
    from netbench.model.calibration import CALIBRATION
    from netbench.model.collectives import ALGORITHM
    from netbench.model.compute import COMPUTE_SETTINGS
    from netbench.model.framing import FRAMING_SETTINGS
    from netbench.model.utilization import UTILIZATION_SETTINGS
    from netbench.orchestrator.run.dilation import DILATION
    from netbench.settings import DRY_RUN

    tables = [
        *cluster_options.CLUSTER_SETTINGS,
        BACKEND_SETTINGS,
        COMPUTE_SETTINGS,
        FRAMING_SETTINGS,
        UTILIZATION_SETTINGS,
        {s.field: s for s in (JSON, CALIBRATION, DILATION, DRY_RUN, ALGORITHM)},
        {o.field: o.setting for o in ALL},
    ]
    return {s.name: s for table in tables for s in table.values()}


def hand_declarations() -> dict[str, list[str]]:
    """Long option -> the files whose ``typer.Option(...)``/``typer.Argument(...)`` name it as a literal."""
    found: dict[str, list[str]] = {}
    for path in sorted(Path("netbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            func = getattr(node, "func", None)
            if not (
                isinstance(node, ast.Call)
                and isinstance(func, ast.Attribute)
                and func.attr in ("Option", "Argument")
                and getattr(func.value, "id", "") == "typer"
            ):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    for name in arg.value.split("/"):
                        found.setdefault(name, []).append(str(path))
    return found


def declared_settings() -> dict[str, Any]:
    """Long option -> its one declaration: a Setting of netbench/settings.py's kind, or a config field's option."""
    return {**{o.name: o for o in ALL}, **all_settings()}


def test_a_setting_is_never_declared_by_hand() -> None:
    again = sorted(all_settings().keys() & hand_declarations().keys())
    assert not again, f"{again}: declared as a Setting; render it with netbench/cli/options.py instead"


def test_a_field_option_is_declared_by_hand_only_where_it_means_something_else() -> None:
    by_hand = hand_declarations()
    fields_named = {o.name for o in ALL}
    for name in fields_named & by_hand.keys():
        commands_with_own = {c for c, n in OWN if n == name}
        assert commands_with_own, f"{name} sets a config field and is declared by hand in {by_hand[name]}"


def test_no_option_is_declared_twice_by_hand() -> None:
    declared = declared_settings()
    for name, files in hand_declarations().items():
        if name in declared:
            continue  # an OWN meaning of a declared option: the test above
        assert len(files) <= HAND_DECLARED_AGAIN.get(name, 1), (
            f"{name} is declared by hand {len(files)} times ({sorted(set(files))}): declare it once as a Setting"
        )


@pytest.mark.parametrize("command", sorted(commands()))
def test_each_setting_has_its_declared_default_and_help_in_every_command(command: str) -> None:
    from rich.markup import escape

    settings = all_settings()
    for param in commands()[command].params:
        setting = settings.get(long_name(param))
        if setting is None:
            continue
        override = setting.overrides.get(command)
        own = override.help if override is not None and override.help else setting.help
        assert escape(own.removesuffix(".")) in param.help, (command, setting.name)
        expected = {None, False} if param.default in (None, False) else {setting.default_for(command)}
        assert param.default in expected, (command, setting.name, param.default)
