"""analysis/derived/runtimes.py on the runtimes lab's real runs (tests/fixtures/runtimes-defaults
and runtimes-limits, `make runtimes-doc`): a row per listener from the probe's listen() calls
and ss, a row saying why for a server without a listener, a clear error for a run of another
lab; past each server's own limit, what the idle client and the probe saw, in keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.derived.runtimes import at_limit_table, table
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


def _at_limit(run: Run) -> dict[str, dict]:
    return {r["server"]: r for r in at_limit_table(run).to_dict("records")}


def test_past_its_limit_each_server_as_measured() -> None:
    rows = _at_limit(Run.open(fixture_run("runtimes-limits")))
    # Each from its own numbers in the run: the client's account and the probe's queue.
    assert rows["redis"]["behaviour"] == "refuses"
    assert rows["redis"]["said"] == "-ERR max number of clients reached" and rows["redis"]["kept_open"] == 8
    assert rows["memcached"]["said"] == "ERROR Too many open connections"
    assert rows["go-net-http"]["behaviour"] == "queues" and rows["go-net-http"]["queue_depth_max"] >= 20
    assert "spins" in rows["python-http-server"]["behaviour"].split(", ")
    assert rows["postgresql"]["behaviour"] == "keeps"
    assert isinstance(rows["java-nio"]["skipped"], str) and isinstance(rows["python-asyncio"]["skipped"], str)
    for r in rows.values():
        if isinstance(r["skipped"], str):
            continue
        # Kept and closed account for every connect that completed.
        assert r["kept_open"] + r["closed_by_server"] == r["connected"], r


def test_a_second_listen_with_another_backlog_is_a_relisten(copy_fixture) -> None:
    """memcached at -c 24 or less calls listen(fd, 0) when accept4() fails: a listen() of the
    server's port during the hold, with a backlog unlike its first, is named."""
    path: Path = copy_fixture("runtimes-limits")
    run = Run.open(path)
    rt = next(r for r in run.lab["runtimes"] if r["name"] == "memcached")
    calls = (path / "aq_listen.csv").read_text().splitlines()
    # time_s,pid,comm,netns,lport,fd,backlog_requested,limit_effective,ret
    fields = next(c for c in calls[1:] if c.split(",")[4] == str(rt["port"])).split(",")
    fields[0] = str(int(rt["at_limit"]["hold"]["start_epoch"]) + 1)
    fields[6] = fields[7] = "0"
    (path / "aq_listen.csv").write_text("\n".join([*calls, ",".join(fields)]) + "\n")
    row = _at_limit(Run.open(path))["memcached"]
    assert row["relisten_backlogs"] == "0" and row["behaviour"].startswith("relisten")


def test_a_defaults_run_is_not_a_limits_run() -> None:
    with pytest.raises(RunDataError, match="not a runtimes limits run"):
        at_limit_table(Run.open(fixture_run("runtimes-defaults")))
