"""The package's architecture, read from the source alone (AST: nothing is imported, so this takes a second).

Data flows one way: CLI -> orchestrator -> workers -> run directory -> reports. :data:`LAYERS` is that
direction as a table: each part of netbench (a package folder, or a top-level module) and the parts it
may import. ``netbench.model`` is a pure library that ``plan`` can use anywhere, so it imports nothing
from the emulator, the orchestrator, pandas or torch; the emulator and the capture know nothing of each
other; workers import neither; reports read the run directory (the predictions stored there included)
and never the orchestrator or the model. No modules import each other in a circle; a module's private
names (``_name``) stay inside it. Function-level and TYPE_CHECKING imports count too: a lazy import is
still a dependency, only a later one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "netbench"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """``(line, imported module, names)`` for every import statement in ``module`` (relative ones resolved)."""
    path = MODULES[module]
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.append((node.lineno, base, tuple(alias.name for alias in node.names)))
    return out


def _targets(imported: str, names: tuple[str, ...]) -> set[str]:
    """The netbench modules an import runs: ``from a.b import c`` is ``a.b.c`` where that is a module, else ``a.b``."""
    found = {f"{imported}.{name}" for name in names if f"{imported}.{name}" in MODULES}
    if imported in MODULES and (not names or len(found) < len(names)):
        found.add(imported)
    return found


GRAPH: dict[str, set[str]] = {
    module: {t for _, imported, names in _imports(module) for t in _targets(imported, names)} - {module}
    for module in MODULES
}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return found


def _package(module: str) -> str:
    """``netbench.model`` for ``netbench.model.steptime`` (a folder, with or without ``__init__.py``); ``netbench``
    for the top-level modules (``netbench.units``)."""
    folder = MODULES[module].parent
    return "netbench" if folder == PACKAGE else f"netbench.{folder.relative_to(PACKAGE).parts[0]}"


PACKAGES = sorted({_package(m) for m in MODULES})


def test_the_scan_sees_the_package() -> None:
    """Guards the checks below against passing on an empty or misread tree."""
    assert {"netbench.model", "netbench.emulation", "netbench.orchestrator", "netbench.cli"} <= set(PACKAGES)
    assert "netbench.model.steptime" in GRAPH["netbench.model.planner"]
    assert "netbench.model.exchange" in GRAPH["netbench.model.schemes"]


PURE_LIBRARIES = ("netbench.model", "netbench.planning")  # what plan runs on: no emulator, orchestrator, pandas, torch


def test_model_imports_no_emulator_orchestrator_or_pandas() -> None:
    forbidden = ("netbench.emulation", "netbench.orchestrator", "pandas")
    bad = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: imports {imported}"
        for m in MODULES
        if _layer(m) in PURE_LIBRARIES
        for line, imported, _ in _imports(m)
        if any(imported == f or imported.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, "netbench.model must stay a pure library:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    cycles = [c for c in _cycles() if any(_package(m) == package for m in c)]
    assert not cycles, f"modules importing each other in a circle: {cycles}"


def test_no_private_name_imported_from_another_module() -> None:
    bad = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: from {imported} import {name}"
        for m in MODULES
        for line, imported, names in _imports(m)
        if imported.startswith("netbench") and imported != m
        for name in names
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
    ]
    assert not bad, "private names used outside their module:\n" + "\n".join(bad)


# ---- the layers: which part of netbench may import which -------------------------------------------------------

LEAF = "netbench (leaf modules)"
# Top-level modules every layer may use: facts and tools declared once, importing no other part of netbench.
LEAF_MODULES = frozenset(
    {
        "netbench.cache",
        "netbench.child",
        "netbench.counters",
        "netbench.dtypes",
        "netbench.environment",
        "netbench.frames",
        "netbench.membership",
        "netbench.pacing",
        "netbench.rootless",
        "netbench.safe_files",
        "netbench.settings",
        "netbench.shapes",
        "netbench.signals",
        "netbench.tcp",
        "netbench.torch_presence",
        "netbench.units",
        "netbench.untrusted",
        "netbench.validation",
    }
)
_BELOW_ORCHESTRATOR = frozenset(
    {
        LEAF,
        "netbench.topology",
        "netbench.rundir",
        "netbench.capture",
        "netbench.emulation",
        "netbench.trace",
        "netbench.workloads",
        "netbench.declarations",
        "netbench.replicators",
        "netbench.model",
        "netbench.planning",
        "netbench.calibrate",
        "netbench.schedule",
        "netbench.worker",
    }
)
# Each part and the parts it may import (itself always). Lowest first; a part below never imports one above.
LAYERS: dict[str, frozenset[str]] = {
    LEAF: frozenset(),
    "netbench.topology": frozenset({LEAF}),
    "netbench.rundir": frozenset({LEAF, "netbench.topology"}),  # the run directory's format: data only
    # not the emulator: it runs in any namespace; it writes the run directory's capture columns
    "netbench.capture": frozenset({LEAF, "netbench.topology", "netbench.rundir"}),
    "netbench.emulation": frozenset({LEAF, "netbench.topology"}),  # not the capture, not the model
    "netbench.trace": frozenset({LEAF, "netbench.rundir", "netbench.capture"}),
    "netbench.workloads": frozenset({LEAF}),
    "netbench.steps": frozenset({LEAF, "netbench.rundir", "netbench.trace"}),  # the step API: what a step records
    # each replicator declared once, torch-free: read by the model, the planner, the CLI and the reports; the step
    # API too, because declare_payload checks a user's settings against the declarations and records them there
    "netbench.declarations": frozenset({LEAF, "netbench.steps"}),
    # the torch codecs the declarations name; each step reports to the step API
    "netbench.replicators": frozenset({LEAF, "netbench.trace", "netbench.steps", "netbench.declarations"}),
    # pure: the model may import only the declarations of replicators and workloads (no torch: see below)
    "netbench.model": frozenset({LEAF, "netbench.topology", "netbench.workloads", "netbench.declarations"}),
    # plan as a library: a request and the model's answers for it, as pure as the model it drives
    "netbench.planning": frozenset(
        {LEAF, "netbench.topology", "netbench.workloads", "netbench.declarations", "netbench.model"}
    ),
    # measures the model's constants on this host: torch processes running the replicators' codecs
    "netbench.calibrate": frozenset(
        {
            LEAF,
            "netbench.topology",
            "netbench.workloads",
            "netbench.declarations",
            "netbench.replicators",
            "netbench.model",
        }
    ),
    "netbench.schedule": frozenset({LEAF, "netbench.topology", "netbench.emulation", "netbench.rundir"}),
    "netbench.worker": frozenset(
        {
            LEAF,
            "netbench.rundir",
            "netbench.trace",
            "netbench.workloads",
            "netbench.declarations",
            "netbench.replicators",
        }
    ),
    # reads run and sweep folders, the predictions stored there included (replicators by their declarations)
    "netbench.reports": frozenset(
        {LEAF, "netbench.topology", "netbench.rundir", "netbench.trace", "netbench.workloads", "netbench.declarations"}
    ),
    "netbench.orchestrator": _BELOW_ORCHESTRATOR,
    "netbench.cli": _BELOW_ORCHESTRATOR | {"netbench.orchestrator", "netbench.reports"},
    "netbench.__main__": frozenset({"netbench.cli"}),
    # the package's step API, loaded on first use (declare_payload checks settings against the declarations)
    "netbench": frozenset({"netbench.steps", "netbench.declarations"}),
}
# Parts whose modules never import torch (the model's rule has a test of its own below).
NO_TORCH = frozenset(
    {
        "netbench.topology",
        "netbench.rundir",
        "netbench.capture",
        "netbench.emulation",
        "netbench.trace",
        "netbench.schedule",
        "netbench.reports",
        "netbench.steps",
        "netbench.declarations",
    }
)


def _layer(name: str) -> str:
    """The part of :data:`LAYERS` a module (or a dotted name inside netbench) belongs to."""
    parts = name.split(".")
    if len(parts) == 1:
        return "netbench"
    if (PACKAGE / parts[1]).is_dir():
        return f"netbench.{parts[1]}"
    top = f"netbench.{parts[1]}"
    return LEAF if top in LEAF_MODULES else top


def _netbench_imports(module: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every netbench module ``module`` imports (the package root, which every import of a
    submodule runs anyway, left out)."""
    out = []
    for line, imported, names in _imports(module):
        if imported != "netbench" and not imported.startswith("netbench."):
            continue
        for target in sorted(_targets(imported, names)) or [imported]:
            if target != "netbench":
                out.append((line, target))
    return out


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def _reaches(start: str) -> set[str]:
    """Every part that ``start`` may import, directly or through the parts it imports (by the table)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for below in LAYERS[todo.pop()]:
            if below not in seen:
                seen.add(below)
                todo.append(below)
    return seen


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({_layer(m) for m in MODULES} - set(LAYERS))
    assert not unplaced, f"parts of netbench missing from LAYERS (add each with the parts it may import): {unplaced}"
    assert all(_layer(m) == LEAF for m in LEAF_MODULES) and LEAF_MODULES <= set(MODULES), "a leaf module is gone"


def test_the_layers_are_a_one_way_order() -> None:
    circular = sorted(part for part in LAYERS if part in _reaches(part))
    assert not circular, f"parts that may import themselves through others: {circular}"


def test_the_layers_keep_the_data_flow() -> None:
    """What the table must never allow, however it is extended."""
    never = {
        "netbench.model": {"netbench.emulation", "netbench.orchestrator", "netbench.worker", "netbench.reports"},
        "netbench.emulation": {"netbench.capture", "netbench.model", "netbench.worker"},
        "netbench.capture": {"netbench.emulation", "netbench.model"},
        "netbench.worker": {"netbench.emulation", "netbench.model", "netbench.orchestrator"},
        "netbench.rundir": {"netbench.emulation", "netbench.model", "netbench.orchestrator"},
        "netbench.reports": {"netbench.orchestrator", "netbench.model", "netbench.emulation"},
    }
    allowed = {part: sorted(_reaches(part) & parts) for part, parts in never.items()}
    assert not any(allowed.values()), f"the table lets these parts reach what they must not: {allowed}"


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_each_part_imports_only_the_parts_below_it(part: str) -> None:
    bad = [
        f"{_where(m, line)}: {m} imports {target} ({_layer(target)} is not below {part})"
        for m in MODULES
        if _layer(m) == part
        for line, target in _netbench_imports(m)
        if _layer(target) not in LAYERS[part] | {part}
    ]
    assert not bad, "imports against the package layers (tests/test_architecture.py LAYERS):\n" + "\n".join(bad)


# The orchestrator's folders, one per command, and what each may import of the others (the shared modules directly
# under netbench/orchestrator/ are "shared"): the run is the unit the others repeat, place on real hosts or borrow.
ORCHESTRATOR_PARTS: dict[str, frozenset[str]] = {
    "shared": frozenset(),
    "run": frozenset({"shared"}),
    "exec": frozenset({"shared", "run"}),
    "sweep": frozenset({"shared", "run"}),
    "multihost": frozenset({"shared", "run"}),
}


def _orchestrator_part(module: str) -> str | None:
    """Which of :data:`ORCHESTRATOR_PARTS` a netbench module is in (None outside the orchestrator)."""
    parts = module.split(".")
    if parts[:2] != ["netbench", "orchestrator"]:
        return None
    if len(parts) > 2 and parts[2] in ORCHESTRATOR_PARTS and (PACKAGE / "orchestrator" / parts[2]).is_dir():
        return parts[2]
    return "shared"


def test_orchestrator_folders_import_each_other_one_way() -> None:
    bad = [
        f"{_where(m, line)}: {m} imports {target}"
        for m in MODULES
        if (part := _orchestrator_part(m)) is not None
        for line, target in _netbench_imports(m)
        if (theirs := _orchestrator_part(target)) is not None
        and theirs != part
        and theirs not in ORCHESTRATOR_PARTS[part]
    ]
    assert not bad, "imports against tests/test_architecture.py ORCHESTRATOR_PARTS:\n" + "\n".join(bad)


def test_only_the_cli_starts_a_sweep_an_exec_or_a_multihost_run() -> None:
    bad = [
        f"{_where(m, line)}: {m} imports {target}"
        for m in MODULES
        if _layer(m) not in ("netbench.cli", "netbench.orchestrator")
        for line, target in _netbench_imports(m)
        if _orchestrator_part(target) in ("exec", "sweep", "multihost")
    ]
    assert not bad, "only netbench.cli starts these:\n" + "\n".join(bad)


def _function_level_imports(tree: ast.Module) -> list[ast.stmt]:
    """Import statements inside a function body (at any depth), the TYPE_CHECKING blocks aside."""
    found: list[ast.stmt] = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.append(node)
    return found


def test_function_level_imports_say_why() -> None:
    """An import sits at the top of its module unless something needs it late (torch or pandas kept off a light
    command's path, an import cycle, a process that must load little); then its line says so: ``# late: why``."""
    bad = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for node in _function_level_imports(ast.parse("\n".join(lines))):
            if not any("# late:" in line for line in lines[node.lineno - 1 : node.end_lineno]):
                bad.append(f"{_where(module, node.lineno)}: {lines[node.lineno - 1].strip()}")
    assert not bad, "imports inside functions without '# late: why' (move them to the top, or say why):\n" + "\n".join(
        bad
    )


def _torch_imports(module: str) -> list[int]:
    return [line for line, imported, _ in _imports(module) if imported == "torch" or imported.startswith("torch.")]


def test_parts_without_torch_import_none() -> None:
    bad = [
        f"{_where(m, line)}: {m} imports torch" for m in MODULES if _layer(m) in NO_TORCH for line in _torch_imports(m)
    ]
    assert not bad, "torch where it has no place:\n" + "\n".join(bad)


def _run_on_import(module: str) -> set[str]:
    """Modules ``module`` imports as it is imported: its top-level statements, not function bodies or TYPE_CHECKING."""
    path = MODULES[module]
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                out += walk(node.orelse)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                out += walk(node.body) + walk(getattr(node, "orelse", [])) + walk(getattr(node, "finalbody", []))
                out += [s for h in getattr(node, "handlers", []) for s in walk(h.body)]
            elif isinstance(node, ast.ClassDef):
                out += walk(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
        return out

    found: set[str] = set()
    for node in walk(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        else:
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found |= _targets(base, tuple(a.name for a in node.names)) or {base}
    return found


def _torch_on_import(module: str) -> list[str]:
    """The chain of imports by which importing ``module`` loads torch (empty when it does not)."""
    seen: set[str] = set()

    def chain(m: str) -> list[str]:
        seen.add(m)
        for t in sorted(_run_on_import(m)):
            if t == "torch" or t.startswith("torch."):
                return [t]
            if t in MODULES and t not in seen and (rest := chain(t)):
                return [t, *rest]
        return []

    return chain(module)


def test_model_imports_no_torch() -> None:
    """The model never imports torch itself, nor any netbench module that loads torch when it is imported (a
    replicator's codec): only declarations, so ``plan`` runs where torch is not installed."""
    model = [m for m in MODULES if _layer(m) in PURE_LIBRARIES]
    bad = [f"{_where(m, line)}: {m} imports torch" for m in model for line in _torch_imports(m)]
    for m in model:
        for line, target in _netbench_imports(m):
            loads = _torch_on_import(target) if _layer(target) not in PURE_LIBRARIES else []
            if loads:
                bad.append(f"{_where(m, line)}: {m} imports {target}, which loads torch: {' -> '.join(loads)}")
    assert not bad, "netbench.model must not need torch:\n" + "\n".join(bad)


NETWORK_NAMES = {"topology", "fabric"}  # a run's network graph and the emulator's build of it


def _network_name(node: ast.AST) -> str | None:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name if name in NETWORK_NAMES else None


def _branches_on_a_missing_network(tree: ast.AST) -> list[tuple[int, str]]:
    """``topology is None``-like tests (and the trunks file's presence standing for a network with trunks)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            sides = (node.left, node.comparators[0])
            none = any(isinstance(s, ast.Constant) and s.value is None for s in sides)
            named = [n for n in map(_network_name, sides) if n]
            if none and named:
                found.append((node.lineno, f"{named[0]} compared with None"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("exists", "is_file")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "trunks_csv"
        ):
            found.append((node.lineno, "a network told by whether trunks.csv exists"))
    return found


def test_no_branch_on_a_missing_network() -> None:
    """Every network is a topology (the star is a preset like sites and racks): emulation, schedules, traces, the
    model and the orchestrator walk one graph, so no code asks whether there is one."""
    bad = [
        f"{_where(m, line)}: {what}"
        for m, path in MODULES.items()
        for line, what in _branches_on_a_missing_network(ast.parse(path.read_text(), str(path)))
    ]
    assert not bad, "branches on a missing network:\n" + "\n".join(bad)


def test_the_missing_network_guard_sees_a_branch() -> None:
    tree = ast.parse("if spec.topology is None:\n    pass\nx = fabric != None\nrd.trunks_csv.exists()\n")
    assert [line for line, _ in _branches_on_a_missing_network(tree)] == [1, 3, 4]
