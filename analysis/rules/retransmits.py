"""retransmit_storm: a share of the segments sent toward one endpoint had to be sent again.

Chain: symptom (lab client: throughput and failures; else the retransmit rate)
 -> counter (TcpRetransSegs / TCPSynRetrans deltas in the namespace, reconciled
    with the probe's segment count)
 -> probe (retransmitted segments per endpoint, SYN apart from data; data
    retransmits against the endpoint's own flows' data segments, never against
    the whole namespace's: a lossy flow beside a heavy clean one is not diluted;
    less those the peer reported received twice, tcp_info dsack_dups: not lost)
 -> cause (data loss on the path, or SYNs lost; the loss a lab injected; an accept queue
    that overflowed, from the probe or, without it, the server's ListenOverflows; unknown
    where neither could be seen)
 -> fix -> verification.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from ..derived import connects, interval_s
from ..derived.addresses import is_loopback, listeners_serving
from ..derived.counters import recorded, sampled, total_delta
from ..derived.retransmits import (
    EndpointRates,
    FlowKey,
    endpoint_flows,
    endpoint_rates,
    flow_rates,
    reconcile,
    spurious_by_flow,
)
from ..findings import Finding, Link, Status
from .base import Rule, RunView

KIND = "retransmit_storm"
# aq_listener: retransmits toward (or from) a listener whose accept queue was
# full are that overflow, not the path.
# sock_buffers: the flows' own D-SACK counts, re-sent segments that were not lost; sockstat:
# which samples listed those flows.
INPUTS = ("rt_endpoint", "rt_flow", "aq_listener", "counters", "connects", "sock_buffers", "sockstat")

# A storm: at least this share of the data segments the endpoint's own flows sent
# re-sent (runs of contract 2, without per-flow data: of the namespace's sent
# segments); healthy LAN/loopback paths sit far below 0.1 %...
RATE_THRESHOLD = 0.005
# ...or this share of new connections needing a SYN retransmit...
SYN_THRESHOLD = 0.05
# ...and never on fewer segments than this (one lost ACK is not a storm).
MIN_SEGMENTS = 20
KEY = ["netns", "laddr", "raddr", "service_port", "service_local"]


@dataclass
class _Endpoint:
    """One rt_endpoint key: where this side sent from and to, and which side is the service."""

    netns: int
    laddr: str
    raddr: str
    port: int
    local: int  # 1: the service port is ours (we are the server)
    rows: pd.DataFrame


def _window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


# -- symptom ------------------------------------------------------------------------------------


def _symptom(run: RunView) -> Link:
    lab = run.lab or {}
    ev: dict[str, Any] = {}
    if lab.get("iperf3"):
        ev["iperf3"] = lab["iperf3"]
    client = connects.summary(run)
    if client:
        for k in ("attempts", "ok", "connects_waited_syn_retry", "connect_p99_ms"):
            ev[k] = client[k]
    return Link("symptom", "lab_client" if ev else "rate_only", ev)


# -- subject and probe -----------------------------------------------------------------------------


def _subject(run: RunView, ep: _Endpoint, per_flow: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The endpoint, and the flow at fault when one re-sent (nearly) all of it; and the flow
    numbers left for the probe link."""
    subject = {
        "netns": ep.netns,
        "netns_label": run.netns_label(ep.netns),
        "laddr": ep.laddr,
        "raddr": ep.raddr,
        "service_port": ep.port,
        "we_are": "server" if ep.local else "client",
    }
    per_flow = dict(per_flow)
    if "flow_lport" in per_flow:
        # One flow re-sent (nearly) all of it: the finding names that flow.
        subject["lport"], subject["rport"] = per_flow.pop("flow_lport"), per_flow.pop("flow_rport")
    return subject, per_flow


def _probe_evidence(ep: _Endpoint, rates: EndpointRates, per_flow: dict[str, Any], interval: int) -> dict[str, Any]:
    """The segments the probe saw re-sent toward the endpoint, SYN apart from data, and its flows' share."""
    rows = ep.rows
    return {
        "data_segs": rates.data,
        "data_events": int(rows["data_events"].sum()),
        "syn_segs": int(rows["syn_segs"].sum()),
        "synack_segs": int(rows["synack_segs"].sum()),
        "intervals": len(rows),
        "peak_segs_per_s": round(
            float((rows["data_segs"] + rows["syn_segs"] + rows["synack_segs"]).max()) / interval, 1
        ),
        **per_flow,
    }


# -- decision: storm or not, and status ---------------------------------------------------------------


def _storm(rates: EndpointRates) -> bool:
    """Enough segments, and a high enough share of data re-sent or of new connections retrying SYNs."""
    return (rates.data + rates.syn) >= MIN_SEGMENTS and (
        (rates.rate is not None and rates.rate >= RATE_THRESHOLD)
        or (rates.syn_share is not None and rates.syn_share >= SYN_THRESHOLD)
    )


def _below_threshold(subject: dict[str, Any], probe_ev: dict[str, Any], rates: EndpointRates) -> Finding:
    """Ruled out: the probe's numbers, with the namespace's share only when the flows' own is not known."""
    rate = rates.rate
    ev = {
        **probe_ev,
        "rate_pct": round(100 * rate, 3) if rate is not None and probe_ev.get("flow_rate_pct") is None else None,
    }
    return Finding(KIND, "absent", subject, chain=[Link("probe", "below_threshold", ev)])


def _storm_if_unread_were_spurious(
    run: RunView, ep: _Endpoint, rates: EndpointRates, per_flow: dict[str, Any], t0: float, t1: float
) -> bool:
    """Whether the storm holds with the segments re-sent by flows the socket scan never listed
    taken as duplicates the peers had (their D-SACK counts were not read: not known as loss).
    Where the namespace's own TCPDSACKRecv did not move, no peer reported a duplicate: they were lost."""
    unread = per_flow.get("flow_unread_segs") or 0
    if not unread:
        return True
    if recorded(run, ep.netns, "TCPDSACKRecv") and not total_delta(
        run, ep.netns, "TCPDSACKRecv", t0, t1 + interval_s(run)
    ):
        return True
    sent = per_flow.get("flow_data_segs_out") or 0
    rate = (per_flow["flow_data_segs"] - unread) / sent if sent else rates.rate
    return _storm(replace(rates, data=max(rates.data - unread, 0), rate=rate))


def _dsack_unread(ep: _Endpoint, subject: dict[str, Any], probe_ev: dict[str, Any]) -> Finding:
    """Not checked: the storm stands only if the re-sends of flows the socket scan never listed were
    lost, and whether their peers had them (tcp_info dsack_dups) was not read."""
    ev = {**probe_ev, "command": f"make capture NETNS=inode:{ep.netns} PROBES=retransmits DURATION=60"}
    return Finding(KIND, "not_checked", subject, chain=[Link("probe", "dsack_unread", ev)])


def _status(rec: dict[str, Any]) -> Status:
    """Confirmed when the kernel's own retransmit counter agrees with the probe's (within 10 %)."""
    agrees = (
        rec["retrans_diff_pct"] is not None and rec["kernel_retrans_segs"] > 0 and abs(rec["retrans_diff_pct"]) <= 10
    )
    return "confirmed" if agrees else "suspected"


# -- counter ----------------------------------------------------------------------------------------


def _counter_evidence(run: RunView, ep: _Endpoint, rates: EndpointRates, rec: dict[str, Any]) -> dict[str, Any]:
    """The namespace's sent segments and new connections over the window, and the probe reconciled
    with the kernel's counters."""
    return {
        "netns_label": run.netns_label(ep.netns),
        "out_segs_in_window": rates.sent,
        "retrans_rate_pct": round(100 * rates.rate, 2) if rates.rate is not None else None,
        "new_connections_in_window": rates.opens,
        "syn_retrans_share_pct": round(100 * rates.syn_share, 1) if rates.syn_share is not None else None,
        **rec,
    }


# -- cause, fix, verification -------------------------------------------------------------------------


def _cause(run: RunView, ep: _Endpoint, rates: EndpointRates, synack_segs: int) -> tuple[str, pd.DataFrame]:
    """Data loss or SYN loss on the path, unless an accept queue overflowed; with that listener's full intervals."""
    cause = "syn_loss" if rates.data < rates.syn else "data_loss"
    # Retransmits toward a listener whose accept queue overflowed: a full queue
    # drops SYNs and the final ACK (with any data riding on it) silently, so
    # the drops are that overflow, not the network. The listener may be
    # dual-stack ("::", its clients "::ffff:a.b.c.d"): joined on the plain address.
    aq = run.table("aq_listener")
    overflowed = aq[listeners_serving(aq, ep.netns, ep.raddr, ep.port) & (aq["full_events"] > 0)]
    if not overflowed.empty:
        cause = "remote_accept_queue_full"
    # On the server's side the same overflow shows as SYN-ACK retransmits:
    # the client's final ACK met the full queue and was dropped, so the
    # request stays half-open and the kernel re-sends its SYN-ACK. Only
    # that listener, in this namespace, and only when SYN-ACKs dominate.
    own = aq[(aq["netns"] == ep.netns) & (aq["lport"] == ep.port) & (aq["full_events"] > 0)]
    if ep.local and not own.empty and synack_segs >= rates.data:
        cause, overflowed = "local_accept_queue_full", own
    return cause, overflowed


def _accept_queue_unseen(run: RunView) -> str | None:
    """Why the accept-queue cross-check has no probe data, or None when the probe ran."""
    status = run.probe_status("accept_queue")
    return None if status == "ok" else f"the accept-queue probe {status or 'not run'}"


def _server_netns(ep: _Endpoint) -> int | None:
    """The namespace of the listener behind the endpoint, when this run can know it."""
    return ep.netns if ep.local or is_loopback(ep.raddr) else None


def _counter_cross_check(run: RunView, ep: _Endpoint, cause: str, t0: float, t1: float) -> tuple[str, dict[str, Any]]:
    """Without the accept-queue probe, the kernel's own ListenOverflows of the server's
    namespace decides; where that namespace is not sampled either, the cause is unknown:
    not seeing the accept queue is no evidence of loss on a path."""
    unseen = _accept_queue_unseen(run)
    if unseen is None or cause not in ("data_loss", "syn_loss"):
        return cause, {}
    ns = _server_netns(ep)
    if ns is None or not sampled(run, ns):
        where = "the server's namespace is not sampled" if ns is None else "its namespace was not sampled"
        return "unknown", {"missing": [unseen, f"ListenOverflows at the server ({where})"], "was": cause}
    overflows = total_delta(run, ns, "ListenOverflows", t0, t1 + interval_s(run))
    ev = {"listen_overflows": overflows, "accept_queue_unseen": unseen}
    if overflows > 0:
        return ("local_accept_queue_full" if ep.local else "remote_accept_queue_full"), ev
    return cause, ev


def _cause_evidence(run: RunView, ep: _Endpoint, cause: str, overflowed: pd.DataFrame) -> dict[str, Any]:
    """The direction of the lost segments; the listener's full intervals; the loss a lab injected."""
    lab = run.lab or {}
    ev: dict[str, Any] = {
        "direction": f"{ep.laddr} -> {ep.raddr}:{ep.port}" if not ep.local else f"{ep.laddr}:{ep.port} -> {ep.raddr}"
    }
    if cause in ("remote_accept_queue_full", "local_accept_queue_full") and not overflowed.empty:
        ev["listener_full_intervals"] = len(overflowed)
    if lab.get("lab") == "retransmit":
        ev["lab_injected_loss_pct"] = lab.get("loss_pct")
        ev["lab_injected_syn_loss_pct"] = lab.get("syn_loss_pct")
    return ev


def _verification(run: RunView, netns_label: str) -> Link:
    command = (
        "make lab LAB=retransmit VARIANT=loss0"
        if (run.lab or {}).get("lab") == "retransmit"
        else f"make capture NETNS={netns_label} DURATION=60"
    )
    return Link("verification", "rerun", {"command": command, "expect_rate_pct_below": 100 * RATE_THRESHOLD})


# -- one endpoint, the run -----------------------------------------------------------------------------


def _evaluate_endpoint(run: RunView, ep: _Endpoint, interval: int, spurious: dict[FlowKey, int] | None) -> Finding:
    t0, t1 = float(ep.rows["time_s"].min()) - interval, float(ep.rows["time_s"].max())
    flows = endpoint_flows(run, ep.netns, ep.laddr, ep.raddr, ep.port, ep.local)
    subject, per_flow = _subject(run, ep, flow_rates(flows, spurious) if flows is not None else {})
    rates = endpoint_rates(run, ep.netns, ep.rows, per_flow, t0, t1, interval)
    probe_ev = _probe_evidence(ep, rates, per_flow, interval)
    if not _storm(rates):
        return _below_threshold(subject, probe_ev, rates)
    if not _storm_if_unread_were_spurious(run, ep, rates, per_flow, t0, t1):
        return _dsack_unread(ep, subject, probe_ev)
    rec = reconcile(run, ep.netns)
    cause, overflowed = _cause(run, ep, rates, probe_ev["synack_segs"])
    cause, cross_check = _counter_cross_check(run, ep, cause, t0, t1)
    return Finding(
        KIND,
        _status(rec),
        subject,
        window=_window(run, t0, t1),
        cause_class=cause,
        chain=[
            _symptom(run),
            Link("counter", "retrans_segs", _counter_evidence(run, ep, rates, rec)),
            Link("probe", "endpoint_retransmits", probe_ev),
            Link("cause", cause, {**_cause_evidence(run, ep, cause, overflowed), **cross_check}),
            Link("fix", cause, {"raddr": ep.raddr, "service_port": ep.port}),
            _verification(run, subject["netns_label"]),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    rt = run.table("rt_endpoint")
    interval = interval_s(run)
    out: list[Finding] = []
    spurious = spurious_by_flow(run) if not rt.empty else None
    for key, rows in rt.groupby(KEY, sort=True):
        ep = _Endpoint(int(key[0]), str(key[1]), str(key[2]), int(key[3]), int(key[4]), rows)
        out.append(_evaluate_endpoint(run, ep, interval, spurious))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
