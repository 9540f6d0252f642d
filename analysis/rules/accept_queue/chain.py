"""The links of an accept_queue_overflow chain for one listening socket (symptom, counter, probe,
status and cause class, cause, fix, verification), and the socket as a finding's subject."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...derived import connects
from ...derived.accept_queue import (
    AcceptRates,
    interval_shape,
    listener_symptoms,
    probe_coverage,
    probe_gaps,
    requested_backlog,
    samples_near,
    saturation_model,
    somaxconn,
)
from ...derived.addresses import listener_dual_stack
from ...derived.counters import sampled, total_delta
from ...derived.listener_sockets import SocketKey, socket_owner
from ...findings import Link, Status
from ...kernel import SYN_RETRY_US, accept_queue_room
from ..base import RunView
from .sockets import Namespace

KIND = "accept_queue_overflow"
# capacity: at least this share of the overflowing intervals still had a queue at their end.
CAPACITY_QUEUE_LEFT_SHARE = 2 / 3


@dataclass
class Listener:
    """One listening socket: its probe intervals (by time), those it was full in, and its namespace."""

    key: SocketKey
    rows: pd.DataFrame
    full: pd.DataFrame
    limit: int
    interval: int
    ns: Namespace

    @property
    def netns(self) -> int:
        return self.key.netns

    @property
    def laddr(self) -> str:
        return self.key.laddr

    @property
    def lport(self) -> int:
        return self.key.lport


def socket_subject(run: RunView, key: SocketKey, ns: Namespace) -> dict[str, Any]:
    """The socket (and whether ss saw it take IPv4 on an IPv6 socket), the processes behind it, and
    the SO_REUSEPORT group it belongs to when it shares its address and port."""
    subject: dict[str, Any] = {
        "netns": key.netns,
        "netns_label": run.netns_label(key.netns),
        "laddr": key.laddr,
        "lport": key.lport,
        "dual_stack": listener_dual_stack(run.table("listeners"), key.netns, key.laddr, key.lport),
        "sock_ino": key.sock_ino or None,
    }
    members = ns.merged.get(key)
    if members is not None:
        owners = [socket_owner(run, m) for m in members]
        named = [o for owner in owners for o in owner["owners"]]
        first = named[0] if named else {"pid": None, "comm": None}
        subject.update(pid=first["pid"], comm=first["comm"], source=owners[0]["source"], owners=named)
        subject["group"] = {"members": len(members), "judged": "as_one"}
        return subject
    subject.update(socket_owner(run, key))
    if key in ns.siblings:
        subject["group"] = {"members": len(ns.siblings[key]) + 1, "judged": "per_member"}
    return subject


def time_window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


# -- symptom ------------------------------------------------------------------------------------


def symptom_link(run: RunView, netns: int, key: SocketKey | None = None) -> Link:
    """What the clients saw. A lab's client log when there is one; else what the host shows:
    SYN retransmits toward this listener from a local client (counted in the client's
    namespace), the listener's own SYN-ACK retransmits, ss Recv-Q against its limit, ListenDrops.
    Never the server namespace's own TCPSynRetrans: those are its outgoing connects."""
    lab = run.lab or {}
    client_ns = (lab.get("client") or {}).get("netns_inode")
    ev: dict[str, Any] = {}
    client = connects.summary(run)
    if client:
        for k in ("attempts", "ok", "errors", "connect_latency", "connects_waited_syn_retry", "first_byte_latency"):
            ev[k] = client[k]
    host = listener_symptoms(run, key) if key is not None else None
    if host is not None:
        ev.update(_host_symptoms(run, host))
    if sampled(run, netns):
        ev["listen_drops"] = total_delta(run, netns, "ListenDrops")
    if client_ns is None and host is not None and host["client_netns"]:
        # A local client retried SYNs toward this listener: its namespace's TCPSynRetrans.
        client_ns = host["client_netns"][0]
    if client_ns is not None and sampled(run, int(client_ns)):
        ev["syn_retrans_netns"] = run.netns_label(int(client_ns))
        ev["syn_retrans"] = total_delta(run, int(client_ns), "TCPSynRetrans")
    key = _symptom_key(ev, host is not None)
    if key == "server_side_only":
        ev["retransmits_probe"] = run.probe_status("retransmits")
    return Link("symptom", key, ev)


def _host_symptoms(run: RunView, host: dict[str, Any]) -> dict[str, Any]:
    """The listener's clients and queue as the host shows them (retransmits only when their probe ran)."""
    traced = run.probe_status("retransmits") == "ok"
    return {
        "syn_retrans_to_listener": host["syn_retrans_to_listener"] if traced else None,
        "synack_retrans_by_listener": host["synack_retrans_by_listener"] if traced else None,
        "ss_recv_q_max": host["ss_recv_q_max"],
        "ss_send_q": host["ss_send_q"],
        "ss_samples_full": host["ss_samples_full"] if host["ss_samples"] else None,
    }


def _symptom_key(ev: dict[str, Any], on_host: bool) -> str:
    """Where the symptom was seen: the lab's client log, a local client's SYN retries, the server only."""
    if "attempts" in ev:
        return "client_connects"
    if "syn_retrans" in ev:
        return "local_clients" if on_host else "syn_retrans_only"
    # No lab log and no local client retried toward it: the client side is not visible here.
    return "server_side_only" if on_host else "not_captured"


# -- counter --------------------------------------------------------------------------------------


def _socket_name(k: SocketKey) -> str:
    """addr:port, and which socket when it is one member of several."""
    return f"{k.laddr}:{k.lport}" + (f" (socket {k.sock_ino})" if k.sock_ino else "")


def _share_evidence(ns: Namespace, key: SocketKey, interval: int) -> dict[str, Any]:
    """How the namespace's overflows can be shared among the listeners seen full."""
    mine = samples_near(ns.overflows, ns.full_times[key], interval)
    anyone = pd.Series(False, index=ns.overflows.index)
    for t in ns.full_times.values():
        anyone |= samples_near(ns.overflows, t, interval)
    ev: dict[str, Any] = {
        "listen_overflows_matched": int(ns.overflows[mine].sum()),
        "listen_overflows_unmatched": int(ns.overflows[~anyone].sum()),
        "listeners_seen_full": len(ns.full_times),
    }
    if len(ns.full_times) > 1:
        total = sum(ns.full_events.values())
        ranked = sorted(ns.full_events.items(), key=lambda kv: (-kv[1], kv[0]))
        ev["full_events_share_pct"] = round(100 * ns.full_events[key] / total, 1) if total else None
        ev["dominant"] = ranked[0][0] == key
        ev["others"] = [f"{_socket_name(k)} ({n} full events)" for k, n in ranked if k != key]
    return ev


def counter_never_full(run: RunView, li: Listener) -> Link:
    """A listener never seen full: whatever the namespace's counter did, it was not this queue."""
    if not li.ns.sampled:
        return Link("counter", "not_sampled", {"listen_overflows": None})
    overflows_total = total_delta(run, li.netns, "ListenOverflows")
    if overflows_total:
        ev = {
            "netns_label": run.netns_label(li.netns),
            "listen_overflows": overflows_total,
            "listeners_seen_full": len(li.ns.full_times),
        }
        return Link("counter", "overflows_not_here", ev)
    return Link("counter", "no_overflows", {"listen_overflows": overflows_total})


def counter_evidence(run: RunView, li: Listener, window: dict[str, float]) -> dict[str, Any]:
    """The namespace's overflow counters (whole capture, and over the full window) and this listener's share."""
    netns, counted = li.netns, li.ns.sampled
    # Counter samples land up to one interval after the drops they count.
    t0, t1 = window["start_s"], window["end_s"] + li.interval + 0.5
    return {
        "netns_label": run.netns_label(netns),
        "listen_overflows": total_delta(run, netns, "ListenOverflows") if counted else None,
        "listen_overflows_in_window": total_delta(run, netns, "ListenOverflows", t0, t1) if counted else None,
        "listen_drops": total_delta(run, netns, "ListenDrops") if counted else None,
        "reqq_full_drop": total_delta(run, netns, "TCPReqQFullDrop") if counted else None,
        "reqq_full_cookies": total_delta(run, netns, "TCPReqQFullDoCookies") if counted else None,
        "listener_drops": li.ns.own_drops(li.key),
        **(_share_evidence(li.ns, li.key, li.interval) if counted and li.key in li.ns.full_times else {}),
        **((probe_coverage(run, netns, li.interval) or {}) if counted else {}),
    }


# -- probe ----------------------------------------------------------------------------------------


def probe_evidence(li: Listener) -> dict[str, Any]:
    """What the probe saw of the queue: its limit, how often it was full, how deep it got."""
    rows = li.rows
    return {
        "limit": li.limit,
        "intervals_active": len(rows),
        "intervals_full": len(li.full),
        "full_events": int(rows["full_events"].sum()),
        "enqueues": int(rows["enqueues"].sum()),
        "depth_max": int(max(rows["depth_max"].max(), rows["depth_now"].max())),
        "accepted": int(rows["accepted"].sum()),
        "interval_s": li.interval,
        **({"group_others": li.ns.siblings[li.key]} if li.key in li.ns.siblings else {}),
        **({"group_members": len(li.ns.merged[li.key])} if li.key in li.ns.merged else {}),
    }


# -- decision: status and cause class --------------------------------------------------------------


def finding_status(counter_ev: dict[str, Any]) -> Status:
    """Confirmed: the namespace's counter rose in this listener's full intervals, or the
    listener's own drop counter rose. Suspected: the counters could not say (not captured)."""
    matched = (counter_ev.get("listen_overflows_matched") or 0) > 0
    return "confirmed" if matched or (counter_ev.get("listener_drops") or 0) > 0 else "suspected"


def classify(rows: pd.DataFrame, emptied: pd.Series | None = None) -> tuple[str, dict[str, Any]]:
    """Cause class from the listener's intervals (sorted by time; numbers from derived
    interval_shape). emptied: the intervals in which the application found the queue empty
    (derived found_empty), or None."""
    ev = interval_shape(rows, emptied)
    if ev["intervals_stalled_from_full"]:
        return "stall", ev
    # Overload keeps a queue at (nearly) every overflowing interval's end; bursts
    # leave one only when a print happens to land while one drains. Two ends in a
    # row are not enough on their own: the burst period and the print interval
    # drift slowly against each other, so a sizing run can catch two or three
    # draining bursts in a row. Measured (limit 16, share of overflowing intervals
    # ending with >= 8 queued): queue variant 7/9; sizing runs 0/10, 2/10, 3/8
    # (the last one, with ends 14 and 11 in a row, was called capacity by a
    # two-in-a-row rule alone in a CI run).
    queue_left = ev["overflowing_share_with_queue_left"] >= CAPACITY_QUEUE_LEFT_SHARE
    if ev["longest_full_run_with_accepts"] >= 2 and queue_left:
        return "capacity", ev
    return "sizing", ev


def unless_probe_gaps(run: RunView, li: Listener, cause_class: str, class_ev: dict[str, Any]) -> tuple[str, dict]:
    """A stall seen stands; any other class read from rows that fold seconds the probe did not print
    (derived probe_gaps) is not known (probe_gap): a stall in those seconds would read as accepts (sizing)."""
    if cause_class == "stall":
        return cause_class, class_ev
    gaps = probe_gaps(li.rows, run.table("aq_listener")["time_s"], li.interval)
    if not gaps:
        return cause_class, class_ev
    shown = [{"from_rel_s": round(a - run.start, 1), "to_rel_s": round(b - run.start, 1)} for a, b in gaps]
    command = f"make capture NETNS={run.netns_label(li.netns)} PROBES=accept_queue DURATION=60"
    return "probe_gap", {**class_ev, "rows_alone_read": cause_class, "probe_gaps": shown, "recapture_command": command}


# -- cause ------------------------------------------------------------------------------------------


def _binding_knob(requested: int | None, somax: int | None) -> tuple[str, int | None]:
    """Which knob sets the queue's limit (the backlog asked for, or somaxconn), and the limit expected."""
    if requested is None or somax is None:
        return "unknown", None
    binding = "app_backlog" if requested <= somax else "somaxconn"
    return binding, min(requested if requested > 0 else somax, somax)


def cause_evidence(
    run: RunView,
    li: Listener,
    window: dict[str, float],
    cause_class: str,
    class_ev: dict[str, Any],
    rates: AcceptRates,
) -> dict[str, Any]:
    """Requested vs effective backlog and which knob binds; accept vs arrival; the saturation model."""
    requested = requested_backlog(run, li.key, li.limit)
    somax = somaxconn(run, li.netns)
    binding, expected = _binding_knob(requested, somax)
    ev: dict[str, Any] = {
        "limit_effective": li.limit,
        "backlog_requested": requested,
        "somaxconn": somax,
        "limit_expected": expected,
        "limit_matches_min_rule": (expected == li.limit) if expected is not None else None,
        "binding_knob": binding,
        "peak_enqueues_per_interval": rates.peak_enqueues,
        "accept_rate_per_s": round(rates.accept_per_s, 1),
        "accept_rate_min_per_s": round(rates.accept_min_per_s, 1),
        **class_ev,
    }
    # On a namespace with other busy listeners, PassiveOpens is not this listener's: use its own enqueues.
    own = li.rows[["time_s", "enqueues"]] if li.ns.busy else None
    t0, t1 = window["start_s"], window["end_s"]
    ev["model"] = (
        None
        if cause_class == "probe_gap"
        else saturation_model(
            run, li.netns, li.full, cause_class, li.limit, t0, t1, li.interval, own, len(li.ns.merged.get(li.key, ()))
        )
        if li.ns.sampled
        else None
    )
    return ev


# -- fix and verification -------------------------------------------------------------------------


def fix_evidence(
    li: Listener, cause_class: str, cause_ev: dict[str, Any], rates: AcceptRates, dropped: int | None
) -> dict[str, Any]:
    """What to change, by cause class: room for the peak burst (sizing); how long the queue holds the
    arrivals through a stall (stall); the accept rate to raise (capacity)."""
    somax = cause_ev["somaxconn"]
    ev: dict[str, Any] = {"binding_knob": cause_ev["binding_knob"], "somaxconn": somax, "limit_effective": li.limit}
    if cause_class == "sizing":
        # Room for the peak burst seen (admitted + dropped), rounded up to a power of two.
        want = max(rates.peak_enqueues, accept_queue_room(li.limit)) * 2
        ev["backlog_suggested"] = 2 ** math.ceil(math.log2(want))
        ev["somaxconn_needed"] = (somax is not None) and ev["backlog_suggested"] > somax
        ev["dropped_in_window"] = int(dropped or 0)
    elif cause_class == "stall":
        rate = rates.arrival_before_per_s or rates.accept_per_s or 1.0
        ev["arrival_rate_before_per_s"] = round(rate, 1)
        ev["seconds_of_arrivals_the_queue_holds"] = round(accept_queue_room(li.limit) / rate, 2) if rate else None
        ev["stalled_seconds_seen"] = cause_ev["intervals_stalled"] * li.interval
    elif cause_class == "probe_gap":
        ev["command"] = cause_ev["recapture_command"]
    else:
        ev["accept_rate_per_s"] = round(rates.accept_per_s, 1)
    if li.key in li.ns.siblings:  # one member of a group whose others kept up: that member's loop
        ev["group_members"] = len(li.ns.siblings[li.key]) + 1
    return ev


def verification_link(run: RunView, cause_class: str, fix_ev: dict[str, Any], netns_label: str) -> Link:
    """The re-run that shows the fix worked: in a lab the fix is a parameter, so a concrete one."""
    lab = run.lab or {}
    if lab.get("command"):
        fixed = {"sizing": f" BACKLOG={fix_ev.get('backlog_suggested')}", "stall": " STALL_FOR=0s"}
        command = lab["command"] + fixed.get(cause_class, "")
    else:
        command = f"make capture NETNS={netns_label} DURATION=60"
    ev = {
        "command": command,
        "expect_listen_overflows": 0,
        "expect_intervals_full": 0,
        "expect_connect_p99_ms_below": SYN_RETRY_US / 1000,
    }
    return Link("verification", "rerun", ev)


def unattributed_reason(probe_status: str | None, ss_full: list[str], near_full: list[str], interval: int) -> str:
    """Why no listener was seen full while the namespace counted overflows."""
    if probe_status != "ok":
        return "probe_not_run"
    if ss_full:
        return "listener_not_tracked"
    if near_full or interval > 1:
        return "interval_too_coarse"
    return "not_seen"
