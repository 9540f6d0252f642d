"""docs/runtimes.md is generated, never typed: it is what analysis/render/runtimes.py writes
from the two runs `make runtimes-doc` keeps in tests/fixtures/runtimes-defaults and
runtimes-limits."""

from __future__ import annotations

from analysis.__main__ import main
from analysis.load import Run
from analysis.render.runtimes import markdown
from tests.conftest import ROOT, fixture_run


def test_the_docs_table_is_the_runs() -> None:
    doc = markdown(Run.open(fixture_run("runtimes-defaults")), Run.open(fixture_run("runtimes-limits")))
    assert (ROOT / "docs" / "runtimes.md").read_text() == doc


def test_the_command_writes_it(tmp_path, capsys) -> None:
    out = tmp_path / "runtimes.md"
    assert main(["runtimes", str(fixture_run("runtimes-defaults")), "--out", str(out)]) == 0
    assert out.read_text().startswith("# What each runtime asks listen() for, measured")
    assert "| redis | Redis " in out.read_text() and "Past its own connection limit" not in out.read_text()
    limits = ["--limits", str(fixture_run("runtimes-limits"))]
    assert main(["runtimes", str(fixture_run("runtimes-defaults")), *limits, "--out", str(out)]) == 0
    assert "| redis | --maxclients 8 (--protected-mode no) | 40 of 40 | 8 | 32 (`-ERR max" in out.read_text()
