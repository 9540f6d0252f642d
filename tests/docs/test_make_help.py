"""make help: every target in exactly one group (for an SRE, for developers, set-up), shown
under that group with every Makefile variable its recipe reads."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()
TARGETS = re.findall(r"^([a-z-]+):", MAKEFILE, re.M)
VARIABLES = set(re.findall(r"^([A-Z_]+) +\?=", MAKEFILE, re.M))
TITLES = {"sre": "For an SRE:", "dev": "For developers:", "setup": "Set-up:"}
# What the issue asks each group to hold, at least.
EXPECTED = {
    "sre": {"doctor", "capture", "report", "monitor", "lab", "compare", "sweep", "fleet", "train", "train-answer"},
    "dev": {"test", "bench", "bench-overhead", "matrix", "soak-monitor", "soak-capture", "lint", "schema-doc",
            "runtimes-doc"},
    "setup": {"setup", "demo", "clean", "help"},
}  # fmt: skip


def help_groups() -> dict[str, list[str]]:
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    groups: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        title = next((g for g, t in TITLES.items() if line == t), None)
        if title:
            current = title
            groups[current] = []
        elif m := re.match(r"  make (\S+)", line):
            assert current, line
            groups[current].append(m[1])
    return groups


def recipe(target: str) -> str:
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n?)*)", MAKEFILE, re.M)
    assert m, target
    return m[1]


def test_every_target_has_exactly_one_group_tag() -> None:
    for t in TARGETS:
        line = next(x for x in MAKEFILE.splitlines() if x.startswith(f"{t}:"))
        tags = re.findall(r"## \[([a-z]+)\] ", line)
        assert len(tags) == 1 and tags[0] in TITLES, f"{t}: {line}"
    phony = set(re.search(r"^\.PHONY: (.*)$", MAKEFILE, re.M)[1].split())
    assert phony == set(TARGETS)


def test_make_help_shows_every_target_once_in_its_group() -> None:
    groups = help_groups()
    assert list(groups) == list(TITLES)
    shown = [t for ts in groups.values() for t in ts]
    assert sorted(shown) == sorted(TARGETS), "every target once"
    for g, want in EXPECTED.items():
        assert want <= set(groups[g]), (g, want - set(groups[g]))


@pytest.mark.parametrize("target", TARGETS)
def test_help_names_every_variable_the_target_reads(target: str) -> None:
    read = set(re.findall(r"\$\(([A-Z_]+)\)", recipe(target))) & VARIABLES
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    i = next(n for n, x in enumerate(lines) if re.match(rf"  make {re.escape(target)}\s", x))
    shown = set(re.findall(r"\b([A-Z_]+)=", lines[i + 1])) if i + 1 < len(lines) else set()
    assert read <= shown, f"make {target} reads {sorted(read - shown)}, which help does not show"


def test_the_variables_the_issue_found_missing_are_shown() -> None:
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for v in ("TIER", "SEED", "MINUTES", "ANSWER", "LOG", "TARGETS", "PYTEST_ARGS"):
        assert f"{v}=" in out, v
