"""README.md holds to the code: short, its commands exist and parse, the clone-to-report path fits
on its first screen, CI runs its test command, and every link of it and of docs/ resolves."""

from __future__ import annotations

import re
import subprocess

import pytest

from analysis.families import NAMES
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
LINES = README.splitlines()
MAKEFILE = (ROOT / "Makefile").read_text()
TARGETS = set(re.findall(r"^([a-z-]+):", MAKEFILE, re.M))
VARIABLES = set(re.findall(r"^([A-Z_]+) +\?=", MAKEFILE, re.M))
MAKE_CALL = re.compile(r"\bmake ([a-z][a-z-]*)((?: +[A-Z_]+=(?:\"[^\"]*\"|'[^']*'|[^\s`|]+))*)")
ASSIGNMENT = re.compile(r"([A-Z_]+)=(\"[^\"]*\"|'[^']*'|[^\s`|]+)")


def code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each fenced block."""
    out, start, body = [], None, []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if start is None:
                start, body = n + 1, []
            else:
                out.append((start, body))
                start = None
        elif start is not None:
            body.append(line)
    return out


def commands(block: list[str]) -> list[str]:
    """A block's command lines, each without its comment."""
    return [re.sub(r"\s+#.*$", "", x).strip() for x in block if x.strip() and not x.lstrip().startswith("#")]


def section(heading: str) -> list[str]:
    start = next(i for i, x in enumerate(LINES) if x.startswith("## ") and heading in x)
    end = next((i for i in range(start + 1, len(LINES)) if LINES[i].startswith("## ")), len(LINES))
    return LINES[start:end]


def test_short() -> None:
    assert len(LINES) <= 300


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    block = code_blocks("\n".join(section("The two commands")))[0][1]
    test_cmd = next(c for c in commands(block) if c.startswith("make test"))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    ci = [x for x in ci if x.strip() and not x.startswith(("#", "set ", "cd "))]
    assert ci == [test_cmd]


def test_from_clone_to_a_report_in_five_commands_on_the_first_screen() -> None:
    heading = next(i for i, x in enumerate(LINES, 1) if x.startswith("## From `git clone`"))
    start, block = next((s, b) for s, b in code_blocks(README) if s > heading)
    cmds = commands(block)
    assert start + len(block) <= 100, "the whole path on the README's first 100 lines"
    assert len(cmds) <= 5 and cmds[0].startswith("git clone"), cmds
    assert any(re.search(r"\bmake capture\b", c) for c in cmds), "a capture of the reader's own host"
    assert "report.md" in cmds[-1]


def make_calls() -> list[tuple[str, dict[str, str]]]:
    return [(m[1], dict(ASSIGNMENT.findall(m[2]))) for m in MAKE_CALL.finditer(README)]


def test_every_make_target_and_variable_exists() -> None:
    calls = make_calls()
    assert {"demo", "test", "capture", "monitor", "fleet", "lab", "train", "report"} <= {t for t, _ in calls}
    for target, assigned in calls:
        assert target in TARGETS, f"make {target}: no such target"
        assert set(assigned) <= VARIABLES, f"make {target} {assigned}: not a variable of the Makefile"


@pytest.mark.parametrize("line", sorted({c for _, b in code_blocks(README) for c in commands(b) if "make " in c}))
def test_every_make_command_of_the_readme_parses(line: str) -> None:
    """make -n: the recipe expands, nothing runs."""
    target, assigned = next((m[1], m[2]) for m in MAKE_CALL.finditer(line))
    args = [f"{k}={v.strip(chr(34))}" for k, v in ASSIGNMENT.findall(assigned)]
    r = subprocess.run(["make", "-n", target, *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_the_symptom_table_runs_captures_of_the_registrys_families() -> None:
    rows = [x for x in section("Symptom first") if x.startswith("| ") and "make capture" in x]
    assert len(rows) >= 5
    for row in rows:
        probes = re.search(r"PROBES=([\w,]+)", row)
        assert probes is None or set(probes[1].split(",")) <= set(NAMES), row
        assert "docs/runbooks.md" in row, row


SCRIPT = re.compile(r"(?<![\w/.])((?:scripts|collector|dev)/[\w./-]+)")


@pytest.mark.parametrize("path", sorted(set(SCRIPT.findall(README))))
def test_every_script_the_readme_names_exists_and_answers_help(path: str) -> None:
    script = ROOT / path
    assert script.is_file(), path
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "USAGE" in (r.stdout + r.stderr).upper(), r.stderr


def test_every_probe_the_readme_names_exists() -> None:
    named = set(re.findall(r"\b([a-z_]+(?:\.[a-z]+)?\.bt)\b", README))
    assert named and all((ROOT / "probes" / f).is_file() for f in named), named


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_link_resolves(doc: str) -> None:
    here = (ROOT / doc).parent
    for target in LINK.findall((ROOT / doc).read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (here / path).resolve() if path else ROOT / doc
        assert file.exists(), f"{doc}: {target}"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
            assert anchor in {_anchor(h) for h in headings}, f"{doc}: {target}"


def test_measurements_moved_not_dropped() -> None:
    """The dated measurements the README held live in docs/cost.md (and kernels.md, development.md)."""
    cost = (ROOT / "docs" / "cost.md").read_text()
    for seen in ("Mann-Whitney U p = 0.40", "14 273 bytes/s", "115 MB against 128", "`floor-all`", "104 MB"):
        assert seen in cost, seen
    assert "13 m 49 s" in (ROOT / "docs" / "kernels.md").read_text()
    assert "22 m 51 s" in (ROOT / "docs" / "development.md").read_text()


def _paths(text: str) -> set[str]:
    return {m for m in re.findall(r"`([\w./-]+/[\w./-]+)`", text) if not m.startswith(("runs/", "build/", "/"))}


def test_paths_the_readme_names_exist() -> None:
    missing = [p for p in _paths(README) if not (ROOT / p.rstrip("/")).exists() and "<" not in p]
    assert not missing, missing


def test_no_heading_of_the_readme_is_empty() -> None:
    heads = [i for i, x in enumerate(LINES) if x.startswith("## ")]
    for a, b in zip(heads, [*heads[1:], len(LINES)], strict=True):
        assert any(x.strip() for x in LINES[a + 1 : b]), LINES[a]


def test_the_readme_links_every_docs_page() -> None:
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"docs/([\w-]+\.md)", README))
    # The generated pages are reached from the pages that own them.
    assert pages - linked <= {"runtimes.md"}, pages - linked


def test_readme_is_for_users() -> None:
    """No benchmark log or suite internals on the front page: those live in docs/."""
    for word in ("SCHED_IDLE", "Mann-Whitney", "phase 1", "2026-"):
        assert word not in README, word
