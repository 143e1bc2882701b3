"""The package's architecture, read from the source alone (AST: nothing is imported, so this takes a second).

``netbench.model`` is a pure library that ``plan`` can use anywhere, so it imports nothing from
the emulator, the orchestrator or pandas; no modules import each other in a circle; a module's
private names (``_name``) stay inside it. Function-level and TYPE_CHECKING imports count too: a
lazy import is still a dependency, only a later one.
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


def test_model_imports_no_emulator_orchestrator_or_pandas() -> None:
    forbidden = ("netbench.emulation", "netbench.orchestrator", "pandas")
    bad = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: imports {imported}"
        for m in MODULES
        if m == "netbench.model" or m.startswith("netbench.model.")
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
