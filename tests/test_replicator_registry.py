"""Each replicator is one declaration that the rest of netbench reads; the model and ``plan`` need no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netbench.declarations.config import ReplicatorConfig, former_names
from netbench.declarations.registry import REGISTRY, names, register, spec
from netbench.declarations.shared_settings import GradSettings
from netbench.declarations.spec import ReplicatorSpec
from netbench.model.calibration import cost_settings
from netbench.reports.style import PALETTE, colors

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name.split(".")[0])
sys.meta_path.insert(0, _NoTorch())
"""


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}",
        "NETBENCH_CALIBRATION": str(tmp_path / "absent.json"),
        "COLUMNS": "250",
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )


def test_every_declaration_is_consistent() -> None:
    assert names()[0] == "full" and len(set(names())) == len(names())
    for name in names():
        declared = spec(name)
        assert declared.name == name and declared.summary and declared.collective
        assert set(declared.options) <= set(ReplicatorConfig.model_fields), name
        assert set(declared.cost_settings) <= set(declared.options), name
        assert ":" in declared.codec
    assert len(set(colors().values())) == len(names())


def test_a_name_nobody_declared_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown replicator 'zip' .choose from full, dct"):
        ReplicatorConfig(name="zip")


def _former_names() -> dict[str, dict[str, str]]:
    """Replicator -> {former setting name: the field it names for that replicator}, from the declarations."""
    return {name: former_names(declared.settings) for name, declared in REGISTRY.items()}


def test_a_stored_setting_under_its_former_name_reads_as_the_field_it_names_for_that_replicator() -> None:
    """Stored runs and scenario files carry every setting, some under a name one field had for several replicators
    (``beta``): each replicator reads it as its own field, and one that takes no such field drops it."""
    renamed = _former_names()
    assert {field for names in renamed.values() for field in names.values()} == {"momentum_decay", "beta1"}
    for name in names():
        stored = {k: v for k, v in ReplicatorConfig(name=name).model_dump().items() if k not in ("momentum_decay",)}
        for old, field in renamed[name].items():
            stored.pop(field, None)
            config = ReplicatorConfig.model_validate({**stored, old: 0.5})
            assert getattr(config, field) == 0.5, (name, old)
            assert all(
                getattr(config, other) == ReplicatorConfig.model_fields[other].default
                for other in {"momentum_decay", "beta1"} - {field}
            ), name
            with pytest.raises(ValueError, match=f"{old} is the former name of {field}"):
                ReplicatorConfig(name=name, **{old: 0.5, field: 0.4})
        if not renamed[name]:
            assert ReplicatorConfig.model_validate({**stored, "beta": 0.5}) == ReplicatorConfig.model_validate(stored)


def test_a_declaration_whose_settings_came_after_the_config_is_refused() -> None:
    """A settings class can join the config only while it is composed: registered later, a declaration that reads a
    setting the config lacks would fail at its first run, so it fails here, saying what to do."""

    class LateSettings(GradSettings):
        late_knob: int = 1

    late = ReplicatorSpec(
        name="late", summary="x", collective="x", payload=spec("full").payload, codec="x:y", settings=LateSettings
    )
    with pytest.raises(ValueError, match="without .late_knob.: register it before netbench.declarations.config"):
        register(late)
    assert "late" not in REGISTRY


def test_a_second_declaration_under_a_taken_name_is_refused() -> None:
    clash = ReplicatorSpec(name="full", summary="x", collective="x", payload=spec("full").payload, codec="x:y")
    with pytest.raises(ValueError, match="declared twice"):
        register(clash)
    assert REGISTRY["full"] is not clash


def test_model_and_plan_run_without_torch(tmp_path: Path) -> None:
    code = (
        BLOCK_TORCH
        + """
import importlib, pkgutil
import netbench.model
for module in pkgutil.walk_packages(netbench.model.__path__, "netbench.model."):
    importlib.import_module(module.name)
import netbench.declarations.registry as registry
for name in registry.names():
    registry.spec(name)
sys.argv = ["netbench", "plan", "--nodes", "2,4", "--bw", "100mbit", "--replicator", "all", "--compute-ms", "50",
            "--shapes", "gpt2-small:blocks=1", "--json"]
from netbench.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules)
"""
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert sorted({r["replicator"] for r in rows}) == sorted(names())


def test_plan_without_torch_uses_the_default_constants_and_says_so(tmp_path: Path) -> None:
    """No calibration file and nothing to measure with: plan predicts with the defaults and says why on stderr."""
    code = (
        BLOCK_TORCH
        + """
sys.argv = ["netbench", "plan", "--nodes", "2", "--bw", "100mbit", "-r", "dct", "--json"]
from netbench.cli.entry import main
main()
"""
    )
    env_cache = {"NETBENCH_CALIBRATION": "", "NETBENCH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env_cache},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["calibration"]["source"] == "defaults"
    assert "torch is not installed" in done.stderr


def test_a_training_command_without_torch_is_one_line(tmp_path: Path) -> None:
    code = (
        BLOCK_TORCH
        + """
sys.argv = ["netbench", "run", "--bw", "100mbit", "--steps", "3", "--out", "runs"]
from netbench.cli.entry import main
main()
"""
    )
    done = _python(code, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "netbench: error: run trains with torch, which is not installed (pip install torch; plan works without it)"
    ]
    assert not (tmp_path / "runs").exists()


def test_a_replicator_from_one_module_is_seen_everywhere(tmp_path: Path) -> None:
    """A replicator added by CONTRIBUTING's recipe (tests/toy_replicator.py: a settings class, a declaration, a codec)
    is in the registry, run's help and ``--replicator`` choices, plan, the model's payload, calibration's cost keys,
    the figures' colours and the registry-parametrized tests, whose harness runs its sync on 2 ranks."""
    code = f"""
import io, json, contextlib, sys
sys.path.insert(0, {str(TESTS)!r})
import toy_replicator  # registers it, before the command line is built
from netbench.cli.app import main

def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(list(argv))
        except SystemExit as exc:
            assert not exc.code, exc.code
    return out.getvalue()

from netbench.model.calibration import cost_key, cost_settings
from netbench.declarations.config import ReplicatorConfig, former_names
from netbench.replicators.build import build_replicator
from netbench.declarations.registry import declared_payload
from netbench.reports.style import collective, colors
from netbench.shapes import resolve_shapes
import torch

params = [torch.nn.Parameter(torch.randn(8, 4)), torch.nn.Parameter(torch.randn(4))]
for p in params:
    p.grad = torch.ones_like(p)
stats = build_replicator(params, ReplicatorConfig(name="toy")).step()
shapes = resolve_shapes("gpt2-small:blocks=1")

# The registry-parametrized tests take it as they take every declared replicator: its preset's settings, its sync on
# 2 gloo ranks through their harness (forked: the ranks inherit this process's registration) and their checks.
import test_replicators as checks
from dist_harness import run_ranks
ranks = run_ranks(checks._run_steps, checks.WORLD, checks.CONFIGS["toy"], checks.STEPS, start_method="fork")
checks.check_identical_parameters("toy", ranks)
checks.check_declared_payload("toy", ranks)
print(json.dumps({{
    "help": run("run", "--help"),
    "plan": json.loads(run("plan", "--replicator", "toy,full", "--shapes", "gpt2-small:blocks=1", "--json")),
    "payload": declared_payload(shapes, ReplicatorConfig(name="toy"), 2).bytes_per_step,
    "cost_settings": list(cost_settings("toy")),
    "cost_key": cost_key(ReplicatorConfig(name="toy", grad_dtype="bf16")),
    "colors": colors(),
    "collective": collective("toy"),
    "step_payload": stats.payload_bytes,
    "tested": sorted(checks.CONFIGS),
    "options": ReplicatorConfig.model_fields["grad_dtype"].description,
}}))
"""
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert "toy" in seen["help"]
    assert "/toy: all-reduce dtype" in " ".join(seen["help"].split())  # --grad-dtype names the toy among its takers
    rows = {r["replicator"]: r for r in seen["plan"]["rows"]}
    assert set(rows) == {"toy", "full"}
    assert rows["toy"]["payload_bytes_per_step"] == seen["payload"] == rows["full"]["payload_bytes_per_step"]
    assert seen["cost_settings"] == ["grad_dtype"] and seen["cost_key"] == "toy[grad_dtype=bf16]"
    assert seen["colors"]["toy"] in PALETTE and seen["colors"]["toy"] not in {seen["colors"][n] for n in names()}
    assert seen["collective"] == "toy all-reduce"
    assert seen["step_payload"] == (8 * 4 + 4) * 4  # fp32, as its declaration says
    assert "toy" in seen["tested"] and "toy" in seen["options"]  # the tests' table and its settings' help
    assert "toy" not in REGISTRY and cost_settings("toy") == ()  # registered in that process only
