"""Command-line options generated from the config models, so each option is declared once.

An option that sets a config field (``--topk`` sets ``ReplicatorConfig.topk``) takes its name from
the table below and its default and help text from the field itself (``Field(32, description=...)``);
every command that offers it (`run`, `worker`, `plan`, `calibrate`, `sweep`) builds it here, and the
map from field to option that names the option in a one-line error is derived from the same table.
Commands list the fields they take with :func:`expand`, which writes one typer option per field
into the command's signature (the way torchtitan derives its CLI from its config dataclasses)
and hands the values to the command as one ``{field: value}`` dict.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_args

import typer
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from netbench.cli.options import option as cli_option
from netbench.declarations.config import ReplicatorConfig, command_line_fields
from netbench.declarations.registry import names
from netbench.model.parallelism import PARALLEL_SETTINGS
from netbench.orchestrator.config import RunConfig
from netbench.settings import Override, Setting
from netbench.workloads.config import WorkloadConfig

Settings = dict[str, Any]  # field -> the value given on the command line (or the option's default)
F = TypeVar("F", bound=Callable[..., Any])
# what an option parses -> the unit of its Setting (netbench.settings.UNITS)
_UNITS: dict[type, str] = {bool: "flag", int: "count", float: "factor", Path: "path", str: "text"}


@dataclass(frozen=True)
class FieldOption:
    """One command-line option that sets one field of a config model."""

    model: type[BaseModel] | None  # None: an option that sets no single field (--bw sets both directions)
    field: str
    decls: tuple[str, ...]  # ("--replicator", "-r"), ("--sign/--no-sign",)
    cli_type: Any  # what the option parses: the field's type, or str where the CLI accepts more (a rate, "auto")
    cli_default: Any = PydanticUndefined  # the field's default unless the option has its own (--bucket-mb auto)
    cli_note: str = ""  # what the option accepts beyond the field ("; auto: from the link")
    optional_type: Any = None  # the type when the option may be left out (sweep), if not cli_type
    help: str = ""  # the help of an option without a model field; a field's is its description
    overrides: Mapping[str, Override] = field(default_factory=dict)  # command -> its own default or help, and why

    @property
    def name(self) -> str:
        """The long option, as errors name it: ``--sign`` for ``--sign/--no-sign``."""
        return self.decls[0].split("/")[0]

    @property
    def description(self) -> str:
        """The field's description: the one help text of this option."""
        if self.model is None:
            return self.help
        text = self.model.model_fields[self.field].description
        assert text, f"{self.model.__name__}.{self.field} needs a description: it is the help of {self.name}"
        return text

    @property
    def default(self) -> Any:
        """The option's default: the field's (4 for a float field shows as 4.0, as the option parses it), or the
        option's own.
        """
        if self.cli_default is not PydanticUndefined or self.model is None:
            return self.cli_default
        default = self.model.model_fields[self.field].default
        return float(default) if self.cli_type is float and isinstance(default, int) else default

    @property
    def setting(self) -> Setting:
        """This option as a :class:`~netbench.settings.Setting`: the one kind of declaration the guard tests and the
        settings' help read (its name, field, unit, default, help and per-command overrides)."""
        unit = next(u for t, u in _UNITS.items() if t is self.cli_type or t in get_args(self.cli_type))
        short = next((d for d in self.decls[1:] if not d.startswith("--")), "")
        off = self.decls[0].split("/")[1] if "/" in self.decls[0] else ""
        return Setting(
            self.name, self.field, unit, self.description, self.default, short=short, off=off, overrides=self.overrides
        )

    def option(self, command: str = "", *, optional: bool = False, note: str | None = None) -> Any:
        """The typer option ``command`` takes; ``optional``: default None (unset: the scenario file's value, else the
        field's default).

        ``note``: what this command adds to the option's one meaning (its range, a comma list), in place of
        ``cli_note``. A command with an override shows the override's help (which states its own default) and takes
        its default.
        """
        if optional and command not in self.overrides:
            default = self.model.model_fields[self.field].default if self.model is not None else self.cli_default
            shown = (
                ("on" if default else "off")
                if isinstance(default, bool)
                else f"{default:g}"
                if isinstance(default, (int, float))
                else default
            )
            text = f"{self.description.removesuffix('.')}{note or ''} (default {shown})."
            return typer.Option(None, *self.decls, help=text)
        if command not in self.overrides and note is None:
            note = self.cli_note
        return cli_option(self.setting, command, note=note or "", optional=optional)

    def parameter(self, *, optional: bool = False) -> inspect.Parameter:
        """This option as a keyword parameter named for the field, ready for a command's signature."""
        annotation = self.optional_type or self.cli_type | None if optional else self.cli_type
        return inspect.Parameter(
            self.field, inspect.Parameter.KEYWORD_ONLY, default=self.option(optional=optional), annotation=annotation
        )


def table(*options: FieldOption) -> dict[str, FieldOption]:
    return {o.field: o for o in options}


def _rep(field: str, *decls: str, cli_type: Any, **kw: Any) -> FieldOption:
    return FieldOption(ReplicatorConfig, field, decls or (f"--{field.replace('_', '-')}",), cli_type, **kw)


REPLICATOR = table(
    _rep(
        "name",
        "--replicator",
        "-r",
        cli_type=str,
        overrides={
            "plan": Override(
                why="plan prices several replicators side by side", help=f"{', '.join(names())}; a comma list, or all"
            ),
            "calibrate": Override(
                why="calibrate times every scheme's codec unless told otherwise, or none of them",
                default="all",
                help="schemes whose compression cost to time (comma list, all, or none)",
            ),
            "sweep": Override(
                why="a grid axis: each replicator is a point", help=f"Replicators, comma list ({', '.join(names())})."
            ),
        },
    ),
    _rep("topk", cli_type=int),
    _rep("chunk", cli_type=int),
    _rep("rate", cli_type=float),
    _rep("sync_every", cli_type=int),
    _rep("value_dtype", cli_type=str),
    _rep("index_dtype", cli_type=str),
    _rep("grad_dtype", cli_type=str),
    _rep("rank", cli_type=float),
    _rep("mu", cli_type=float),
    _rep("params_every", cli_type=int),
    _rep("m1_every", cli_type=int),
    _rep("m2_every", cli_type=int),
    _rep("fragments", cli_type=int),
    _rep("fragment_sync_delay", cli_type=int),
    _rep("fragment_update_alpha", cli_type=float),
    _rep("fragment_pattern", cli_type=str),
    _rep("quant_bits", cli_type=int),
    _rep("quant_block", cli_type=int),
    _rep("error_decay", cli_type=float),
    _rep("sign", "--sign/--no-sign", cli_type=bool),
    _rep("freeze_step", cli_type=int),
    _rep("var_freeze_step", cli_type=int),
    _rep("var_update_scaler", cli_type=int),
    _rep("local_step_scaler", cli_type=int),
    _rep("local_step_clipper", cli_type=int),
    _rep("lr", cli_type=float),
    _rep("bucket_mb", cli_type=str, cli_default="auto", cli_note="; auto: from the link", optional_type=float),
    _rep("overlap_backward", "--overlap-backward/--no-overlap-backward", cli_type=bool),
    _rep("optimizer", cli_type=str),
)
# The replicator settings a training command (run, worker, sweep) takes: derived from ReplicatorConfig's roles.
TRAINING_REPLICATOR_FIELDS = command_line_fields()
assert set(TRAINING_REPLICATOR_FIELDS) <= set(REPLICATOR), "a ReplicatorConfig setting has no option"
WORKLOAD = table(
    FieldOption(WorkloadConfig, "kind", ("--workload", "-w"), str),
    FieldOption(
        WorkloadConfig,
        "shapes",
        ("--shapes",),
        str,
        overrides={
            "plan": Override(
                why="plan takes any preset or file, or --params in its place",
                default=None,
                help="shapes preset (gpt2-small, gpt2-small:blocks=2, llama-7b, llama:...) or JSON file [default "
                "gpt2-small:blocks=2]",
            ),
            "calibrate": Override(
                why="calibrate times the codecs on these shapes, not a workload",
                help="shapes preset for the compression timing",
            ),
        },
    ),
    FieldOption(
        WorkloadConfig,
        "compute_ms",
        ("--compute-ms",),
        float,
        overrides={
            "plan": Override(
                why="the model's compute time per step (none unless given), not the shapes workload's stand-in",
                default=0.0,
                help="forward + backward time per step",
            )
        },
    ),
)
RUN = table(
    FieldOption(
        RunConfig,
        "steps",
        ("--steps",),
        int,
        overrides={
            "calibrate": Override(
                why="a codec's cost settles within a few steps",
                default=3,
                help="timed steps per scheme (whole sync periods for periodic ones)",
            ),
            "sweep": Override(
                why="a sweep runs many points: the scenario's default is shorter",
                help="Measured steps per point (default 10).",
            ),
        },
    ),
    FieldOption(
        RunConfig,
        "warmup_steps",
        ("--warmup",),
        int,
        overrides={
            "exec": Override(
                why="the user's program records its own steps with netbench.step()",
                default=1,
                help="Steps recorded with netbench.step() left out of the summary.",
            ),
            "sweep": Override(why="the scenario's default per point", help="Warm-up steps per point (default 2)."),
        },
    ),
    FieldOption(
        RunConfig,
        "timeout_s",
        ("--timeout",),
        float | None,
        overrides={
            "exec": Override(
                why="exec bounds the user's program as a whole, not each collective",
                help="Stop COMMAND on every node after this many seconds (exit 124).",
            )
        },
    ),
    FieldOption(RunConfig, "capture", ("--capture/--no-capture",), bool),
    FieldOption(RunConfig, "keep_pcap", ("--pcap",), bool),
    FieldOption(RunConfig, "trace", ("--trace/--no-trace",), bool),
    FieldOption(
        RunConfig,
        "out_dir",
        ("--out",),
        Path,
        overrides={
            "calibrate": Override(
                why="calibrate writes one file, found by plan and run in its default place",
                default=None,
                help="where to save [default $NETBENCH_CALIBRATION, else this host's cache entry]",
            ),
            "sweep": Override(
                why="a sweep keeps its points in one folder of its own",
                help="Sweep folder (default reports/sweeps/NAME).",
            ),
        },
    ),
    FieldOption(
        RunConfig,
        "threads",
        ("--threads",),
        int,
        overrides={
            "exec": Override(
                why="exec sets the user's program's OpenMP threads, not torch's in netbench's workers",
                help="OMP_NUM_THREADS for every node's program.",
            )
        },
    ),
    FieldOption(RunConfig, "gpus_per_node", ("--gpus-per-node", "-G"), int),
    FieldOption(
        RunConfig, "intra_bw_bps", ("--intra-bw",), str | None
    ),  # tc units, parsed by sharding_options.intra_rate
    FieldOption(RunConfig, "shard_within", ("--shard-within",), str),
    FieldOption(
        RunConfig,
        "shard",
        ("--shard",),
        str,
        overrides={
            "plan": Override(
                why="plan prices every sharding on a GPU layout (zero1 and zero2 too), run trains zero3 and hsdp",
                help=PARALLEL_SETTINGS["shard"].help,
            ),
            "sweep": Override(
                why="a sweep's option is an axis of its grid: one point per sharding listed",
                help="Shard the parameters too, as netbench run --shard does (none, zero3 or fsdp, hsdp); a comma "
                "list, one point per value [default none, or the scenario's grid.shard].",
            ),
        },
    ),
    FieldOption(RunConfig, "schedule", ("--schedule",), Path | None),  # a file, read by cli/schedule_option.py
    FieldOption(RunConfig, "compression", ("--compression",), str | None),  # 1/16, 0.0625 or 6.25%
)


def option_names(table: Mapping[str, FieldOption], prefix: str = "") -> dict[str, str]:
    """Field (``prefix`` + name) -> option, for one-line errors that name what the user typed."""
    return {prefix + field: o.name for field, o in table.items()}


@dataclass(frozen=True)
class Group:
    """The options of some fields of one table, written into a command's signature in place of one parameter."""

    table: Mapping[str, FieldOption]
    fields: tuple[str, ...]
    optional: bool = False

    def parameters(self) -> list[inspect.Parameter]:
        return [self.table[f].parameter(optional=self.optional) for f in self.fields]


def group(table: Mapping[str, FieldOption], *fields: str, optional: bool = False) -> Group:
    unknown = [f for f in fields if f not in table]
    assert not unknown, f"no option for {unknown}"
    return Group(table, fields, optional)


class _Placeholder:
    """Default of a parameter that :func:`expand` replaces; never seen by the command."""

    def __repr__(self) -> str:
        return "FROM_FIELDS"


FROM_FIELDS: Any = _Placeholder()


def expand(**groups: Any) -> Callable[[F], F]:
    """Replace each parameter named in ``groups`` (``rep: Settings = FROM_FIELDS``) by its group's options, in place.

    The command then receives that parameter as ``{field: value}``, in the group's order, and typer sees
    one option per field (``--topk``, ``--chunk``, ...) where the parameter stood.
    """

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        missing = set(groups) - set(signature.parameters)
        assert not missing, f"{command.__name__} has no parameter {missing}"
        params: list[inspect.Parameter] = []
        for p in signature.parameters.values():
            params.extend(
                groups[p.name].parameters() if p.name in groups else [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)]
            )
        names = [p.name for p in params]
        assert len(names) == len(set(names)), f"{command.__name__}: an option is listed twice: {names}"

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            for name, g in groups.items():
                kwargs[name] = {f: kwargs.pop(f) for f in g.fields}
            return command(**kwargs)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        wrapper.option_groups = groups  # type: ignore[attr-defined]  # for tests/test_cli_options.py
        return wrapper  # type: ignore[return-value]

    return decorate
