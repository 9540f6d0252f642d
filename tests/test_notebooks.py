"""Every notebook runs top to bottom against a real run and draws its figures."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT, fixture_run

NOTEBOOK_RUN = {
    "accept_queue": "accept-overflow-sizing",
    "time_wait": "time-wait-exhaust",
    "epoll": "epoll-busy",
    "retransmits": "retransmit-loss1",
}


def test_every_notebook_has_a_run() -> None:
    assert {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} == set(NOTEBOOK_RUN)


@pytest.mark.parametrize("name", sorted(NOTEBOOK_RUN))
def test_notebook_executes_and_plots(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUN", str(fixture_run(NOTEBOOK_RUN[name])))
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "no figure was drawn"
    text = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in outputs)
    assert "**symptom**" in text  # the evidence chain is told, not only plotted
