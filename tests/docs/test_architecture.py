"""docs/architecture.md holds the one tree: it names every top-level folder, every script of the
drivers' folders and every `python -m` command with its subcommands, as the code has them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text()
TREE = DOC[DOC.index("## The tree") :].split("```")[1]
TRACKED = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
MAIN_MODULES = sorted(f.removesuffix("/__main__.py").replace("/", ".") for f in TRACKED if f.endswith("__main__.py"))


def test_the_commands_are_found() -> None:
    assert {"analysis", "monitor.exporter", "training"} <= set(MAIN_MODULES)


def test_the_tree_names_every_top_level_folder() -> None:
    folders = {f.split("/")[0] for f in TRACKED if "/" in f}
    listed = set(re.findall(r"^([.\w-]+)/", TREE, re.M))
    assert folders - listed == set(), f"folders missing from the tree: {sorted(folders - listed)}"


@pytest.mark.parametrize("folder", ["scripts", "collector", "dev", "dev/vm"])
def test_the_tree_names_every_script(folder: str) -> None:
    files = {f.rsplit("/", 1)[1] for f in TRACKED if f.rsplit("/", 1)[0] == folder}
    words = set(re.findall(r"[\w.-]+", TREE))
    assert files - words == set(), f"{folder}: {sorted(files - words)} not in the tree"


def subcommands(module: str) -> list[str]:
    """The subcommands `python -m MODULE --help` lists ({a,b,c}), none for a module without."""
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    m = re.search(r"\{([\w,-]+)\}", out)
    return m[1].split(",") if m else []


@pytest.mark.parametrize("module", MAIN_MODULES)
def test_the_tree_names_every_python_m_command(module: str) -> None:
    m = re.search(rf"python3? -m {re.escape(module)}(?: \{{([\w,-]+)\}})?", TREE)
    assert m, f"python -m {module} is not in the tree"
    subs = subcommands(module)
    if subs:
        assert m[1] is not None and m[1].split(",") == subs, f"python -m {module}: tree {m[1]}, code {subs}"


@pytest.mark.parametrize("module", MAIN_MODULES)
def test_each_python_m_command_is_in_the_page_that_owns_it(module: str) -> None:
    """Not in make help: in a docs page beside the architecture's tree (or the README)."""
    pages = [p.read_text() for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md"]
    text = "\n".join([*pages, (ROOT / "README.md").read_text()])
    for sub in subcommands(module) or [""]:
        assert re.search(rf"python3? -m {re.escape(module)}\b(?:[ |]\S*)?{re.escape(sub)}", text), f"{module} {sub}"


def test_no_other_tree() -> None:
    """One tree: the README keeps no layout of its own."""
    readme = (ROOT / "README.md").read_text()
    assert "analysis/contract/" not in readme and "## Layout" not in readme


def test_the_architecture_names_no_exception_to_the_registry() -> None:
    assert "exception" not in DOC.lower()
