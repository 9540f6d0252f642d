"""Every sentence is written from numbers, never from None, NaN or a Python repr.

Each template analysis/wording knows is rendered twice: with every evidence number
missing (an empty evidence dict, and every named number None), and with the
real numbers of every fixture in tests/fixtures (all rules on each run, every
finding worded, plus the report and measurements text). No rendered text may
hold None, nan, a brace, a bracket (a raw list) or a numpy repr.
"""

from __future__ import annotations

import math
import re
import string
from functools import cache
from importlib import import_module

import pandas as pd
import pytest

from analysis import wording
from analysis.derived import measurements
from analysis.families import FAMILIES
from analysis.findings import Finding, Link
from analysis.load import Run
from analysis.render import compare as render_compare
from analysis.render import measurements as measurements_md
from analysis.render import report
from analysis.rules import evaluate_all
from tests.conftest import FIXTURES

BAD = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\binf\b|[{}\[\]]|np\.|numpy|(?<!\.)\.\.(?!\.)|\s[.,;]")
RUNS = sorted(p.name for p in FIXTURES.iterdir() if (p / "metadata.json").is_file())
# Template keys no real capture in tests/fixtures (or a cut-down copy of one below) reaches yet.
# Rendered with missing numbers only; drop a key from here once a fixture produces it.
NOT_IN_ANY_FIXTURE = {
    ("accept_queue_overflow", "counter", "not_sampled"),
    # A queue at limit + 1 while the captured counter did not rise: no real capture yet (a copy of
    # one in tests/analysis/rules/test_accept_queue.py renders it).
    ("accept_queue_overflow", "probe", "full_no_drops"),
    ("accept_queue_overflow", "counter", "no_overflows_then"),
    ("accept_queue_overflow", "symptom", "not_captured"),
    ("event_loop_saturation", "symptom", "not_captured"),
    ("retransmit_storm", "symptom", "rate_only"),
    # The accept-queue probe missing and the server's counters not sampled: copies of real
    # captures in tests/analysis/rules/test_absent_evidence.py render them.
    ("retransmit_storm", "cause", "unknown"),
    ("retransmit_storm", "fix", "unknown"),
    # A flow the socket scan never listed: a copy of the busy-host capture without the bulk flows'
    # rows, in tests/analysis/rules/test_retransmits.py, renders it.
    ("retransmit_storm", "probe", "dsack_unread"),
    # The loop rule's other verdicts and a healthy member's counter that moved: copies of real
    # captures in tests/analysis/rules/test_loop_window.py and test_accept_queue.py render them.
    ("event_loop_saturation", "probe", "off_cpu"),
    ("event_loop_saturation", "probe", "unknown"),
    ("event_loop_saturation", "probe", "busy_briefly"),
    ("event_loop_saturation", "probe", "unknown_process"),
    ("accept_queue_overflow", "counter", "drops_not_overflows"),
    # The probe's timer not running through a stall: a copy of a real capture with two ticks folded
    # into the next, in tests/analysis/rules/test_accept_queue.py, renders them.
    ("accept_queue_overflow", "cause", "probe_gap"),
    ("accept_queue_overflow", "fix", "probe_gap"),
    ("accept_queue_overflow", "counter", "no_listen_drops"),
    # A host with one end of a flow only: copies of the socket-buffers captures with the other
    # namespace taken away, in tests/analysis/rules/test_socket_buffers.py, render them.
    ("socket_buffer_limit", "symptom", "flow_rate"),
    ("socket_buffer_limit", "probe", "reader_queue"),
    ("socket_buffer_limit", "cause", "peer_window"),
    ("socket_buffer_limit", "fix", "peer_window"),
}


# An IPv6 address with its port, as a listener is written ([::]:3000): brackets that are
# not a Python list.
IPV6_WITH_PORT = re.compile(r"\[[0-9a-fA-F:.]+\](?=:\d)")


def _clean(text: str, where: str) -> None:
    assert text.strip(), f"{where}: empty"
    m = BAD.search(IPV6_WITH_PORT.sub("ADDR", text))
    assert m is None, f"{where}: {m.group()!r} in: {text}"


def _fields(parts) -> set[str]:
    out: set[str] = set()
    for p in parts if not isinstance(parts, str) else (parts,):
        texts = (p.text, p.alt) if isinstance(p, wording.Opt) else (p,)
        for t in texts:
            for _, name, _, _ in string.Formatter().parse(t):
                if name:
                    out.add(re.split(r"[.\[]", name)[0])
    return out


def _cut_down_runs() -> list[tuple[str, Run]]:
    """Real captures with one input taken away: the keys a real capture reaches only then."""
    out = []
    run = Run.open(FIXTURES / "accept-overflow-sizing")
    run._cache["aq_listener"] = run.table("aq_listener").iloc[0:0]  # the probe saw no listener
    out.append(("accept-overflow-sizing without aq_listener", run))
    run = Run.open(FIXTURES / "time-wait-exhaust")
    m = dict(run.metadata)
    run.metadata = {**m, "probes": {k: v for k, v in m["probes"].items() if k != "time_wait"}}
    run._cache["tw_connect"] = run.table("tw_connect").iloc[0:0]
    run._cache["tw_close"] = run.table("tw_close").iloc[0:0]
    out.append(("time-wait-exhaust without the time_wait probe", run))
    run = Run.open(FIXTURES / "accept-overflow-sizing")
    run._cache["sysctls"] = run.table("sysctls").iloc[0:0]
    out.append(("accept-overflow-sizing without sysctls", run))
    run = Run.open(FIXTURES / "accept-overflow-sizing")
    run._cache["connects"] = run.table("connects").iloc[0:0]  # no lab client log
    out.append(("accept-overflow-sizing without connects.csv", run))
    run = Run.open(FIXTURES / "accept-overflow-sizing")
    run._cache["connects"] = run.table("connects").iloc[0:0]
    run._cache["aq_listener"] = run.table("aq_listener").iloc[0:0]
    out.append(("accept-overflow-sizing without connects.csv and aq_listener", run))
    run = Run.open(FIXTURES / "accept-overflow-sizing")  # no lab at all, no retransmits probe
    m = dict(run.metadata)
    run.metadata = {**m, "lab": None, "probes": {k: v for k, v in m["probes"].items() if k != "retransmits"}}
    run._cache["connects"] = run.table("connects").iloc[0:0]
    run._cache["rt_endpoint"] = run.table("rt_endpoint").iloc[0:0]
    out.append(("accept-overflow-sizing without the lab and the retransmits probe", run))
    run = Run.open(FIXTURES / "time-wait-exhaust")  # contract 2: failures with no destination recorded
    run._cache["tw_sockets"] = run.table("tw_sockets").iloc[0:0]
    out.append(("time-wait-exhaust without tw_sockets", run))
    return out


@cache
def _real() -> list[tuple[str, Run, list[Finding]]]:
    runs = [(name, Run.open(FIXTURES / name)) for name in RUNS] + _cut_down_runs()
    return [(name, run, evaluate_all(run)) for name, run in runs]


def test_every_template_renders_with_every_number_missing() -> None:
    for (kind, link, key), parts in wording.TEMPLATES.items():
        names = _fields(parts)
        for ev in ({}, dict.fromkeys(names), {n: float("nan") for n in names}):
            text = wording.describe(kind, Link(link, key, ev))
            _clean(text, f"{kind}/{link}/{key} with {sorted(ev) or 'no evidence'}")
    for kind_key, parts in wording.MODEL_TEMPLATES.items():
        for ev in ({"kind": kind_key}, {"kind": kind_key, **dict.fromkeys(_fields(parts))}):
            text = wording.model_sentence(ev)
            if text:
                _clean(text, f"model {kind_key}")


def test_each_family_module_words_its_own_finding() -> None:
    """A family's templates, title and causes come from its module of probes/families.conf."""
    for fam in FAMILIES.values():
        own = import_module(fam.wording_module).WORDING
        assert own.kind == fam.finding, fam.wording
        assert wording.TITLES[own.kind] == own.title
        assert {(own.kind, *k) for k in own.templates} == {k for k in wording.TEMPLATES if k[0] == own.kind}
        assert set(own.causes.items()) <= set(wording.CAUSE_NAMES.items())
    assert {kind for kind, _, _ in wording.TEMPLATES} == set(wording.TITLES) == {f.finding for f in FAMILIES.values()}


def test_every_headline_renders_with_every_subject_number_missing() -> None:
    subjects = [
        {"netns": None, "netns_label": None, "laddr": None, "lport": None, "pid": None, "comm": None},
        {"netns": None, "netns_label": None, "raddr": None, "service_port": None},
        {"netns": None, "netns_label": None, "laddr": None, "raddr": None, "service_port": None, "we_are": None},
        {"pid": None, "comm": None, "listen_ports": []},
        {},
    ]
    for kind in wording.TITLES:
        for status in wording.STATUS_WORDS:
            for subject in subjects:
                if kind == "event_loop_saturation" or "listen_ports" not in subject:
                    _clean(wording.headline(Finding(kind, status, subject)), f"headline {kind} {subject}")


def test_every_real_finding_is_worded_from_its_numbers() -> None:
    reached: set[tuple[str, str, str]] = set()
    for name, run, findings in _real():
        for f in findings:
            _clean(wording.headline(f), f"{name}: headline")
            for link in f.chain:
                assert (f.kind, link.link, link.key) in wording.TEMPLATES, (name, f.kind, link.link, link.key)
                reached.add((f.kind, link.link, link.key))
                _clean(wording.describe(f.kind, link), f"{name}: {f.kind}/{link.link}/{link.key}")
        m = measurements.all_measurements(run)
        _clean("\n".join(measurements_md.markdown(m)) or "-", f"{name}: measurements")
        _clean(report.markdown(run, findings, [], m), f"{name}: report.md")
    assert set(wording.TEMPLATES) - reached <= NOT_IN_ANY_FIXTURE, sorted(set(wording.TEMPLATES) - reached)


def test_known_defects_stay_fixed() -> None:
    by_run = {name: findings for name, _, findings in _real()}
    text = {
        name: "\n".join(wording.describe(f.kind, link) for f in fs for link in f.chain) for name, fs in by_run.items()
    }
    # SYN-ACK retransmits are counted in the "below a storm" sentence.
    assert "31 SYN-ACK retransmits" in text["accept-overflow-queue"]
    # Errors are words, not a dict.
    assert "77 connect() timed out and 41 timed out waiting for the reply" in text["accept-overflow-queue"]
    # TIME_WAIT without its probe: not checked, and the sentence says why.
    (tw,) = [f for f in by_run["time-wait-exhaust without the time_wait probe"] if f.kind == "time_wait_exhaustion"]
    assert tw.status in ("not_checked", "suspected")
    (tw,) = [f for f in by_run["accept-overflow-queue"] if f.kind == "time_wait_exhaustion"]
    assert tw.status == "not_checked" and "time_wait probe" in wording.describe(tw.kind, tw.chain[-1])
    assert "not checked" in wording.headline(tw)
    # An overflow the probe did not pin on a listener is worded, not dumped.
    assert "no listener it tracked was seen full" in text["accept-overflow-sizing without aq_listener"]


def test_sizing_says_how_often_the_queue_was_full_at_an_interval_end() -> None:
    def cause(n: int) -> str:
        ev = {"limit_effective": 16, "peak_enqueues_per_interval": 40, "intervals_full_at_end": n}
        return wording.describe("accept_queue_overflow", Link("cause", "sizing", ev))

    assert "never full at an interval end" in cause(0)
    assert "full at the end of 1 interval(s), never two in a row" in cause(1)


def test_values_are_written_as_numbers() -> None:
    import numpy as np

    assert wording.number(np.float64(1.5)) == "1.5"
    assert wording.number(np.int64(7)) == "7"
    assert wording.number([8080, 8443]) == "8080 and 8443"
    assert wording.number(3.0) == "3"
    with pytest.raises(TypeError):
        wording.number({"a": 1})
    # Evidence reaches verdicts.json as plain numbers.
    link = Link("probe", "waits", {"x": np.float64(0.5), "y": [np.int64(1)]})
    assert type(link.evidence["x"]) is float and type(link.evidence["y"][0]) is int


def test_comparison_and_sweep_text_say_when_a_number_is_missing() -> None:
    v = {"a": "defaults", "b": "tuned"}
    nan = float("nan")
    r = {"label": "failed connection attempts", "a_mean": nan, "b_mean": 3.0, "diff": nan, "ci_low": nan,
         "ci_high": nan, "outcome": "no_difference", "better": "lower", "n_a": 0, "n_b": 3, "significant": False,
         "metric": "failed"}  # fmt: skip
    line = wording.compare_line(v, r)
    _clean(line, "compare line")
    assert "not measured under defaults" in line
    summary = pd.DataFrame([r])
    md = render_compare.markdown(
        {**v, "lab": "x", "variant": "y", "headline": r, "others": [], "metrics": [r], "repeat": 3,
         "overrides": {}, "profile_caveats": []},
        summary,
        "",
    )  # fmt: skip
    _clean(md.replace("![per-run values]()", ""), "compare markdown")
    assert not math.isnan(3.0)
