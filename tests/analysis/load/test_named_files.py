"""A file metadata.json names that is missing or empty (issue 18: connects.csv deleted, or cut
to its header, while metadata.json names it as the lab client's log: validate said
"connects: 0 rows ok" and the report dropped the client's evidence without a word). Now
validate warns, naming metadata.json's line, and the report says it at the top."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("damage", ["deleted", "header only"])
def test_a_named_client_log_that_is_gone_is_said(copy_fixture, damage: str) -> None:
    run = copy_fixture("accept-overflow-stall")
    log = run / "connects.csv"
    if damage == "deleted":
        log.unlink()
    else:
        log.write_text(log.read_text().splitlines(keepends=True)[0])
    v = subprocess.run([sys.executable, "-m", "analysis", "validate", str(run)], capture_output=True, text=True,
                       cwd=ROOT)  # fmt: skip
    assert v.returncode == 0, v.stderr
    want = "is missing" if damage == "deleted" else "holds no row"
    warnings = [ln for ln in v.stdout.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and "metadata.json:" in warnings[0] and f"connects.csv {want}" in warnings[0], v.stdout
    r = subprocess.run([sys.executable, "-m", "analysis", "report", str(run)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    head = (run / "report.md").read_text().split("## Findings")[0]
    assert f"connects.csv {want}" in head, head


def test_an_intact_client_log_gets_no_warning(copy_fixture) -> None:
    run = copy_fixture("accept-overflow-stall")
    v = subprocess.run([sys.executable, "-m", "analysis", "validate", str(run)], capture_output=True, text=True,
                       cwd=ROOT)  # fmt: skip
    assert "warning:" not in v.stdout
