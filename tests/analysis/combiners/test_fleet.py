"""The fleet report (analysis/render/fleet.py) and capture scope (metadata.json "scope": sampled) on recorded runs.

The real thing, over ssh and Ansible against namespace hosts, is tests/integration/test_fleet.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.combiners.fleet import CAPTURE_FAILED, CAPTURE_LOG, HOSTS_FILE
from analysis.derived.epoll import per_thread
from analysis.load import Run, RunDataError
from analysis.render import fleet
from analysis.rules import evaluate_all
from tests.conftest import FIXTURES, ROOT

STALL = "accept-overflow-stall"  # server and client namespaces sampled; the server's listener overflows


def _copy(name: str, dst: Path, **meta_changes: object) -> Path:
    shutil.copytree(FIXTURES / name, dst)
    meta = json.loads((dst / "metadata.json").read_text())
    meta.update(meta_changes)
    (dst / "metadata.json").write_text(json.dumps(meta, indent=2))
    return dst


def _overflows(run: Run) -> list:
    return [f for f in evaluate_all(run) if f.kind == "accept_queue_overflow" and f.is_finding]


def test_scope_sampled_judges_only_the_sampled_namespaces(tmp_path: Path) -> None:
    meta = json.loads((FIXTURES / STALL / "metadata.json").read_text())
    srv, cli = meta["netns"]
    # The client's namespace alone, as a "host" sharing the kernel with the server would see it.
    unscoped = Run.open(_copy(STALL, tmp_path / "unscoped", netns=[cli]))
    unscoped.validate_all()
    # The probes saw the server's full queue, in a namespace this run did not sample: not judged
    # (no counter, no ss row), listed as not checked with the capture that would judge it.
    assert _overflows(unscoped) == []
    unchecked = [f for f in evaluate_all(unscoped) if f.kind == "accept_queue_overflow" and f.status == "not_checked"]
    assert {f.subject["netns"] for f in unchecked} == {srv["inode"]}, "the probes saw the server"
    assert f"NETNS=inode:{srv['inode']}" in unchecked[0].link("probe").evidence["command"]
    scoped = Run.open(_copy(STALL, tmp_path / "scoped", netns=[cli], scope="sampled"))
    scoped.validate_all()  # the row counts of metadata.json still hold: they count the files
    assert scoped.scope == "sampled"
    assert _overflows(scoped) == []
    assert scoped.table("aq_listener").empty
    assert scoped.out_of_scope["aq_listener"] == len(unscoped.table("aq_listener")) > 0


def test_scope_sampled_keeps_the_processes_of_the_sampled_namespaces_in_ep_loop(tmp_path: Path) -> None:
    run = Run.open(_copy(STALL, tmp_path / "run", scope="sampled"))
    run.validate_all()
    ep_all = Run.open(FIXTURES / STALL).table("ep_loop")
    kept = set(run.table("ep_loop")["comm"])
    assert "aqserver" in kept and "bpftrace" in set(ep_all["comm"]) - kept
    assert run.out_of_scope["ep_loop"] == int((~ep_all["pid"].isin(run.scope_pids)).sum()) > 0
    # Both namespaces sampled: every other probe row is kept, and the overflow is still found.
    assert "aq_listener" not in run.out_of_scope
    assert [f.cause_class for f in _overflows(run)] == ["stall"]


def test_report_says_the_scope(tmp_path: Path) -> None:
    from analysis.render.report import write_report

    d = _copy(STALL, tmp_path / "run", scope="sampled")
    write_report(d)
    assert "- Scope: the sampled namespaces only" in (d / "report.md").read_text()
    assert json.loads((d / "verdicts.json").read_text())["scope"] == "sampled"


def test_capture_rejects_an_unknown_scope() -> None:
    r = subprocess.run([str(ROOT / "collector" / "capture"), "--scope", "some"], capture_output=True, text=True)
    assert r.returncode != 0 and "--scope must be all or sampled" in r.stderr


def test_fleet_report_table_shared_findings_and_failed_hosts(tmp_path: Path) -> None:
    d = tmp_path / "fleet-x"
    d.mkdir()
    _copy(STALL, d / "web-1")
    _copy(STALL, d / "web-2")
    _copy("host-healthy", d / "db-1")
    broken = _copy("host-healthy", d / "db-2")
    (broken / "metadata.json").write_text('{"schema_version": 1,')
    (d / "db-3").mkdir()
    (d / "db-3" / CAPTURE_LOG).write_text("exit status 1\n\ncapture: error: bpftrace is not installed\n")
    (d / HOSTS_FILE).write_text("web-1\nweb-2\ndb-1\ndb-2\ndb-3\ndb-4\n")
    md, _ = fleet.write(d)
    doc = json.loads((d / "fleet.json").read_text())
    assert doc["hosts_with_findings"] == ["web-1", "web-2"]
    h = doc["hosts"]
    assert h["db-1"]["status"] == "captured"
    assert {c["status"] for c in h["db-1"]["cells"].values()} <= {"absent", "not_checked"}
    cell = h["web-1"]["cells"]["accept_queue_overflow"]
    assert cell["status"] == "confirmed" and cell["cause_classes"] == ["stall"]
    assert cell["objects"] == ["198.18.0.1:8080 (aqserver)"]
    assert "metadata.json:1: invalid JSON" in h["db-2"]["error"]
    assert h["db-3"]["error"].endswith("the capture said: exit status 1 / capture: error: bpftrace is not installed")
    assert h["db-4"]["error"].startswith("no run fetched")
    assert all(h[x]["status"] == CAPTURE_FAILED for x in ("db-2", "db-3", "db-4"))
    shared = {(g["kind"], g["cause_class"]): g["hosts"] for g in doc["shared"]}
    assert shared[("accept_queue_overflow", "stall")] == ["web-1", "web-2"]
    text = md.read_text()
    assert "- Hosts with a finding: web-1, web-2." in text
    assert "| db-4 | capture failed | capture failed | capture failed | capture failed |" in text
    assert "- TCP accept queue overflow, the application stopped calling accept() (stall): web-1, web-2" in text
    # Nothing written into the host folders.
    assert not (d / "web-1" / "verdicts.json").exists()


def test_fleet_cli_errors_without_a_traceback(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, want in ((empty, "no host runs"), (tmp_path / "nowhere", "not a fleet directory")):
        r = subprocess.run(
            [sys.executable, "-m", "analysis", "fleet", str(target)], capture_output=True, text=True, cwd=ROOT
        )
        assert r.returncode == 2 and want in r.stderr and "Traceback" not in r.stderr, r.stderr
    with pytest.raises(RunDataError):
        fleet.write(empty)


def test_fleet_script_usage_errors(tmp_path: Path) -> None:
    script = str(ROOT / "scripts" / "fleet")
    assert "USAGE: scripts/fleet" in subprocess.run([script, "--help"], capture_output=True, text=True).stdout
    r = subprocess.run([script], capture_output=True, text=True)
    assert r.returncode == 2 and "-i INVENTORY is required" in r.stderr
    inv = tmp_path / "inv.ini"
    inv.write_text("[fleet]\nh1\n")
    r = subprocess.run([script, "-i", str(inv), "--scope", "every"], capture_output=True, text=True)
    assert r.returncode == 2 and "--scope must be all or sampled" in r.stderr


class _EpRun:
    def __init__(self, ep: pd.DataFrame) -> None:
        self.ep = ep

    def table(self, name: str) -> pd.DataFrame:
        assert name == "ep_loop"
        return self.ep


def test_per_thread_when_no_main_thread_waits_in_epoll() -> None:
    # A Go server whose main thread never calls epoll (what --scope sampled left of one capture).
    ep = pd.DataFrame(
        {"time_s": [1, 1, 2], "pid": [10] * 3, "tid": [11, 12, 11], "comm": ["srv"] * 3, "calls": [5, 6, 7]}
    ).astype({"pid": "Int64", "tid": "Int64", "comm": "string"})
    g = per_thread(_EpRun(ep))
    assert list(g["process_comm"]) == ["srv", "srv", "srv"]
