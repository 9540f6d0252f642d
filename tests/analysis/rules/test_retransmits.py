"""retransmit_storm against re-sent segments that were not lost: a flow's own D-SACK count
(tcp_info dsack_dups, sock_buffers.csv) takes back the segments its peer reported received twice."""

from __future__ import annotations

from analysis.derived.retransmits import spurious_by_flow
from analysis.derived.socket_buffers import sides
from analysis.load import Run
from analysis.rules import retransmits
from analysis.wording import describe
from tests.conftest import fixture_run


def _by_flow(run: Run) -> dict[int, dict]:
    """The retransmit findings by the sender's local port: each flow of the busy-host lab has its
    own client port, and its endpoint's service port is the lower of its two ports."""
    found = {f.subject["service_port"]: f for f in retransmits.evaluate(run)}
    out: dict[int, dict] = {}
    for fl in run.table("rt_flow").drop_duplicates(["lport", "rport"]).itertuples():
        f = found.get(min(int(fl.lport), int(fl.rport)))
        if f is not None:
            probe = next(link for link in f.chain if link.link == "probe")
            out[int(fl.lport)] = {"status": f.status, "cause": f.cause_class, **probe.evidence}
    return out


def test_resends_the_peer_had_received_are_not_loss_and_the_lossy_flow_stays_confirmed() -> None:
    # The busy-host lab's flow variant: 5 % of the lossy flow's packets dropped on the path; the
    # two bulk flows and the clean iperf3 flow lose nothing, yet re-sent a few segments each
    # (reordering on the path's bridge), every one of them reported back as a duplicate.
    run = Run.open(fixture_run("busy-host-flow-dsack"))
    found = _by_flow(run)
    lossy = found[5312]
    assert lossy["status"] == "confirmed" and lossy["cause"] == "data_loss", lossy
    spurious = spurious_by_flow(run)
    assert spurious is not None
    for cport in (5311, 5401, 5402):
        flow = found.get(cport)
        assert flow is None or flow["status"] == "absent", (cport, flow)
    # Each bulk flow's re-sent segments were all reported back: what the rule counts is what the
    # probe saw less the socket's own count of duplicates, never below zero.
    by_port = {k[2]: v for k, v in spurious.items()}
    for cport in (5401, 5402):
        rt = run.table("rt_flow")
        probe_resent = int(rt.loc[rt["lport"] == cport, "data_segs"].sum())
        flow = found.get(cport)
        if flow is not None and probe_resent:
            assert flow["flow_spurious_segs"] == min(by_port.get(cport, 0), probe_resent), (cport, flow)
            assert flow["flow_data_segs"] == probe_resent - flow["flow_spurious_segs"], (cport, flow)
    assert by_port.get(5401, 0) + by_port.get(5402, 0) > 0, by_port


def test_the_spurious_count_is_the_sockets_own_dsack_delta() -> None:
    run = Run.open(fixture_run("busy-host-flow-dsack"))
    spurious = spurious_by_flow(run)
    assert spurious
    sb = run.table("sock_buffers")
    assert any(n > 0 for n in spurious.values())
    for key, n in spurious.items():
        assert n == sides(run, probe=False)[key].deltas["dsack_dups"]
        rows = sb[(sb["netns"] == key[0]) & (sb["lport"] == key[2]) & (sb["rport"] == key[4])]
        assert 0 <= n <= int(rows["dsack_dups"].max()) <= int(rows["retrans_total"].max())


def test_runs_that_did_not_record_dsack_count_every_resend() -> None:
    # Contract 10 had no dsack_dups: unknown, not zero, and every re-sent segment counts as before.
    run = Run.open(fixture_run("socket-buffers-slow-reader"))
    assert spurious_by_flow(run) is None
    for f in retransmits.evaluate(run):
        probe = next(link for link in f.chain if link.link == "probe")
        assert probe.evidence.get("flow_spurious_segs") is None


def _without_scan_rows(run: Run, lports: list[int]) -> Run:
    sb = run.table("sock_buffers")
    run._cache["sock_buffers"] = sb[~sb["lport"].isin(lports)]
    return run


def test_a_flow_the_socket_scan_never_listed_is_not_blamed_for_resends_its_peer_had() -> None:
    """The busy-host capture with the bulk flows' rows taken out of the socket scan (as when the
    samplers' budget leaves them out): their re-sends, every one reported back as a duplicate,
    are not known as loss. The bulk flow is not checked, not a storm; the lossy flow, listed, stays
    confirmed. Before, the bulk flow read 'confirmed data_loss'."""
    run = _without_scan_rows(Run.open(fixture_run("busy-host-flow-dsack")), [5311, 5401, 5402])
    found = _by_flow(run)
    assert (found[5312]["status"], found[5312]["cause"]) == ("confirmed", "data_loss")
    assert found[5401]["status"] == "not_checked" and found[5401]["flow_unread_segs"] > 0, found[5401]
    (f,) = [f for f in retransmits.evaluate(run) if f.subject.get("lport") == 5401]
    text = describe(f.kind, f.link("probe"))
    assert "never listed" in text and "PROBES=retransmits" in text, text
    assert all(found.get(p) is None or found[p]["status"] in ("absent", "not_checked") for p in (5311, 5402))


def test_unread_resends_count_as_loss_where_the_namespace_received_no_dsack() -> None:
    """The lossy flow unlisted: its namespace's TCPDSACKRecv moved (the bulk flows' duplicates), so its
    re-sends may be duplicates too: not checked. With that counter still, no peer reported a
    duplicate: they were lost, and the flow is confirmed from the kernel's own counter."""
    run = _without_scan_rows(Run.open(fixture_run("busy-host-flow-dsack")), [5312])
    assert _by_flow(run)[5312]["status"] == "not_checked"
    c = run.table("counters")
    run._cache["counters"] = c.assign(delta=c["delta"].where(c["counter"] != "TCPDSACKRecv", 0))
    lossy = _by_flow(run)[5312]
    assert (lossy["status"], lossy["cause"]) == ("confirmed", "data_loss")
