"""Retransmit, TIME_WAIT and epoll labs with real bpftrace, real servers and real load."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.derived.epoll import epoll_sweep, per_process
from analysis.derived.retransmits import endpoint_rows, reconcile
from analysis.derived.time_wait import littles_law, observed_time_wait_length
from analysis.kernel import EADDRNOTAVAIL, TCP_TIMEWAIT_LEN_S
from analysis.load import Run
from tests.conftest import ROOT, leftovers
from tests.integration.children import run_to_end

pytestmark = pytest.mark.integration


def run_lab(lab: str, variant: str, out: Path, timeout: int = 240, *, report: bool = True, **env: str) -> Run:
    r = run_to_end(
        [str(ROOT / "scripts" / "lab"), lab, variant, "--out", str(out), *([] if report else ["--no-report"])],
        timeout=timeout,
        env={**os.environ, **env},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not leftovers(f"tq-{lab}"), leftovers(f"tq-{lab}")
    return Run.open(out)


def findings(run: Run, kind: str | None = None) -> list[dict]:
    """The lab's findings: about its own namespaces, or naming none. The probes see the whole
    host, and CI runs two streams of integration tests at once: another test's lab is not
    this one's to judge."""
    v = json.loads((run.path / "verdicts.json").read_text())
    ours = {int(run.lab[side]["netns_inode"]) for side in ("server", "client") if side in run.lab}
    return [f for f in v["findings"] if (kind is None or f["kind"] == kind)
            and (not ours or f["subject"].get("netns") in (None, *ours))]  # fmt: skip


# The most segments one retransmit carries with GSO on: 64 KiB of 1448-byte segments (the labs'
# veth, MTU 1500, timestamps on).
GSO_SEGS_MAX = 65536 // 1448


def missed_segments(run: Run, rec: dict) -> int:
    """The most segments the probe can have missed: the events the kernel says it did not run the
    capture's programs for (recursion misses: another BPF program ran on that CPU, as two streams
    of probe tests do on CI), each as many segments as one retransmit carries: one where the lab's
    client sends one segment a packet, a whole GSO skb with GSO on (a run beside the busy-host lab
    was one 45-segment retransmit short with 9 misses)."""
    misses = rec["probe_recursion_misses"]
    assert misses is not None
    return misses * (GSO_SEGS_MAX if run.lab["gso"] == "on" else 1)


@pytest.mark.parametrize("variant", ["loss1", "loss5", "synloss"])
def test_lossy_variants_reconcile_with_the_kernel(kernel, tmp_path: Path, variant: str) -> None:
    run = run_lab("retransmit", variant, tmp_path / variant)
    client = run.lab["client"]["netns_inode"]
    rec = reconcile(run, client)
    assert rec["kernel_retrans_segs"] > 20
    # Within 1 % or one retransmit, plus what the probe was not run for. A retransmit is one
    # segment with GSO off, many with it on (loss5): once (CI, 2026-11-28, loss5) the probe
    # counted 3 989 against the kernel's 4 034, a 45-segment retransmit short, with no recursion
    # miss and no failed attempt (cause not found, like the SYN note below; runs here exact).
    ep = endpoint_rows(run, client)
    segs, events = int(ep["data_segs"].sum()), int(ep["data_events"].sum())
    assert (segs > events) if run.lab["gso"] == "on" else (segs == events), (segs, events)
    misses = rec["probe_recursion_misses"]
    one_retransmit = GSO_SEGS_MAX if run.lab["gso"] == "on" else 2  # 2: see the SYN note below
    tol = max(one_retransmit, 0.01 * rec["kernel_retrans_segs"]) + missed_segments(run, rec)
    assert abs(rec["probe_retrans_segs"] - rec["kernel_retrans_segs"]) <= tol, json.dumps(rec)
    # Never over; short by what the tracepoint did not deliver (docs/probes.md, "When the
    # tracepoints deliver nothing"): in two CI runs the kernel counted 125 and 150 TCPSynRetrans in
    # the client namespace and the probe 123 and 147, with no failed attempt and no recursion miss.
    short_syn = max(3, 0.03 * rec["kernel_syn_retrans"]) + misses
    assert -short_syn <= rec["probe_syn_retrans"] - rec["kernel_syn_retrans"] <= 2, rec
    (f,) = findings(run, "retransmit_storm")
    assert f["status"] == "confirmed"
    assert f["cause_class"] == ("syn_loss" if variant == "synloss" else "data_loss")
    if variant != "synloss":
        flows = run.table("rt_flow")
        flows = flows[flows["netns"] == client]
        ep = endpoint_rows(run, client)
        # Every data retransmit is counted per flow as well...
        assert int(flows["data_segs"].sum()) == int(ep["data_segs"].sum())
        # ...and the flow's rate against its own data segments, less the re-sent segments its
        # peer reported received twice (a busy host's early timeouts: 2366 of 3267 in a run
        # beside the busy-host lab), is the loss the lab put on its packets (not diluted by
        # whatever else the namespace sends).
        (probe,) = [link["evidence"] for link in f["chain"] if link["link"] == "probe"]
        loss_pct = {"loss1": 1, "loss5": 5}[variant]
        assert 0.5 * loss_pct <= probe["flow_rate_pct"] <= 2.5 * loss_pct, probe


def test_retransmits_the_senders_own_firewall_dropped_are_counted_as_the_kernel_counts_them(
    kernel, tmp_path: Path
) -> None:
    """The kernel adds a retransmit to RetransSegs before it hands it to IP: one the sender's
    own OUTPUT rules then drop fails (err -EPERM at the tracepoint) and is still counted
    (and in TCPRetransFail). The probe took every failed attempt for uncounted: 1281 against
    the kernel's 1326 in a CI run (2026-11-26; there, presumably, a full queue below TCP).
    Here 3 % of the client's packets are dropped by its own firewall on top of 1 % on the wire."""
    # 3 %: with one segment a packet, 15 % dropped locally stalled the flow (11 retransmits
    # in a run, none failed); 3 % gave 217 failed attempts among 543 retransmits.
    run = run_lab("retransmit", "loss1", tmp_path / "localdrop", SENDER_DROP_PCT="3")
    assert run.lab["sender_drop_pct"] == 3
    rec = reconcile(run, run.lab["client"]["netns_inode"])
    assert rec["failed_attempts"] > 0, json.dumps(rec)  # the path this test is about was taken
    assert abs(rec["probe_retrans_segs"] - rec["kernel_retrans_segs"]) <= 2 + missed_segments(run, rec), json.dumps(rec)


def test_no_loss_no_finding(kernel, tmp_path: Path) -> None:
    run = run_lab("retransmit", "loss0", tmp_path / "loss0")
    assert findings(run) == []


def test_time_wait_exhaust_vs_keepalive(kernel, tmp_path: Path) -> None:
    def eaddrnotavail(run: Run) -> tuple[int, int]:
        c = run.table("tw_connect")
        c = c[c["netns"] == int(run.lab["client"]["netns_inode"])]  # the lab's client, not another test's
        probe = int(c.loc[c["errno"] == EADDRNOTAVAIL, "failures"].sum())
        client = int((run.table("connects")["errno"] == "EADDRNOTAVAIL").sum())
        return probe, client

    exhaust = run_lab("time-wait", "exhaust", tmp_path / "exhaust")
    probe, client = eaddrnotavail(exhaust)
    # The kernel's failures are connect() calls; Go's dialer makes more than one
    # per failed dial (1200 calls for 400 dials here), so: at least one each.
    assert probe >= client > 0
    failed = exhaust.table("tw_connect")
    failed = failed[(failed["errno"] == EADDRNOTAVAIL) & (failed["netns"] == int(exhaust.lab["client"]["netns_inode"]))]
    # Each failure names the destination and the process that called connect().
    assert set(zip(failed["raddr"], failed["rport"], failed["comm"], strict=True)) == {("198.18.0.1", 8080, "connload")}
    (f,) = findings(exhaust, "time_wait_exhaustion")
    assert f["status"] == "confirmed"
    # tcp_tw_reuse=1 (variant reuse) is covered by the real A/B comparison in
    # test_compare_sweep.py (short-lived-clients: 0 EADDRNOTAVAIL); keep CI short.
    for variant in ("keepalive",):
        run = run_lab("time-wait", variant, tmp_path / variant)
        assert eaddrnotavail(run) == (0, 0), variant
        assert findings(run) == [], variant


def test_lower_fin_timeout_does_not_shorten_time_wait(kernel, tmp_path: Path) -> None:
    run = run_lab("time-wait", "fin-timeout", tmp_path / "fin")
    ns = run.lab["client"]["netns_inode"]
    assert run.sysctl(ns, "net.ipv4.tcp_fin_timeout") == "5"
    length = observed_time_wait_length(run, ns, "198.18.0.1", 8080)
    assert length is not None and 57 <= length <= 63, length


def test_littles_law_in_steady_state(kernel, tmp_path: Path) -> None:
    """TIME_WAIT levels at active-close rate x 60 s once the load has run longer than 60 s."""
    run = run_lab("time-wait", "steady", tmp_path / "steady", timeout=400)
    ns = run.lab["client"]["netns_inode"]
    ll = littles_law(run, ns, "198.18.0.1", 8080)
    closes = run.table("tw_close")
    closes = closes[(closes["netns"] == ns) & (closes["active_closes"] > 0)]
    first, last = float(closes["time_s"].min()), float(closes["time_s"].max())
    steady = ll[(ll.index >= first + 62) & (ll.index <= last - 1)]
    assert len(steady) >= 3, "the load must run past 60 s"
    # The lab lists TIME_WAIT at every sample (no CPU budget rations it): the series is the measurement.
    sockstat = run.table("sockstat")
    assert sockstat.loc[sockstat["netns"] == ns, "tw_listed"].astype(bool).all()
    rate = int(closes["active_closes"].sum()) / (last - first + 1)
    expected = rate * TCP_TIMEWAIT_LEN_S
    for measured in steady["measured"]:
        assert abs(measured - expected) <= 0.10 * expected, (measured, expected)


def test_epoll_busy_idle_and_sweep(kernel, tmp_path: Path) -> None:
    busy = run_lab("epoll", "busy", tmp_path / "busy")
    (f,) = findings(busy, "event_loop_saturation")
    assert f["subject"]["comm"] == "httpserver"
    idle = run_lab("epoll", "idle", tmp_path / "idle")
    assert findings(idle) == []
    sweep = run_lab("epoll", "sweep", tmp_path / "sweep", timeout=400)
    table = epoll_sweep(sweep)
    assert list(table["idle_conns"]) == [10, 1000, 5000, 10000]
    costs = table["ns_per_nonblocking_poll"].astype(float)
    # 1000x the registered fds: a linear scan would cost ~1000x; epoll's ready list does not.
    assert costs.iloc[-1] / costs.iloc[0] < 3, table.to_string()
    assert "epoll_sweep" in json.loads((sweep.path / "verdicts.json").read_text())["measurements"]


def test_nginx_event_loop_is_measured(kernel, tmp_path: Path) -> None:
    """nginx (one worker) under wrk: the probe sees its epoll loop; saturated or not is reported as measured."""
    run = run_lab("epoll", "nginx", tmp_path / "nginx")
    pp = per_process(run)
    worker = pp[(pp["comm"] == "nginx") & (pp["events_sum"] > 1000)]
    assert len(worker) >= 3, "the nginx worker's epoll_wait calls were not seen under load"
    v = json.loads((run.path / "verdicts.json").read_text())
    checked = [f for f in v["findings"] + v["ruled_out"] if f["kind"] == "event_loop_saturation"]
    assert any(f["subject"]["comm"] == "nginx" and 8080 in f["subject"]["listen_ports"] for f in checked)


def test_epoll_hot_thread_is_the_one_named_with_its_cpu_over_its_busy_window(kernel, tmp_path: Path) -> None:
    """Issue 34: one process, four epoll loops; loop1 gets 8 closed-loop connections at 5 ms of CPU
    a request (many events a wakeup). It is the one thread named, saturated by the one rule for a
    loop that never waits (not by how its wakeups fall into intervals), and its CPU share over its
    busy window is within 5 points of what /proc says over the same window (the lab's own
    readings of the thread's stat, lab/task-stat.csv)."""
    run = run_lab("epoll", "hot-thread", tmp_path / "hot")
    loops = run.lab["loops"]
    hot = loops["tids"][loops["hot"]]
    (f,) = [x for x in findings(run, "event_loop_saturation") if x["subject"]["pid"] == loops["pid"]]
    assert (f["subject"]["tid"], f["subject"]["comm"]) == (hot, "loop1")
    assert f["cause_class"] == "loop_saturated"
    probe = next(link for link in f["chain"] if link["link"] == "probe")["evidence"]
    assert probe["window_verdict"] == "saturated" and probe["window_blocked_pct"] < 5
    t0, t1 = probe["window_from_s"], probe["window_to_s"]
    stat = pd.read_csv(run.path / "lab" / "task-stat.csv")
    mine = stat[stat["tid"] == hot].sort_values("time_s")
    ticks = (mine["utime_ticks"] + mine["stime_ticks"]).to_numpy(dtype=float)
    hz = os.sysconf("SC_CLK_TCK")
    proc_pct = 100 * (np.interp(t1, mine["time_s"], ticks) - np.interp(t0, mine["time_s"], ticks)) / hz / (t1 - t0)
    assert abs(probe["cpu_share_busy_pct"] - proc_pct) <= 5, (probe, proc_pct)
    # The paced neighbour, when it had enough events to be judged, waits.
    v = json.loads((run.path / "verdicts.json").read_text())
    # (The listener's verdict names its owner by the process's name, loop0 too: only loops here.)
    light = [x for x in v["ruled_out"] + v["not_checked"]
             if x["kind"] == "event_loop_saturation" and x["subject"].get("comm") == "loop0"]  # fmt: skip
    assert all(x["status"] == "absent" and x["chain"][0]["key"] == "waits" for x in light), light
