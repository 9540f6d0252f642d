"""docs/runtimes.md is generated, never typed: it is what analysis/render/runtimes.py writes
from the run `make runtimes-doc` keeps in tests/fixtures/runtimes-defaults."""

from __future__ import annotations

from analysis.__main__ import main
from analysis.load import Run
from analysis.render.runtimes import markdown
from tests.conftest import ROOT, fixture_run


def test_the_docs_table_is_the_runs() -> None:
    assert (ROOT / "docs" / "runtimes.md").read_text() == markdown(Run.open(fixture_run("runtimes-defaults")))


def test_the_command_writes_it(tmp_path, capsys) -> None:
    out = tmp_path / "runtimes.md"
    assert main(["runtimes", str(fixture_run("runtimes-defaults")), "--out", str(out)]) == 0
    assert out.read_text().startswith("# What each runtime asks listen() for, measured")
    assert "| redis | Redis " in out.read_text()
