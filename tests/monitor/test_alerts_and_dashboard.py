"""Alert rules, their promtool unit tests, the Grafana dashboard and the textfile format,
all checked against the one metric list (monitor/exporter/metrics.py METRICS)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from monitor import exporter
from monitor.exporter.cli import parse_args
from monitor.exporter.metrics import metrics_doc
from monitor.exporter.rows import ROWS_USED
from monitor.exporter.run import Exporter
from monitor.exporter.stream import CsvRows
from tests.conftest import FIXTURES, ROOT

MON = ROOT / "monitor"
RULES = MON / "tq.rules.yml"
DASHBOARD = MON / "grafana-dashboard.json"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
# Metrics the rules may use that node_exporter itself exports.
NODE_EXPORTER_METRICS = {"node_textfile_mtime_seconds", "node_textfile_scrape_error"}


def _promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is missing: make setup installs Debian's prometheus package")
    return tool


def _metric_names(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values are not metric names
    return set(re.findall(r"\b((?:tq|node)_[a-z0-9_]+)\b", expr))


def test_promtool_checks_the_rules() -> None:
    r = subprocess.run([_promtool(), "check", "rules", RULES], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    r = subprocess.run([_promtool(), "test", "rules", "tq.rules.test.yml"], cwd=MON, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_alert_uses_known_metrics_and_links_an_existing_runbook_section() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
        for line in RUNBOOKS.read_text().splitlines()
        if line.startswith("## ")
    }
    names = {r["alert"] for r in rules}
    assert {
        "TQAcceptQueueOverflow",
        "TQSynRetransmits",
        "TQEphemeralPortsNearExhaustion",
        "TQEventLoopNeverBlocked",
    } <= names
    for r in rules:
        unknown = _metric_names(r["expr"]) - set(exporter.METRICS) - NODE_EXPORTER_METRICS
        assert not unknown, (r["alert"], unknown)
        url = r["annotations"]["runbook_url"]
        assert url.split("#")[0].endswith("docs/runbooks.md"), url
        assert url.split("#")[1] in anchors, (r["alert"], url)


def test_dashboard_queries_only_metrics_that_exist_and_shows_them_all() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used <= set(exporter.METRICS), used - set(exporter.METRICS)
    assert set(exporter.METRICS) <= used, set(exporter.METRICS) - used
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for q in dash["templating"]["list"]:
        if q["type"] == "query":
            assert _metric_names(q["definition"]) <= set(exporter.METRICS)


def test_metric_names_follow_the_conventions() -> None:
    for name, m in exporter.METRICS.items():
        assert name.startswith("tq_")
        assert name.endswith("_total") == (m.kind == "counter"), name
        assert not re.search(r"_(ms|us|ns|kb|mb|percent)\b", name), name  # base units
        assert m.file in exporter.FILES


def _feed(ex: Exporter, raw: Path, family: str) -> int:
    """Rows as a live probe gives them (through collector/probe-to-csv --stream, as the
    exporter reads them), with a write after each interval (as the exporter does)."""
    cmd = [ROOT / "collector" / "probe-to-csv", "--stream", ROOT / "probes" / f"{family}.bt"]
    r = subprocess.run([*cmd, "--only", ",".join(ROWS_USED)], input=raw.read_bytes(), capture_output=True, check=True)
    n, last = 0, None
    for rec, row in CsvRows().feed(r.stdout):
        if last is not None and row["time_s"] != last:
            ex.write(time.monotonic())
        last = row["time_s"]
        ex.row(rec, row)
        n += 1
    return n


def test_textfiles_from_real_probe_output_pass_promtool_and_stay_bounded(tmp_path: Path) -> None:
    """Real probe output of a non-lab capture (host-overflow: nginx and a small Python
    listener) and of the busy labs, through the exporter's rows and writer: each file
    passes `promtool check metrics`, has no timestamps, and with --top 2 no family has
    more than 2 objects plus "other"."""
    ex = Exporter(parse_args(["--prom-dir", str(tmp_path / "prom"), "--state-dir", str(tmp_path / "st"), "--top", "2"]))
    ex.out.mkdir(parents=True)
    ex.ns.scan(time.monotonic())
    fed = 0
    for fixture, family in [
        ("host-overflow", "accept_queue"),
        ("host-overflow", "retransmits"),
        ("host-loop", "epoll"),
        ("time-wait-exhaust-c3", "time_wait"),
        ("accept-overflow-sizing-busy", "retransmits"),
    ]:
        fed += _feed(ex, FIXTURES / fixture / f"probe_{family}.out", family)
    assert fed > 100
    ex.write(time.monotonic())
    files = sorted(ex.out.glob("tq_*.prom"))
    assert {f.name for f in files} == {f"tq_{f}.prom" for f in exporter.FILES}
    assert not list(ex.out.glob(".*tmp"))
    text = "".join(f.read_text() for f in files)
    for f in files:
        r = subprocess.run([_promtool(), "check", "metrics"], input=f.read_text(), capture_output=True, text=True)
        assert r.returncode == 0, (f.name, r.stdout + r.stderr)
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(len(line.rsplit(" ", 2)) == 2 or line.count("} ") == 1 for line in samples)
    # The small Python listener that overflowed is there with its own numbers.
    assert re.search(r'tq_listener_queue_limit\{netns="\d+",laddr="127.0.0.1",lport="18090",member="\d+"\} 8\n', text)
    full = re.search(
        r'tq_listener_queue_full_total\{netns="\d+",laddr="127.0.0.1",lport="18090",member="\d+"\} (\d+)', text
    )
    assert full and int(full.group(1)) > 0
    # Bounded: at most top (2) objects per family, plus the "other" series.
    for fam, labels in exporter.OBJECT_LABELS.items():
        objs = {tuple(m) for m in re.findall(r"\{" + ",".join(f'{k}="([^"]*)"' for k in labels) + r"\}", text)}
        assert len(objs - {("other",) * len(labels)}) <= 2, (fam, objs)
    assert re.search(r'tq_exporter_objects\{family="listener",state="other"\} [1-9]', text)
    # The captures' threads exited long ago: no loop series is left for them.
    assert 'tq_exporter_objects{family="loop",state="exported"} 0' in text


def test_metrics_doc_is_current() -> None:
    assert (MON / "metrics.md").read_text() == metrics_doc(), (
        "run: PYTHONPATH=. python3 -m monitor.exporter --metrics-doc > monitor/metrics.md"
    )
