"""analysis/load/run_checks.py on damaged copies of a real lab capture (issue 18's "also found").

A file metadata.json names that is missing or empty (connects.csv deleted, or cut to its
header, while metadata.json names it as the lab client's log: validate said "connects: 0 rows
ok" and the report dropped the client's evidence without a word), and a listener's limit
changed in aq_listener.csv alone (aq_listen.csv and ss still showing the old one: the chain's
numbers changed without a note). Now validate warns, naming the file and line, and the report
says it at the top."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.load import Run
from tests.conftest import FIXTURES, ROOT


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


def _set_limit(run: Path, port: str, limit: str) -> int:
    f = run / "aq_listener.csv"
    rows = list(csv.reader(f.open()))
    col, lp, n = rows[0].index("limit"), rows[0].index("lport"), 0
    for r in rows[1:]:
        if r[lp] == port:
            r[col], n = limit, n + 1
    with f.open("w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows(rows)
    return n


def test_a_limit_only_the_probe_table_shows_is_named(copy_fixture) -> None:
    run = copy_fixture("accept-overflow-stall")
    assert _set_limit(run, "8080", "256") >= 3  # ss and listen() said 128
    v = subprocess.run([sys.executable, "-m", "analysis", "validate", str(run)], capture_output=True, text=True,
                       cwd=ROOT)  # fmt: skip
    warnings = [ln for ln in v.stdout.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and "aq_listener.csv:" in warnings[0], v.stdout
    assert "limit 256" in warnings[0] and "showed 128" in warnings[0], warnings
    r = subprocess.run([sys.executable, "-m", "analysis", "report", str(run)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "the tables disagree" in (run / "report.md").read_text().split("## Findings")[0]


def test_no_real_capture_has_a_warning() -> None:
    """Every committed capture (real runs, tests/fixtures) validates without a warning: a limit
    an application changed (memcached's listen(fd, 0)) is seen by ss or listen() too."""
    runs = sorted(p.parent for p in FIXTURES.glob("*/metadata.json"))
    assert len(runs) > 20
    for path in runs:
        run = Run.open(path)
        run.validate_all()
        assert run.warnings == [], (path.name, run.warnings)


def test_listener_rows_moved_to_a_namespace_nothing_else_knows_are_named(copy_fixture) -> None:
    run = copy_fixture("accept-overflow-stall")
    f = run / "aq_listener.csv"
    rows = list(csv.reader(f.open()))
    ns, lp = rows[0].index("netns"), rows[0].index("lport")
    mine = [r for r in rows[1:] if r[lp] == "8080"]
    for r in mine[::2]:  # every other interval of the lab's listener
        r[ns] = "4026539999"
    with f.open("w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows(rows)
    r = Run.open(run)
    r.validate_all()
    assert len(r.warnings) == 1 and "namespace 4026539999, which no other table knows" in r.warnings[0], r.warnings
    assert "tq-accept-overflow-srv" in r.warnings[0]


def test_a_sockets_rows_moved_to_a_namespace_nothing_else_knows_are_named(copy_fixture) -> None:
    """Contract 10: every other interval of the stalled SO_REUSEPORT member moved to a namespace the
    run never sampled. The socket's inode places it: the input note names it and where ss saw it,
    and the moved rows are not judged (not checked, never a finding in that namespace)."""
    from analysis.rules import evaluate_all

    run = copy_fixture("accept-overflow-reuseport-stall")
    f = run / "aq_listener.csv"
    rows = list(csv.reader(f.open()))
    ns, ino = rows[0].index("netns"), rows[0].index("sock_ino")
    full = [r for r in rows[1:] if int(r[rows[0].index("depth_now")]) > 0]
    stalled = full[0][ino]
    mine = [r for r in rows[1:] if r[ino] == stalled]
    for r in mine[::2]:
        r[ns] = "4026539999"
    with f.open("w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows(rows)
    r = Run.open(run)
    r.validate_all()
    named_here = [w for w in r.warnings if f"(socket {stalled}) in namespace 4026539999" in w]
    assert named_here and "tq-accept-overflow-srv" in named_here[0], r.warnings
    found = evaluate_all(r)
    assert not [x for x in found if x.is_finding and x.subject.get("netns") == 4026539999]
    named = [x for x in found if x.is_finding and x.kind == "accept_queue_overflow"]
    assert [str(x.subject["sock_ino"]) for x in named] == [stalled]
