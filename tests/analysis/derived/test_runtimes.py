"""analysis/derived/runtimes.py on the runtimes lab's real run (tests/fixtures/runtimes-defaults,
`make runtimes-doc`): a row per listener from the probe's listen() calls and ss, a row saying
why for a server without a listener, and a clear error for a run of another lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.derived.runtimes import table
from analysis.load import Run, RunDataError
from tests.conftest import fixture_run


def test_every_listener_of_the_run_has_its_row() -> None:
    run = Run.open(fixture_run("runtimes-defaults"))
    df = table(run)
    listening = df[df["status"] == "listening"]
    inode = run.lab["server"]["netns_inode"]
    ss = run.table("listeners")
    ss = ss[ss["netns"] == inode]
    assert len(listening) == len(ss.drop_duplicates(["laddr", "lport"]))
    for r in listening.to_dict("records"):
        assert r["limit"] == min(max(int(b) for b in r["listen_backlogs"].split(", ")), r["somaxconn"]), r


def test_a_server_that_did_not_run_says_why(copy_fixture) -> None:
    path: Path = copy_fixture("runtimes-defaults")
    meta = json.loads((path / "metadata.json").read_text())
    rt = next(r for r in meta["lab"]["runtimes"] if r["name"] == "haproxy")
    rt.update(status="not installed", pid=None, version=None, exe=None, port=9)  # a port nothing listened on
    (path / "metadata.json").write_text(json.dumps(meta))
    rows = table(Run.open(path))
    row = rows[rows["server"] == "haproxy"]
    assert len(row) == 1 and row["status"].iloc[0] == "not installed" and row["limit"].isna().all()


def test_a_run_of_another_lab_is_a_clear_error() -> None:
    with pytest.raises(RunDataError, match="not a runtimes lab run"):
        table(Run.open(fixture_run("accept-overflow-healthy")))
