"""The runtimes lab (labs/runtimes) with real servers from Debian packages and the machine's
toolchains, each with its defaults: the accept-queue probe sees every listen() call, the
kernel's limit (ss Send-Q) is min(asked, somaxconn) for each, each server is recognised from
its executable as the rules recognise it, and the docs table renders from the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.derived.runtimes import table
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
