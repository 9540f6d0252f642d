"""Retransmit, TIME_WAIT and epoll chains on real captures (tests/fixtures/README.md)."""

from __future__ import annotations

import filecmp

import pytest

from analysis.derived import measurements
from analysis.derived.retransmits import reconcile
from analysis.derived.time_wait import observed_time_wait_length, tw_series
from analysis.kernel import EADDRNOTAVAIL
from analysis.load import Run
from analysis.rules import evaluate_all, time_wait
from analysis.rules.epoll import evaluate as epoll_evaluate
from analysis.wording import describe
from tests.conftest import ROOT, fixture_run

HEALTHY = ["accept-overflow-healthy", "retransmit-loss0", "time-wait-reuse", "epoll-idle"]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_have_no_finding_at_all(name: str) -> None:
    found = [f for f in evaluate_all(Run.open(fixture_run(name))) if f.status != "absent"]
    assert found == [], [(f.kind, f.subject) for f in found]


def _only(run: Run, kind: str):
    found = [f for f in evaluate_all(run) if f.status != "absent" and f.kind == kind]
    assert len(found) == 1, found
    return found[0]


def test_data_loss_is_confirmed_and_reconciles_exactly() -> None:
    run = Run.open(fixture_run("retransmit-loss1"))
    f = _only(run, "retransmit_storm")
    assert (f.status, f.cause_class) == ("confirmed", "data_loss")
    assert f.subject["netns"] == run.lab["client"]["netns_inode"]
    assert (f.subject["raddr"], f.subject["service_port"], f.subject["we_are"]) == ("198.18.0.1", 5201, "client")
    rec = reconcile(run, f.subject["netns"])
    assert rec["kernel_retrans_segs"] > 100
    assert abs(rec["probe_retrans_segs"] - rec["kernel_retrans_segs"]) <= max(1, 0.01 * rec["kernel_retrans_segs"])
    # iperf3's own count (TCP_INFO total_retrans) tells the same story.
    assert run.lab["iperf3"]["retransmits"] == pytest.approx(rec["kernel_retrans_segs"], rel=0.02)
    assert f.link("cause").evidence["lab_injected_loss_pct"] == 1
    rate = f.link("counter").evidence["retrans_rate_pct"]
    assert 0.5 <= rate <= 3, rate


def test_syn_loss_counts_syn_retransmits_apart() -> None:
    run = Run.open(fixture_run("retransmit-synloss"))
    f = _only(run, "retransmit_storm")
    assert f.cause_class == "syn_loss" and f.subject["service_port"] == 8080
    probe = f.link("probe").evidence
    assert probe["syn_segs"] > 20 and probe["data_segs"] == 0
    rec = reconcile(run, f.subject["netns"])
    # Within 1 %, plus what the kernel says it skipped (recursion misses, in metadata).
    slack = max(1, 0.01 * rec["kernel_syn_retrans"]) + (rec["probe_recursion_misses"] or 0)
    assert abs(rec["probe_syn_retrans"] - rec["kernel_syn_retrans"]) <= slack, rec


def test_port_exhaustion_is_confirmed_with_littles_law() -> None:
    run = Run.open(fixture_run("time-wait-exhaust"))
    f = _only(run, "time_wait_exhaustion")
    assert f.status == "confirmed" and f.subject["service_port"] == 8080
    counter, probe = f.link("counter").evidence, f.link("probe").evidence
    assert counter["ports_in_range"] == 200 and counter["time_wait_max"] >= 0.9 * 200
    assert f.link("symptom").evidence["eaddrnotavail_connect_calls"] > 0
    assert f.link("symptom").evidence["attempts_eaddrnotavail"] > 0
    assert abs(probe["littles_law_error_pct"]) <= 10
    assert f.link("cause").evidence["we_close_first_pct"] == 100.0
    assert f.link("fix").evidence["ranked"][0] == "connection_reuse"
    assert "does NOT shorten TIME_WAIT" in describe(f.kind, f.link("fix"))


def test_reuse_run_has_no_eaddrnotavail() -> None:
    run = Run.open(fixture_run("time-wait-reuse"))
    conn = run.table("tw_connect")
    assert int(conn.loc[conn["errno"] == EADDRNOTAVAIL, "failures"].sum()) == 0
    assert int((run.table("connects")["result"] == "ok").sum()) == len(run.table("connects"))


def test_lower_fin_timeout_leaves_time_wait_at_60_seconds() -> None:
    run = Run.open(fixture_run("time-wait-fin-timeout"))
    ns = run.lab["client"]["netns_inode"]
    assert run.sysctl(ns, "net.ipv4.tcp_fin_timeout") == "5"
    length = observed_time_wait_length(run, ns, "198.18.0.1", 8080)
    assert length is not None and 57 <= length <= 63, length
    # 12 s after the last close the sockets are all still there.
    tw = tw_series(run, ns, "198.18.0.1", 8080)
    assert int(tw.iloc[-1]) == int(tw.max()) > 100


def test_busy_event_loop_is_found_and_idle_is_not() -> None:
    run = Run.open(fixture_run("epoll-busy"))
    (f,) = [x for x in epoll_evaluate(run) if x.status != "absent"]
    assert f.subject["comm"] == "httpserver" and 8080 in f.subject["listen_ports"]
    assert f.link("probe").evidence["longest_never_waiting_run"] >= 3
    idle = Run.open(fixture_run("epoll-idle"))
    assert [x for x in epoll_evaluate(idle) if x.status != "absent"] == []


@pytest.mark.parametrize(
    "name", ["retransmit-loss1", "retransmit-synloss", "time-wait-exhaust", "epoll-busy", "accept-overflow-sizing"]
)
def test_probe_to_csv_reproduces_the_captured_tables(name: str, tmp_path) -> None:
    """The converter is deterministic, and per-interval rows add up to the probe's final totals."""
    import subprocess

    run = fixture_run(name)
    for raw in sorted(run.glob("probe_*.out")):
        subprocess.run(
            [str(ROOT / "collector" / "probe-to-csv"), str(raw), str(tmp_path)], check=True, capture_output=True
        )
    for csv in tmp_path.glob("*.csv"):
        assert filecmp.cmp(csv, run / csv.name, shallow=False), csv.name
    raw = (run / "probe_retransmits.out").read_text().splitlines()
    last = [line for line in raw if line.startswith("@rt_endpoint__data_segs[")]
    if last:
        total = int(last[-1].rsplit(": ", 1)[1])
        assert int(Run.open(run).table("rt_endpoint")["data_segs"].sum()) == total


def test_measurements_block() -> None:
    m = measurements.all_measurements(Run.open(fixture_run("time-wait-exhaust")))
    (tw,) = m["time_wait"]
    assert tw["time_wait_peak"] == 200 and 57 <= tw["time_wait_length_observed_s"] <= 63


def test_contract3_failed_connects_name_destination_and_caller() -> None:
    """time_wait.bt of contract 3 counts failed connects from SYN_SENT -> CLOSE, per destination."""
    run = Run.open(fixture_run("time-wait-exhaust-c3"))
    assert run.metadata["data_contract"] == 3
    conn = run.table("tw_connect")
    failed = conn[conn["errno"] == EADDRNOTAVAIL]
    assert set(zip(failed["raddr"], failed["rport"], failed["comm"], strict=True)) == {("198.18.0.1", 8080, "connload")}
    client = int((run.table("connects")["errno"] == "EADDRNOTAVAIL").sum())
    assert int(failed["failures"].sum()) >= client > 0
    (f,) = [f for f in time_wait.evaluate(run) if f.kind == "time_wait_exhaustion"]
    assert f.status == "confirmed"
    # The sampled lifetimes estimate every connection: 1 in 16 of 400 sockets, each counting 16.
    lives = run.table("tw_close")[["life_lt_1ms", "life_lt_10ms", "life_lt_100ms", "life_lt_1s"]].sum().sum()
    assert lives % 16 == 0 and 0 < lives < 2 * 400
