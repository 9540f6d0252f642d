"""The accept-queue evidence chain on real captures (tests/fixtures/README.md)."""

from __future__ import annotations

import json

import pandas as pd

from analysis.derived.counters import total_delta
from analysis.findings import CHAIN_ORDER
from analysis.load import Run
from analysis.render.report import write_report
from analysis.rules import accept_queue
from analysis.rules.accept_queue.chain import classify
from analysis.wording import describe
from tests.conftest import fixture_run


def _findings(run: Run):
    return [f for f in accept_queue.evaluate(run) if f.status != "absent"]


def _lab_listener(run: Run) -> tuple[int, int]:
    server = run.lab["server"]
    return int(server["netns_inode"]), int(server["port"])


def test_sizing_is_confirmed_with_port_limit_and_cause() -> None:
    run = Run.open(fixture_run("accept-overflow-sizing"))
    (f,) = _findings(run)
    netns, port = _lab_listener(run)
    assert (f.status, f.cause_class) == ("confirmed", "sizing")
    assert (f.subject["netns"], f.subject["lport"], f.subject["comm"]) == (netns, port, "aqserver")
    assert [link.link for link in f.chain] == list(CHAIN_ORDER)
    probe, counter, cause = f.link("probe").evidence, f.link("counter").evidence, f.link("cause").evidence
    assert probe["limit"] == run.lab["server"]["backlog_requested"] == cause["limit_effective"]
    assert probe["depth_max"] > probe["limit"]
    assert counter["listen_overflows_in_window"] > 0
    assert cause["binding_knob"] == "app_backlog" and cause["limit_matches_min_rule"] is True
    symptom = f.link("symptom").evidence
    assert symptom["connects_waited_syn_retry"] > 0 and symptom["syn_retrans"] > 0
    fix = f.link("fix").evidence
    assert fix["backlog_suggested"] >= cause["peak_enqueues_per_interval"]
    assert f"BACKLOG={fix['backlog_suggested']}" in f.link("verification").evidence["command"]


def test_stall_is_confirmed_and_a_bigger_backlog_is_not_the_fix() -> None:
    run = Run.open(fixture_run("accept-overflow-stall"))
    (f,) = _findings(run)
    assert (f.status, f.cause_class) == ("confirmed", "stall")
    assert f.link("cause").evidence["intervals_stalled"] >= 1
    fix = f.link("fix").evidence
    # The queue holds well under the stall's length of arrivals.
    assert fix["seconds_of_arrivals_the_queue_holds"] < fix["stalled_seconds_seen"]
    assert "STALL_FOR=0s" in f.link("verification").evidence["command"]


def test_healthy_has_no_finding_and_says_why() -> None:
    run = Run.open(fixture_run("accept-overflow-healthy"))
    results = accept_queue.evaluate(run)
    assert not [f for f in results if f.status != "absent"]
    netns, port = _lab_listener(run)
    ruled = [f for f in results if (f.subject["netns"], f.subject["lport"]) == (netns, port)]
    assert ruled and ruled[0].link("probe").evidence["depth_max"] <= ruled[0].link("probe").evidence["limit"]


def test_probe_without_counter_is_only_suspected() -> None:
    run = Run.open(fixture_run("accept-overflow-sizing"))
    netns, _ = _lab_listener(run)
    c = run.table("counters")
    run._cache["counters"] = c[~((c["netns"] == netns) & (c["counter"] == "ListenOverflows"))]
    (f,) = _findings(run)
    assert f.status == "suspected"


def test_full_while_the_counter_stood_still_is_not_implicated() -> None:
    """depth > limit in intervals where the namespace's ListenOverflows (captured) did not rise: no
    connection was dropped, so the listener is ruled out, and the sentences say why."""
    from analysis.wording import describe

    run = Run.open(fixture_run("accept-overflow-sizing"))
    netns, _ = _lab_listener(run)
    c = run.table("counters").copy()
    sel = (c["netns"] == netns) & (c["counter"] == "ListenOverflows") & c["delta"].notna()
    c.loc[sel, "delta"] = 0
    run._cache["counters"] = c
    (f,) = accept_queue.evaluate(run)
    assert f.status == "absent" and [link.key for link in f.chain] == ["full_no_drops", "no_overflows_then"]
    assert "none was dropped" in describe(f.kind, f.link("counter"))
    assert "depth > limit 16" in describe(f.kind, f.link("probe"))


def test_counter_without_probe_is_a_netns_level_suspicion() -> None:
    run = Run.open(fixture_run("accept-overflow-sizing"))
    rows = run.table("aq_listener")
    run._cache["aq_listener"] = rows.iloc[0:0]
    (f,) = _findings(run)
    assert f.status == "suspected" and f.subject["lport"] is None and f.cause_class == "unattributed"
    assert f.link("counter").evidence["listen_overflows"] > 0


def test_queue_full_across_intervals_while_accepting_is_capacity() -> None:
    # The stall capture, with the stalled intervals given accepts: the queue now
    # stays full while the application keeps accepting.
    run = Run.open(fixture_run("accept-overflow-stall"))
    rows = run.table("aq_listener").copy()
    full_end = rows["depth_now"] >= rows["limit"]
    rows.loc[full_end, "accepted"] = pd.array([50] * int(full_end.sum()), dtype="Int64")
    assert int(full_end.sum()) >= 2
    cls, ev = classify(rows.sort_values("time_s"))
    assert cls == "capacity" and ev["intervals_stalled"] == 0


def test_the_counter_link_puts_the_kernels_opens_beside_what_the_probe_counted() -> None:
    # A probe counts only what its tracepoints deliver (docs/probes.md): with one burst's 17
    # enqueues taken away, as a side-by-side run lost them, the kernel's count says so.
    run = Run.open(fixture_run("accept-overflow-sizing"))
    (f,) = _findings(run)
    ev = f.link("counter").evidence
    netns, _ = _lab_listener(run)
    assert ev["passive_opens"] == total_delta(run, netns, "PassiveOpens") > 0
    assert ev["probe_queued"] == int(run.table("aq_listener")["enqueues"].sum())
    rows = run.table("aq_listener").copy()
    rows.loc[rows.index[1], "enqueues"] -= 17
    run._cache["aq_listener"] = rows
    (f,) = _findings(run)
    short = f.link("counter").evidence
    assert (short["passive_opens"], short["probe_queued"]) == (ev["passive_opens"], ev["probe_queued"] - 17)
    text = describe(f.kind, f.link("counter"))
    assert f"PassiveOpens rose by {ev['passive_opens']}" in text and f"counted {ev['probe_queued'] - 17}" in text


def test_a_burst_landing_just_before_a_print_is_no_stall() -> None:
    # The sizing capture with one burst moved to the last moments of an interval that began
    # empty: it ends full with nothing accepted yet (a training run's busy-host listener printed
    # that once, 2026-11-29, and was called a stall), and the next interval accepts it all.
    run = Run.open(fixture_run("accept-overflow-sizing"))
    rows = run.table("aq_listener").sort_values("time_s").reset_index(drop=True)
    i = int(rows.index[rows["time_s"] == 1795407926][0])
    assert rows.loc[i - 1, "depth_now"] == 0
    moved = int(rows.loc[i, "enqueues"]) - 17
    rows.loc[i, ["enqueues", "depth_max", "full_events", "depth_now", "accepted"]] = [17, 17, 1, 17, 0]
    rows.loc[i + 1, "enqueues"] += moved
    rows.loc[i + 1, "accepted"] = 17 + int(rows.loc[i + 1, "enqueues"]) - int(rows.loc[i + 1, "depth_now"])
    cls, ev = classify(rows)
    assert (ev["intervals_stalled"], ev["intervals_stalled_from_full"]) == (1, 0)
    assert cls == "sizing"
    # The same interval after one that also ended full with nothing taken is a stall.
    rows.loc[i - 1, ["depth_now", "accepted"]] = [17, 0]
    assert classify(rows)[0] == "stall"


def test_report_writes_verdicts_markdown_and_pngs(copy_fixture) -> None:
    run_dir = copy_fixture("accept-overflow-stall")
    report, _ = write_report(run_dir)
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["schema_version"] == 1
    (finding,) = [f for f in verdicts["findings"] if f["kind"] == "accept_queue_overflow"]
    # The clients' SYN retries are a consequence, and the retransmit finding says so.
    for f in verdicts["findings"]:
        if f["kind"] == "retransmit_storm":
            assert f["cause_class"] == "remote_accept_queue_full"
    assert finding["kind"] == "accept_queue_overflow" and finding["subject"]["lport"] == 8080
    text = report.read_text()
    for link in CHAIN_ORDER:
        assert f"**{link}**" in text
    pngs = list((run_dir / "plots").glob("*.png"))
    assert len(pngs) >= 3
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert f"({p.relative_to(run_dir)})" in text


def test_server_side_synack_storm_is_the_overflow_not_the_path() -> None:
    """A sizing run on a busy machine: the server re-sent SYN-ACKs because its
    full queue dropped the clients' final ACKs. Both sides' retransmit storms
    point at the overflow; none is blamed on the network."""
    from analysis.rules import retransmits

    run = Run.open(fixture_run("accept-overflow-sizing-busy"))
    storms = [f for f in retransmits.evaluate(run) if f.status != "absent"]
    by_side = {f.subject["we_are"]: f for f in storms}
    assert set(by_side) == {"server", "client"}
    assert by_side["server"].cause_class == "local_accept_queue_full"
    assert by_side["client"].cause_class == "remote_accept_queue_full"
    server_probe = next(link for link in by_side["server"].chain if link.link == "probe").evidence
    assert server_probe["synack_segs"] > 0 and server_probe["synack_segs"] >= server_probe["data_segs"]


def test_bursts_draining_at_interval_ends_stay_sizing() -> None:
    """Real sizing runs whose interval ends caught bursts still draining (a few
    of 16 left, SYN retries re-bursting) are sizing; overload is capacity."""
    for name, cause in [
        ("accept-overflow-sizing-phase", "sizing"),
        ("accept-overflow-sizing-busy", "sizing"),
        ("accept-overflow-sizing", "sizing"),
        ("accept-overflow-sizing-drift", "sizing"),
        ("accept-overflow-queue", "capacity"),
    ]:
        (f,) = [x for x in accept_queue.evaluate(Run.open(fixture_run(name))) if x.status != "absent"]
        assert f.cause_class == cause, (name, f.cause_class)


def test_a_queue_found_empty_in_its_intervals_is_not_capacity() -> None:
    """A real sizing run made to catch a burst draining at every overflowing interval's end (the
    phase lock of bursts every second against a one-second print, which a CI run's training
    incident hit): its Go server's accept() found the queue empty in those intervals (EAGAIN),
    so it stays sizing. The same rows without the accept hook's counts (the raw tier) read
    capacity: the depth at the ends alone cannot tell."""
    run = Run.open(fixture_run("accept-overflow-sizing-phase"))
    rows = run.table("aq_listener").copy()
    overflowing = rows["full_events"] > 0
    rows.loc[overflowing, "depth_now"] = rows.loc[overflowing, "limit"]
    run._cache["aq_listener"] = rows

    def cause() -> str | None:
        (f,) = [x for x in accept_queue.evaluate(run) if x.status != "absent"]
        return f.cause_class

    assert cause() == "sizing"
    run._cache["aq_accept"] = run.table("aq_accept").iloc[0:0]
    assert cause() == "capacity"


def _with_extra_listener(run: Run, lport: int, limit: int, depth: int, full_events: int = 0) -> Run:
    """A copy of a real capture with a second listener in the server namespace (its rows cloned from
    the real one's times), as on a shared host: only its depth, limit and full events differ."""
    rows = run.table("aq_listener")
    extra = rows.copy()
    extra["lport"] = lport
    extra["limit"] = limit
    extra["depth_max"] = depth
    extra["depth_now"] = 0
    extra["full_events"] = 0
    if full_events:
        extra.loc[extra.index[:2], "full_events"] = full_events
        extra.loc[extra.index[:2], "depth_max"] = limit + 1
    run._cache["aq_listener"] = pd.concat([rows, extra], ignore_index=True)
    return run


def test_a_healthy_neighbour_gets_no_finding_when_the_namespace_overflows() -> None:
    """The overflows are the sized-too-small listener's; a busy listener far below its limit in the
    same namespace is ruled out, and its counter link says why (never 'suspected overflow')."""
    run = _with_extra_listener(Run.open(fixture_run("accept-overflow-sizing")), 9090, 511, 7)
    results = accept_queue.evaluate(run)
    (f,) = [x for x in results if x.is_finding]
    assert (f.subject["lport"], f.status, f.cause_class) == (8080, "confirmed", "sizing")
    (healthy,) = [x for x in results if x.subject["lport"] == 9090]
    assert healthy.status == "absent"
    assert healthy.link("counter").key == "overflows_not_here"
    assert healthy.link("counter").evidence["listen_overflows"] > 0
    # The model uses the listener's own enqueues once another listener shares PassiveOpens.
    assert f.link("cause").evidence["model"]["opens_basis"].startswith("this listener")


def test_two_listeners_seen_full_share_the_overflows_and_one_dominates() -> None:
    run = _with_extra_listener(Run.open(fixture_run("accept-overflow-sizing")), 9090, 8, 9, full_events=2)
    found = {f.subject["lport"]: f for f in accept_queue.evaluate(run) if f.is_finding}
    assert set(found) == {8080, 9090}
    big, small = found[8080].link("counter").evidence, found[9090].link("counter").evidence
    assert big["listeners_seen_full"] == small["listeners_seen_full"] == 2
    assert big["dominant"] is True and small["dominant"] is False
    assert big["full_events_share_pct"] > 90 > small["full_events_share_pct"]
    from analysis.wording import describe

    assert "shared" in describe(accept_queue.KIND, found[9090].link("counter"))


def test_without_a_lab_the_symptom_is_what_the_host_shows() -> None:
    """No connects.csv and no lab block: the SYN retries toward this listener that the client side
    counted (retransmits probe), the client's namespace TCPSynRetrans, ss Recv-Q; never the
    server namespace's own TCPSynRetrans."""
    run = Run.open(fixture_run("accept-overflow-sizing"))
    client_ns = run.lab["client"]["netns_inode"]
    run.metadata = {**run.metadata, "lab": None}
    run._cache["connects"] = run.table("connects").iloc[0:0]
    (f,) = _findings(run)
    sym = f.link("symptom")
    assert sym.key == "local_clients"
    assert sym.evidence["syn_retrans_to_listener"] > 0
    assert sym.evidence["syn_retrans_netns"] == run.netns_label(client_ns)
    assert sym.evidence["ss_send_q"] == 16
    # Without the retransmits probe the client side is not visible, and the sentence says so.
    run.metadata = {**run.metadata, "probes": {k: v for k, v in run.metadata["probes"].items() if k != "retransmits"}}
    run._cache["rt_endpoint"] = run.table("rt_endpoint").iloc[0:0]
    (f,) = _findings(run)
    assert f.link("symptom").key == "server_side_only"
    from analysis.wording import describe

    assert "client side is not visible" in describe(accept_queue.KIND, f.link("symptom"))


def test_unattributed_overflows_say_why() -> None:
    """Overflows no listener was seen full for: one namespace finding, never a listener, with the
    reason: the probe did not run; a listener ss saw above its limit that the probe did not track."""
    from analysis.wording import describe

    run = Run.open(fixture_run("host-overflow"))
    run._cache["aq_listener"] = run.table("aq_listener").iloc[0:0]
    run.metadata = {**run.metadata, "probes": {**run.metadata["probes"], "accept_queue": {"status": "failed"}}}
    (f,) = _findings(run)
    assert (f.cause_class, f.subject["lport"]) == ("unattributed", None)
    assert f.link("cause").evidence["reason"] == "probe_not_run"
    assert "did not run" in describe(f.kind, f.link("cause"))
    run = Run.open(fixture_run("host-overflow"))
    run._cache["aq_listener"] = run.table("aq_listener").query("lport != 18090")
    ls = run.table("listeners").copy()
    slow = ls["lport"] == 18090
    ls.loc[slow, "recv_q"] = 9  # what ss shows of a full listen(8) queue
    run._cache["listeners"] = ls
    (f,) = _findings(run)
    ev = f.link("cause").evidence
    assert ev["reason"] == "listener_not_tracked"
    assert ev["ss_full_listeners"][0].startswith("127.0.0.1:18090 (python3 pid ")
    assert "127.0.0.1:18090 (python3 pid " in describe(f.kind, f.link("cause"))
    # The healthy nginx listeners the probe did track stay ruled out.
    assert all(x.status == "absent" for x in accept_queue.evaluate(run) if x.subject["lport"])


def test_a_healthy_reuseport_member_whose_counter_moved_is_not_blamed() -> None:
    """A copy of the reuseport-stall capture where one healthy member's own drop counter rose by 2
    (the kernel also counts there the RSTs and stray segments a listener discards): the probe read
    its queue at every enqueue and it never came near its limit, so those were not overflows. It
    is ruled out, and the stalled member alone is named."""
    run = Run.open(fixture_run("accept-overflow-reuseport-stall"))
    stalled = {m["member"]: m["pid"] for m in run.lab["server"]["stats"]["members"]}[
        int(run.lab["server"]["stall_members"])
    ]
    ls = run.table("listeners").copy()
    mine = ls[(ls["lport"] == 8080) & (ls["pid"] != stalled)]
    healthy = int(mine["sock_ino"].iloc[0])
    late = ls.index[(ls["sock_ino"] == healthy) & (ls["time_s"] > ls["time_s"].median())]
    ls.loc[late, "drops"] = ls.loc[late, "drops"] + 2
    run._cache["listeners"] = ls
    found = accept_queue.evaluate(run)
    named = [f for f in found if f.is_finding]
    assert [f.subject["pid"] for f in named] == [stalled]
    (quiet,) = [f for f in found if f.subject.get("sock_ino") == healthy]
    assert quiet.status == "absent" and quiet.link("counter").key == "drops_not_overflows"
    assert quiet.link("counter").evidence["listener_drops"] == 2
    assert "were not overflows" in describe(quiet.kind, quiet.link("counter"))


def test_a_reuseport_member_full_for_a_moment_without_drops_is_not_blamed() -> None:
    """nginx with `reuseport`, one worker stopped (a real run): a healthy member's queue reached
    limit + 1 at one enqueue while the stalled member's overflows rose in the same namespace and
    second. Its own drop counter did not move, so none of those overflows were its own: ruled out,
    never a second finding (one of five runs by hand read 'sizing, confirmed' on it before)."""
    run = Run.open(fixture_run("accept-overflow-reuseport-stall"))
    members = {m["member"]: m["pid"] for m in run.lab["server"]["stats"]["members"]}
    stalled = members[int(run.lab["server"]["stall_members"])]
    aq = run.table("aq_listener").copy()
    ls = run.table("listeners")
    healthy = int(ls[(ls["lport"] == 8080) & (ls["pid"] != stalled)]["sock_ino"].iloc[0])
    full = run.table("aq_listener")
    busy = full[(full["sock_ino"] != healthy) & (full["full_events"] > 0)]["time_s"].iloc[0]
    hit = aq.index[(aq["sock_ino"] == healthy) & (aq["time_s"] == busy)]
    assert len(hit) == 1
    aq.loc[hit, ["depth_max", "full_events"]] = [int(aq.loc[hit, "limit"].iloc[0]) + 1, 1]
    run._cache["aq_listener"] = aq
    found = accept_queue.evaluate(run)
    assert [f.subject["pid"] for f in found if f.is_finding] == [stalled]
    (quiet,) = [f for f in found if f.subject.get("sock_ino") == healthy]
    assert quiet.status == "absent" and quiet.link("counter").key == "own_drops_zero"
    assert "other sockets' drops" in describe(quiet.kind, quiet.link("counter"))


def test_nginx_reuseport_with_a_stopped_worker_names_it_alone() -> None:
    """The real run behind the test above (tests/fixtures/README.md): the stopped worker is named
    through its socket's epoll watcher, and the member that was full for a moment without a drop
    is ruled out by its own counter."""
    run = Run.open(fixture_run("nginx-reuseport-stopped-worker"))
    found = accept_queue.evaluate(run)
    named = [f for f in found if f.is_finding]
    assert [(f.subject["pid"], f.subject["source"], f.cause_class) for f in named] == [(18038, "epoll set", "stall")]
    assert named[0].link("counter").evidence["listener_drops"] == 578
    moment = [f for f in found if f.status == "absent" and f.link("counter").key == "own_drops_zero"]
    assert [f.subject["pid"] for f in moment] == [18040]


def test_the_reuseport_fixtures_stall_per_member_and_overload_as_a_group() -> None:
    """accept-overflow-reuseport-stall: the stalled member alone, its drops its socket's own;
    accept-overflow-reuseport-overload: every member comparably full, one finding about the group."""
    run = Run.open(fixture_run("accept-overflow-reuseport-stall"))
    members = {m["member"]: m["pid"] for m in run.lab["server"]["stats"]["members"]}
    (f,) = [x for x in accept_queue.evaluate(run) if x.is_finding]
    assert (f.subject["pid"], f.cause_class) == (members[int(run.lab["server"]["stall_members"])], "stall")
    assert f.subject["group"] == {"members": 4, "judged": "per_member"} and f.subject["sock_ino"]
    run = Run.open(fixture_run("accept-overflow-reuseport-overload"))
    (g,) = [x for x in accept_queue.evaluate(run) if x.is_finding]
    assert g.subject["group"] == {"members": 4, "judged": "as_one"} and g.cause_class == "capacity"
    assert {o["pid"] for o in g.subject["owners"]} == {m["pid"] for m in run.lab["server"]["stats"]["members"]}
    assert g.link("cause").evidence["model"]["members"] == 4


def test_listener_drops_with_no_listen_drops_in_its_namespace_are_not_an_overflow() -> None:
    """A real run of the socket-buffers lab at an 800 ms RTT: the client's SYN was re-sent after 1 s
    while the first SYN-ACK was still on its way, and the kernel counted the second SYN, reaching
    a connection still being set up, in the listener's own sk_drops (+1). The namespace counted no
    ListenDrops, which every overflow adds to, and ss showed its queue empty: no finding, and why."""
    run = Run.open(fixture_run("socket-buffers-seed003-rtt800"))
    found = accept_queue.evaluate(run)
    assert not [f for f in found if f.is_finding]
    (listener,) = [f for f in found if f.subject.get("lport") == 7000]
    counter = listener.link("counter")
    assert listener.status == "absent" and counter.key == "no_listen_drops"
    assert counter.evidence["listener_drops"] == 1 and counter.evidence["listen_drops"] == 0
    assert "not overflows" in describe(listener.kind, counter)


def _fold_ticks(rows: pd.DataFrame, missed: list[int]) -> pd.DataFrame:
    """The probe's rows as printed when its interval timer did not run at the ticks `missed` (every
    listener): each listener's next row sums those intervals' counts (what the probe's totals
    since its last print hold), its depth at the end and the largest depth."""
    rows = rows.sort_values("time_s").copy()
    for _, grp in rows.groupby(["netns", "sock_ino"]):
        gone = grp[grp["time_s"].isin(missed)]
        later = grp[grp["time_s"] > max(missed)]
        if gone.empty or later.empty:
            continue
        nxt = later.index[0]
        for col in ("enqueues", "full_events", "accepted"):
            rows.loc[nxt, col] = rows.loc[nxt, col] + gone[col].sum()
        rows.loc[nxt, "depth_max"] = max(rows.loc[nxt, "depth_max"], gone["depth_max"].max())
    return rows[~rows["time_s"].isin(missed)]


def test_a_stall_the_probe_did_not_print_is_a_probe_gap_not_sizing() -> None:
    """The reuseport-stall capture as a CI run printed it once: the probe's interval timer did not run
    for the stall's seconds, the stalled member's next row summed them, and its printed rows alone
    read "sizing". Seconds with no row of any listener, inside the overflow, make the cause unknown;
    the stalled member alone is named; the same rows with every tick printed still read stall."""
    run = Run.open(fixture_run("accept-overflow-reuseport-stall"))
    stalled = {m["member"]: m["pid"] for m in run.lab["server"]["stats"]["members"]}[
        int(run.lab["server"]["stall_members"])
    ]
    rows = run.table("aq_listener")
    start = int(rows["time_s"].min())
    run._cache["aq_listener"] = _fold_ticks(rows, [start + 2, start + 3])
    (f,) = [x for x in accept_queue.evaluate(run) if x.is_finding]
    assert (f.subject["pid"], f.cause_class) == (stalled, "probe_gap")
    cause = f.link("cause").evidence
    assert cause["rows_alone_read"] == "sizing" and cause["model"] is None
    assert [(g["to_rel_s"] - g["from_rel_s"]) for g in cause["probe_gaps"]] == [3]
    assert "unknown" in describe(f.kind, f.link("cause")) and "nothing blind" in describe(f.kind, f.link("fix"))
    assert "BACKLOG=" not in f.link("verification").evidence["command"]
    # One tick missed (two seconds in one row) is within the timer's jitter: the rows still decide.
    run = Run.open(fixture_run("accept-overflow-reuseport-stall"))
    run._cache["aq_listener"] = _fold_ticks(rows, [start + 2])
    (f,) = [x for x in accept_queue.evaluate(run) if x.is_finding]
    assert (f.subject["pid"], f.cause_class) == (stalled, "stall")
