"""The runtimes lab (labs/runtimes) with real servers from Debian packages and the machine's
toolchains, each with its defaults: the accept-queue probe sees every listen() call, the
kernel's limit (ss Send-Q) is min(asked, somaxconn) for each, each server is recognised from
its executable as the rules recognise it, and the docs table renders from the run. Past its
own connection limit, four servers that behave unlike each other do what they are measured
to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.derived.runtimes import at_limit_table, table
from analysis.render.runtimes import markdown
from tests.integration.test_family_labs import run_lab

pytestmark = pytest.mark.integration

# What make setup installs (the rest, Node and PostgreSQL, are measured where present).
INSTALLED_BY_SETUP = {
    "go-net-http", "python-asyncio", "python-http-server", "java-serversocket", "java-nio", "nginx", "redis",
    "memcached", "haproxy", "apache",
}  # fmt: skip
# How the rules name each from /proc/PID/exe (analysis/derived/servers.py); Go binaries are
# named after their program, so the Go server is not recognised.
RECOGNISED = {
    "go-net-http": None, "node-http": "node", "python-asyncio": "python", "python-http-server": "python",
    "java-serversocket": "java", "java-nio": "java", "nginx": "nginx", "redis": "redis",
    "memcached": "memcached", "haproxy": "haproxy", "apache": "apache", "postgresql": "postgresql",
}  # fmt: skip


def test_each_runtime_with_its_defaults(kernel, tmp_path: Path) -> None:
    run = run_lab("runtimes", "defaults", tmp_path / "run", timeout=300)
    df = table(run)
    status = dict(zip(df["server"], df["status"], strict=False))
    assert set(status) == set(RECOGNISED)
    assert {s for s in INSTALLED_BY_SETUP if status[s] != "listening"} == set()
    listening = df[df["status"] == "listening"]
    assert listening["server"].nunique() >= 6
    for r in listening.to_dict("records"):
        # The probe saw its listen() and the kernel's limit is what listen() makes of it.
        assert r["listen_backlogs"], r
        asked = max(int(b) for b in r["listen_backlogs"].split(", "))
        assert r["limit"] == min(asked, r["somaxconn"]), r
        recognised = r["recognised_as"] if isinstance(r["recognised_as"], str) else None  # NaN: none
        assert recognised == RECOGNISED[r["server"]], r
    families = {(r["server"], r["family"]) for r in listening.to_dict("records")}
    # Java binds one socket on "::" that takes IPv4 too; asyncio binds one per family.
    assert ("java-serversocket", "dual-stack") in families
    assert {("python-asyncio", "IPv4"), ("python-asyncio", "IPv6")} <= families
    doc = markdown(run)
    for server in listening["server"].unique():
        assert f"| {server} |" in doc


def test_four_servers_past_their_own_limit(kernel, tmp_path: Path) -> None:
    """Redis and memcached accept and refuse with their own words, Go's net/http stops
    accepting (accept4 fails at its open-files limit and it retries later), Python's
    http.server stops accepting and spins (it retries the failing accept at once)."""
    only = "go-net-http python-http-server redis memcached"
    run = run_lab("runtimes", "limits", tmp_path / "run", timeout=300, RUNTIMES_ONLY=only)
    rows = {r["server"]: r for r in at_limit_table(run).to_dict("records")}
    assert set(rows) == set(only.split())
    redis, memcached = rows["redis"], rows["memcached"]
    assert redis["behaviour"] == "refuses" and redis["said"] == "-ERR max number of clients reached", redis
    assert redis["kept_open"] == 8 and redis["closed_by_server"] == redis["connected"] - 8, redis
    assert memcached["behaviour"] == "refuses" and memcached["said"] == "ERROR Too many open connections", memcached
    go = rows["go-net-http"]
    assert go["behaviour"] == "queues" and go["queue_depth_max"] >= 20 and go["closed_by_server"] == 0, go
    http_server = rows["python-http-server"]
    assert http_server["behaviour"].startswith("queues"), http_server
    # A spinning loop on a CPU phase 1 shares: at least a second of the ~9 s hold, where
    # Go, waiting, used none.
    assert http_server["cpu_s"] >= 1.0 and go["cpu_s"] < 0.5, (http_server, go)
    assert "## Past its own connection limit, measured" in markdown(run, run)
