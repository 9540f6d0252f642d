"""analysis/render/report.py on a real captured run: the files it writes and report.md's sections."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from analysis.derived.measurements import all_measurements
from analysis.families import NAMES
from analysis.load import Run
from analysis.render import report
from analysis.rules import evaluate_all
from tests.conftest import fixture_run

STALL = "accept-overflow-stall"
STALL_PLOTS = [
    ("Accept queue depth vs limit, port 8080", "accept_queue_8080_4026532177.png"),
    ("Listen overflow counters in tq-accept-overflow-srv-7724", "listen_overflows_4026532177.png"),
    ("Retransmits in tq-accept-overflow-cli-7724", "retransmits_4026532246.png"),
    ("Client connect latency", "connect_latency.png"),
]


@pytest.fixture
def stall(copy_fixture) -> Path:
    return copy_fixture(STALL)


def test_report_writes_its_outputs(stall: Path) -> None:
    md, findings = report.write_report(stall)
    assert md == stall / "report.md"
    names = sorted(f for _, f in STALL_PLOTS)
    assert sorted(p.name for p in (stall / "plots").iterdir()) == sorted([*names, ".report-plots.json"])
    assert json.loads((stall / "plots" / ".report-plots.json").read_text()) == names
    assert all((stall / "plots" / n).read_bytes().startswith(b"\x89PNG") for n in names)
    doc = json.loads((stall / "verdicts.json").read_text())
    assert doc["schema_version"] == report.VERDICTS_SCHEMA_VERSION and doc["run"] == STALL
    assert [f["kind"] for f in doc["findings"]] == [f.kind for f in findings if f.is_finding]
    assert [f["kind"] for f in doc["findings"]] == ["accept_queue_overflow", "retransmit_storm"]
    assert set(doc["measurements"]) == {"retransmit_reconciliation", "time_wait"}
    assert not list(stall.rglob("*.tmp*"))


def test_report_md_sections_in_order(stall: Path) -> None:
    text = report.write_report(stall)[0].read_text()
    assert text.startswith(f"# Report: {STALL}\n\n- Captured ")
    assert re.findall(r"^## (.*)$", text, re.M) == ["Findings", "Ruled out", "Measurements", "Plots"]
    heads = re.findall(r"^### (.*)$", text, re.M)
    assert heads[0].startswith("TCP accept queue overflow on 198.18.0.1:8080") and "(stall)" in heads[0]
    assert heads[1].startswith("TCP retransmit storm") and heads[2:] == ["retransmit reconciliation", "time wait"]
    assert "1. **symptom** — " in text and "\n| netns_label | endpoint | time_wait_peak |" in text
    plots_section = text.split("## Plots\n\n", 1)[1]
    assert plots_section == "".join(f"![{c}](plots/{f})\n\n" for c, f in STALL_PLOTS)


def test_a_second_report_replaces_its_own_plots_only(stall: Path) -> None:
    report.write_report(stall)
    (stall / "plots" / "mine.png").write_bytes(b"not the report's")
    before = (stall / "report.md").read_text()
    report.write_report(stall)
    assert (stall / "report.md").read_text() == before
    assert (stall / "plots" / "mine.png").read_bytes() == b"not the report's"


def test_markdown_of_an_incomplete_run_says_so() -> None:
    run = Run.open(fixture_run(STALL))
    run.validate_all()
    meta = copy.deepcopy(run.metadata)
    meta.update(complete=False, stop_reason="killed")
    meta["probes"]["epoll"]["status"] = "interrupted"
    run.metadata = meta
    text = report.markdown(run, evaluate_all(run), [], all_measurements(run))
    assert (
        "**This run is incomplete** (killed): the capture was killed (SIGKILL) and reaped afterwards; what it had "
        "not yet written is missing. Probes that did not finish: epoll (interrupted)." in text
    )
    assert "## Plots" not in text


def test_a_run_without_a_probe_says_what_it_cannot_see() -> None:
    """host-overflow-noaq ran without the accept-queue probe: the report says what that hides
    and how to see it; the families that ran get no such line."""
    run = Run.open(fixture_run("host-overflow-noaq"))
    run.validate_all()
    text = report.markdown(run, evaluate_all(run), [], all_measurements(run))
    assert "- Without the accept_queue probe (not run) this run cannot see the queue between samples" in text
    assert "`make capture PROBES=accept_queue`" in text
    assert "Without the retransmits probe" not in text and "Without the time_wait probe" not in text
    meta = copy.deepcopy(run.metadata)
    meta["probes"] = {}
    run.metadata = meta
    text = report.markdown(run, evaluate_all(run), [], all_measurements(run))
    assert "- Probes: none (the sampled tier" in text
    assert text.count("- Without the ") == len(NAMES)


def test_ruled_out_lists_at_most_its_share_per_kind_and_counts_the_rest() -> None:
    """An hour on a busy host rules out thousands of endpoints: the report shows the first of each
    kind and how many more; verdicts.json keeps every one."""
    from analysis.findings import Finding
    from analysis.render.report import STATUS_BULLETS_PER_KIND, _status_lines

    many = [
        Finding("time_wait_exhaustion", "absent", {"netns": 1, "raddr": f"10.0.0.{i}", "service_port": 80})
        for i in range(STATUS_BULLETS_PER_KIND + 7)
    ]
    lines = _status_lines(many, "absent", "Ruled out", [])
    bullets = [ln for ln in lines if ln.startswith("- ")]
    assert len(bullets) == STATUS_BULLETS_PER_KIND + 1
    assert bullets[-1].startswith("- ... and 7 more: ") and "absent (verdicts.json lists each)" in bullets[-1]
    assert not any(ln.startswith("- ... and") for ln in _status_lines(many[:3], "absent", "Ruled out", []))


def test_the_report_says_how_many_lines_of_each_probes_output_the_parser_did_not_know(copy_fixture) -> None:
    """metadata.json's probes.<family>.unknown_lines (collector/capture, from probe-to-csv's count):
    a probe that left any is named with its count under the report's notes about the input, and in
    verdicts.json's input_notes; one that left none is not named."""
    run_dir = copy_fixture(STALL)
    meta_path = run_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    for info in meta["probes"].values():
        info["unknown_lines"] = 0
    # The raw tier's accept_queue file under bpftrace 0.23 beside a busy-host run: 491 helper
    # warnings of 4 lines each (issue 35).
    meta["probes"]["accept_queue"]["unknown_lines"] = 1964
    meta_path.write_text(json.dumps(meta, indent=2))
    text = report.write_report(run_dir)[0].read_text()
    notes = text.split("Input oddities (accepted; the data may have been damaged):\n", 1)[1].split("\n\n", 1)[0]
    said = [n for n in notes.splitlines() if "lines the parser did not know" in n]
    assert len(said) == 1 and said[0].startswith(f"- {run_dir / 'probe_accept_queue.out'}: 1964 lines "), notes
    line = next(i for i, ln in enumerate(meta_path.read_text().splitlines(), 1) if '"unknown_lines": 1964' in ln)
    assert f"({meta_path}:{line})" in said[0]
    doc = json.loads((run_dir / "verdicts.json").read_text())
    assert [n for n in doc["input_notes"] if "did not know" in n] == [said[0][2:]]
