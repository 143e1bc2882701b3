"""The documentation: a short README, a docs site that builds strictly and offline, and reference pages that
cover every command-line option, every summary metric and every steps.csv column, because they are generated
from the code."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _reference():
    """scripts/docs_reference.py, the mkdocs hook that generates the reference pages."""
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sections(page: str) -> dict[str, str]:
    """The CLI page split at its ``## netbench COMMAND`` headings."""
    parts = re.split(r"^## netbench (\S+)$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 250


def test_readme_links_resolve():
    """Every relative link of the README names a file of the repository (the docs pages it points into)."""
    targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", README.read_text())
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert targets and not missing, f"README links to missing files: {missing}"


def test_readme_quick_start_is_what_ci_runs():
    """The README's two quick-start commands, and CI running the test one as written."""
    readme = README.read_text()
    assert "    bash scripts/setup.sh && netbench run --bw 100mbit --replicator dct\n" in readme
    assert "    bash scripts/setup.sh --for-tests && python3 -m pytest -q\n" in readme
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "bash scripts/setup.sh --for-tests" in ci
    assert any(line.startswith("python3 -m pytest -q") for line in ci)


def test_the_readme_tours_every_command():
    """The README's tour has a paragraph for every registered command (``**name**:``) and none for a command that
    does not exist."""
    from netbench.cli.app import COMMANDS

    tour = README.read_text().split("## A tour of the commands", 1)[1].split("\n## ", 1)[0]
    assert sorted(re.findall(r"^\*\*(\S+)\*\*:", tour, flags=re.M)) == sorted(name for name, _, _ in COMMANDS)


def test_the_architecture_page_draws_the_layers_the_test_holds():
    """docs/reference/architecture.md's layer table is tests/test_architecture.py's LAYERS: the same parts, each with
    the same parts it may import, and the same leaf modules."""
    import test_architecture as architecture

    page = (ROOT / "docs" / "reference" / "architecture.md").read_text()
    table = page.split("| part | may import |", 1)[1].split("\n\n", 1)[0]
    drawn = {}
    for row in table.splitlines()[2:]:
        part, imports = row.strip("|").split("|")
        names = re.findall(r"`(\w+)`", imports.split("(")[0])
        if part.strip().startswith("leaf modules"):
            leaves = {f"netbench.{name}" for name in re.findall(r"`(\w+)`", part)}
            continue
        (name,) = re.findall(r"`(\w+)`", part)
        drawn[f"netbench.{name}"] = frozenset(f"netbench.{below}" for below in names)
    held = {
        part: frozenset(below) - {architecture.LEAF, part}
        for part, below in architecture.LAYERS.items()
        if part not in (architecture.LEAF, "netbench", "netbench.__main__")
    }
    assert leaves == architecture.LEAF_MODULES
    assert drawn == held


NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen".split()


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "concepts" / "replicators.md"], ids=lambda p: p.name)
def test_the_replicators_counted_and_listed_are_the_declared_ones(page: Path):
    """Where the README and the replicators page count the replicators, the count is the registry's and the sentence
    names every declared one."""
    from netbench.declarations.registry import names

    text = " ".join(page.read_text().split())
    counts = re.findall(rf"\b({'|'.join(NUMBER_WORDS)}) replicators: ([^.]*)", text)
    assert counts, f"{page.name} does not count its replicators"
    for word, sentence in counts:
        assert word == NUMBER_WORDS[len(names())], f"{page.name} says {word} replicators, {len(names())} are declared"
        missing = [name for name in names() if f"`{name}`" not in sentence]
        assert not missing, f"{page.name} lists the replicators without {missing}"


def test_every_option_has_an_entry():
    reference = _reference()
    sections = _sections(reference.cli_page())
    commands = reference.commands()
    assert set(sections) == set(commands)
    missing = [
        f"{name} {opt}"
        for name, command in commands.items()
        for param in command.params
        if not getattr(param, "hidden", False)
        for opt in (
            [param.name.upper()] if param.param_type_name == "argument" else [*param.opts, *param.secondary_opts]
        )
        if f"`{opt}`" not in sections[name]
    ]
    assert not missing, f"options without an entry in the command reference: {missing}"


def test_every_option_entry_has_help_and_the_command_its_help():
    """A row per parameter, and no option without a help text (the reference would show an empty cell)."""
    reference = _reference()
    for name, command in reference.commands().items():
        assert command.help, f"netbench {name} has no help"
        for param in command.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                assert param.help, f"netbench {name} {param.opts[0]} has no help"


def test_every_metric_has_an_entry():
    from netbench.rundir.summary import METRICS

    page = _reference().metrics_page()
    missing = [m.key for m in METRICS if f"| `{m.key}` |" not in page]
    assert not missing, f"metrics without an entry in the metric reference: {missing}"
    for m in METRICS:
        assert m.label, f"metric {m.key} has no label to describe it"


def test_every_steps_column_has_an_entry():
    from netbench.rundir.steps_schema import Col

    page = _reference().steps_page()
    missing = [c.value for c in Col if f"| `{c.value}` |" not in page]
    assert not missing, f"steps.csv columns without an entry in the steps.csv reference: {missing}"
    for c in Col:
        assert c.meaning and c.writers, f"steps.csv column {c.value} has no meaning or no writer"


@pytest.mark.slow
def test_site_builds_strictly_and_offline(tmp_path):
    """`mkdocs build --strict` passes (no broken link, no page left out of the nav), and the site loads nothing
    from the network: no web fonts, no script or stylesheet from another host."""
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert all((site / "reference" / f"{page}.html").is_file() for page in ("cli", "metrics", "steps"))
    remote = re.compile(r"""<(?:script|link|img)\b[^>]*(?:src|href)=["']?(?:https?:)?//""", re.I)
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert not remote.search(text), f"{page.relative_to(site)} loads from the network"
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text


HISTORY = re.compile(r"session [0-9]|issue #?[0-9]+|#1[0-9]\b|commit [0-9a-f]{7}", re.I)
NOTES_FILE = "NOTES" + ".md"  # spelled in two parts so that this file does not cite it


def test_product_text_speaks_of_the_product():
    """No session, issue number, commit hash or citation of a private notes file in the README, the docs, the code,
    the tests, the scenarios or the text of the committed reports.
    """
    found = []
    paths = [
        README,
        *(p for d in ("docs", "netbench", "tests", "scenarios") for p in (ROOT / d).rglob("*") if p.is_file()),
        *(p for p in _reports_files() if p.suffix in {".md", ".txt"}),
    ]
    for path in paths:
        if path.suffix not in {".md", ".py", ".toml", ".c", ".txt", ".yml"}:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line) or NOTES_FILE in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


REPORTS = ROOT / "reports"
# A command that measures a folder again: an indented shell line or a backticked one running netbench or a script.
COMMAND = re.compile(r"(?:^ {4}|`)(?:sudo )?(?:netbench \w|python3? scripts/\w+\.py)", re.M)
NAMED_INPUT = re.compile(r"\b(?:scripts|scenarios)/[\w/.-]*\w\.(?:py|sh|toml|csv|mahi)\b")


def _tracked(*paths: str) -> list[Path] | None:
    """The files git tracks under ``paths`` (None outside a git checkout)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", *paths], cwd=ROOT, capture_output=True, timeout=60)
    except OSError:
        return None
    if listed.returncode != 0:
        return None
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def _reports_files() -> list[Path]:
    """The committed files under reports/ (everything there outside a git checkout)."""
    tracked = _tracked("reports")
    return [p for p in (tracked if tracked is not None else REPORTS.rglob("*")) if p.is_file()]


def test_every_reports_folder_is_cited_and_regenerable():
    """Each folder under reports/ is one that the docs, CI, a scenario, a script or a test cites (the changelog aside),
    and its README says what it holds with a command that measures it again, naming only scripts and scenarios that
    exist: a measurement nobody cites, or one nobody can repeat, does not belong there."""
    outside = _tracked()
    if outside is None:
        pytest.skip("not a git checkout: which files are committed is unknown")
    folders = sorted({p.relative_to(REPORTS).parts[0] for p in _reports_files() if p.parent != REPORTS})
    assert folders, "reports/ holds no folder"
    citing = "\n".join(
        p.read_text(errors="replace")
        for p in outside
        if p.is_file()
        and p.parts[len(ROOT.parts)] != "reports"
        and p.name not in {"CHANGELOG.md", ".gitignore"}
        and p.suffix not in {".png", ".pcap", ".json", ".csv"}
    )
    problems = [
        f"reports/{name}: nothing outside reports/ cites it"
        for name in folders
        if not re.search(rf"reports/{re.escape(name)}(?![\w-])", citing)
    ]
    for name in folders:
        readme = REPORTS / name / "README.md"
        if not readme.is_file():
            problems.append(f"reports/{name}: no README.md")
            continue
        text = readme.read_text()
        if not COMMAND.search(text):
            problems.append(f"reports/{name}/README.md names no command that measures it again")
        problems += [
            f"reports/{name}/README.md names {path}, which does not exist"
            for path in NAMED_INPUT.findall(text)
            if not (ROOT / path).is_file()
        ]
    assert not problems, "\n".join(problems)
