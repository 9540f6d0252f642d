"""accept_queue_overflow: a listener's accept queue filled and the kernel dropped connections.

Chain: symptom (client connect latency / errors, SYN retransmits)
 -> counter (TcpExt.ListenOverflows delta in the listener's namespace; the listener's
    own sk_drops from ss -m, which names a listener the probe did not see full)
 -> probe (intervals where depth > limit, max depth vs limit)
 -> cause (requested vs effective backlog and somaxconn; accept vs arrival; class)
 -> fix -> verification.

Cause classes, from the probe's per-interval rows:
 stall     the queue was full at the end of an interval in which the listener
           accepted nothing: the application stopped calling accept().
 capacity  the queue stayed full across consecutive intervals, and still held a
           queue at the end of most intervals that overflowed, although the
           application kept accepting: arrivals outran the accept path.
 sizing    the queue overflowed within intervals but drained by their end:
           bursts larger than the backlog.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...derived import connects, interval_s
from ...derived.accept_queue import (
    LISTENER_KEY,
    AcceptRates,
    accept_rates,
    found_empty,
    full_intervals,
    interval_shape,
    limit_changes,
    limit_in_force,
    listener_symptoms,
    listeners_tracked,
    near_full_listeners,
    requested_backlog,
    samples_near,
    saturation_model,
    somaxconn,
    ss_full_listeners,
)
from ...derived.addresses import listener_dual_stack
from ...derived.counters import sampled, total_delta
from ...derived.listener_sockets import SocketKey, drop_key, socket_owner
from ...derived.servers import server_of
from ...findings import Finding, Link, Status
from ...kernel import SYN_RETRY_US, accept_queue_room
from ..base import Rule, RunView
from .sockets import Namespace, namespace

KIND = "accept_queue_overflow"
# capacity: at least this share of the overflowing intervals still had a queue at their end.
CAPACITY_QUEUE_LEFT_SHARE = 2 / 3
# rt_endpoint: SYN retransmits toward a listener from a local client, and its SYN-ACK retransmits.
INPUTS = (
    "aq_listener",
    "aq_accept",
    "aq_listen",
    "counters",
    "listeners",
    "sysctls",
    "connects",
    "rt_endpoint",
    "processes",
)


@dataclass
class _Listener:
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


def _subject(run: RunView, key: SocketKey, ns: Namespace) -> dict[str, Any]:
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


def _window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


# -- symptom ------------------------------------------------------------------------------------


def _symptom(run: RunView, netns: int, key: SocketKey | None = None) -> Link:
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


def _counter_never_full(run: RunView, li: _Listener) -> Link:
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


def _counter_evidence(run: RunView, li: _Listener, window: dict[str, float]) -> dict[str, Any]:
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
    }


# -- probe ----------------------------------------------------------------------------------------


def _probe_evidence(li: _Listener) -> dict[str, Any]:
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


def _status(counter_ev: dict[str, Any]) -> Status:
    """Confirmed: the namespace's counter rose in this listener's full intervals, or the
    listener's own drop counter rose. Suspected: the counters could not say (not captured)."""
    matched = (counter_ev.get("listen_overflows_matched") or 0) > 0
    return "confirmed" if matched or (counter_ev.get("listener_drops") or 0) > 0 else "suspected"


def _classify(rows: pd.DataFrame, emptied: pd.Series | None = None) -> tuple[str, dict[str, Any]]:
    """Cause class from the listener's intervals (sorted by time; numbers from derived
    interval_shape). emptied: the intervals in which the application found the queue empty
    (derived found_empty), or None."""
    ev = interval_shape(rows, emptied)
    if ev["intervals_stalled"]:
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


# -- cause ------------------------------------------------------------------------------------------


def _binding_knob(requested: int | None, somax: int | None) -> tuple[str, int | None]:
    """Which knob sets the queue's limit (the backlog asked for, or somaxconn), and the limit expected."""
    if requested is None or somax is None:
        return "unknown", None
    binding = "app_backlog" if requested <= somax else "somaxconn"
    return binding, min(requested if requested > 0 else somax, somax)


def _cause_evidence(
    run: RunView,
    li: _Listener,
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
        saturation_model(
            run, li.netns, li.full, cause_class, li.limit, t0, t1, li.interval, own, len(li.ns.merged.get(li.key, ()))
        )
        if li.ns.sampled
        else None
    )
    return ev


# -- fix and verification -------------------------------------------------------------------------


def _fix_evidence(
    li: _Listener, cause_class: str, cause_ev: dict[str, Any], rates: AcceptRates, dropped: int | None
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
    else:
        ev["accept_rate_per_s"] = round(rates.accept_per_s, 1)
    if li.key in li.ns.siblings:  # one member of a group whose others kept up: that member's loop
        ev["group_members"] = len(li.ns.siblings[li.key]) + 1
    return ev


def _verification(run: RunView, cause_class: str, fix_ev: dict[str, Any], netns_label: str) -> Link:
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


# -- one listener, one namespace, the run -----------------------------------------------------------


def _evaluate_listener(run: RunView, key: SocketKey, rows: pd.DataFrame, ns: Namespace) -> Finding:
    """Absent when the queue was never full, or full while the captured counter did not rise then;
    else the whole chain."""
    rows = rows.sort_values("time_s")
    full = full_intervals(rows)
    li = _Listener(key, rows, full, limit_in_force(rows, full), interval_s(run), ns)
    subject = _subject(run, key, ns)
    probe_ev = _probe_evidence(li)
    calls = run.table("aq_listen")
    calls = calls[(calls["netns"] == li.netns) & (calls["lport"] == li.lport)]
    if key.sock_ino or key in ns.merged:  # a group's limit is its members' sum: no call sets it
        calls = calls[calls["sock_ino"] == key.sock_ino]
    if changes := limit_changes(li.rows, run.start, calls):
        probe_ev["limit_changes"] = changes  # the limit in force at the overflow is li.limit
    if key not in ns.full_times and (ns.own_drops(key) or 0) > 0:
        # The probe did not see it full, the kernel's own per-socket counter says it dropped.
        return _from_own_drops(run, ns, key, probe_ev, rows)
    if li.full.empty:
        chain = [Link("probe", "never_full", probe_ev), _counter_never_full(run, li)]
        return Finding(KIND, "absent", subject, chain=chain)
    window = _window(run, float(li.full["time_s"].min()) - li.interval, float(li.full["time_s"].max()))
    counter_ev = _counter_evidence(run, li, window)
    probe_ev["first_full_rel_s"] = window["start_rel_s"] + li.interval
    probe_ev["last_full_rel_s"] = window["end_rel_s"]
    if key not in ns.full_times:
        # Full while no connection was dropped on it: the captured counter did not rise then, or
        # its own drop counter did not rise at all (the namespace's overflows were a neighbour's).
        counter_key = "own_drops_zero" if ns.own_drops(key) == 0 else "no_overflows_then"
        chain = [Link("probe", "full_no_drops", probe_ev), Link("counter", counter_key, counter_ev)]
        return Finding(KIND, "absent", subject, window=window, chain=chain)
    emptied = None if key in ns.merged else found_empty(run, key, li.rows)
    cause_class, class_ev = _classify(li.rows, emptied)
    rates = accept_rates(li.rows, li.full, li.interval)
    cause_ev = _cause_evidence(run, li, window, cause_class, class_ev, rates)
    fix_ev = _fix_evidence(li, cause_class, cause_ev, rates, counter_ev["listen_overflows_in_window"])
    fix_ev["server"] = server_of(run, li.netns, subject.get("pid"))  # its own knob in the wording
    chain = [
        _symptom(run, li.netns, key),
        Link("counter", "listen_overflows" if ns.sampled else "not_sampled", counter_ev),
        Link("probe", "queue_full", probe_ev),
        Link("cause", cause_class, cause_ev),
        Link("fix", cause_class, fix_ev),
        _verification(run, cause_class, fix_ev, subject["netns_label"]),
    ]
    return Finding(KIND, _status(counter_ev), subject, window=window, cause_class=cause_class, chain=chain)


def _unattributed_reason(probe_status: str | None, ss_full: list[str], near_full: list[str], interval: int) -> str:
    """Why no listener was seen full while the namespace counted overflows."""
    if probe_status != "ok":
        return "probe_not_run"
    if ss_full:
        return "listener_not_tracked"
    if near_full or interval > 1:
        return "interval_too_coarse"
    return "not_seen"


def _unattributed(run: RunView, inode: int, label: str, ns: Namespace) -> Finding:
    """Overflows counted in a namespace where the probe saw no listener full: said so, and why,
    never pinned on a listener."""
    interval = interval_s(run)
    t = ns.overflows.index.to_numpy(dtype=float)
    t0, t1 = float(t.min()) - interval, float(t.max())
    ss_full = ss_full_listeners(run, inode)
    # Listeners the probe saw one short of full (depth = limit) around the overflows.
    near = near_full_listeners(run, inode, t0 - interval, t1 + interval)
    status = run.probe_status("accept_queue")
    probe_ev = {
        "probe_status": status,
        "reason": _unattributed_reason(status, ss_full, near, interval),
        "ss_full_listeners": ss_full,
        "near_full_listeners": near,
        "interval_s": interval,
        "listeners_tracked": listeners_tracked(run, inode),
    }
    counter_ev = {
        "netns_label": label,
        "listen_overflows": int(ns.overflows.sum()),
        "listen_drops": total_delta(run, inode, "ListenDrops"),
    }
    return Finding(
        KIND,
        "suspected",
        {"netns": inode, "netns_label": label, "laddr": None, "lport": None},
        window=_window(run, t0, t1),
        cause_class="unattributed",
        chain=[
            _symptom(run, inode),
            Link("counter", "listen_overflows", counter_ev),
            Link("probe", "no_full_listener_seen", probe_ev),
            Link("cause", "unattributed", probe_ev),
        ],
    )


# -- a listener named by its own drop counter ---------------------------------------------------


def _own_drops_probe(run: RunView, probe_ev: dict[str, Any] | None) -> Link:
    """What the probe saw of a listener its own counter names: not full, or nothing at all."""
    if probe_ev is not None:
        return Link("probe", "never_full", probe_ev)
    status = run.probe_status("accept_queue")
    return Link(
        "probe",
        "no_full_listener_seen",
        {
            "probe_status": status,
            "reason": _unattributed_reason(status, [], [], interval_s(run))
            if status != "ok"
            else "listener_not_tracked",
        },
    )


def _drops_not_overflows(rows: pd.DataFrame | None) -> bool:
    """The probe followed this socket's every enqueue (a tier that reads the socket each one is
    queued on) and never saw its queue reach its limit: a rise of its sk_drops then is not an
    overflow (the kernel also counts there the RSTs and stray segments a listener discards)."""
    if rows is None or rows.empty or int(rows["sock_ino"].iloc[0]) == 0:
        return False
    return bool((rows[["depth_max", "depth_now"]].max(axis=1) < rows["limit"]).all())


def _from_own_drops(
    run: RunView, ns: Namespace, key: SocketKey, probe_ev: dict[str, Any] | None, rows: pd.DataFrame | None = None
) -> Finding:
    """A socket whose own sk_drops rose while the probe did not see it full (a tier that misses
    stalls, a probe that did not run, an interval too coarse): named from the kernel's own
    per-socket counter; how it overflowed stays unclassified. Absent when the probe followed
    the socket and its queue never reached its limit."""
    own = ns.own_drops(key) or 0
    subject = _subject(run, key, ns)
    counter_ev = {
        "netns_label": run.netns_label(ns.netns),
        "listener_drops": own,
        "listen_overflows": total_delta(run, ns.netns, "ListenOverflows") if ns.counted else None,
        "listen_drops": total_delta(run, ns.netns, "ListenDrops") if ns.sampled else None,
        "listeners_dropping": len([n for n in ns.drops.values() if n > 0]),
    }
    if _drops_not_overflows(rows) and probe_ev is not None:
        chain = [Link("probe", "never_full", probe_ev), Link("counter", "drops_not_overflows", counter_ev)]
        return Finding(KIND, "absent", subject, chain=chain)
    if counter_ev["listen_drops"] == 0:
        # Every overflow and every SYN or ACK a listener drops for want of room is counted in its
        # namespace's ListenDrops; a socket's drops with none there were other discards.
        chain = [_own_drops_probe(run, probe_ev), Link("counter", "no_listen_drops", counter_ev)]
        return Finding(KIND, "absent", subject, chain=chain)
    command = f"make capture NETNS={run.netns_label(ns.netns)} PROBES=accept_queue DURATION=60"
    return Finding(
        KIND,
        "confirmed",
        subject,
        cause_class="unclassified",
        chain=[
            _symptom(run, ns.netns, key),
            Link("counter", "listener_drops", counter_ev),
            _own_drops_probe(run, probe_ev),
            Link("cause", "unclassified", {"listener_drops": own}),
            Link("fix", "unclassified", {"command": command}),
            Link("verification", "rerun", {"command": command, "expect_listen_overflows": 0}),
        ],
    )


def _unseen_by_probe(run: RunView, ns: Namespace, mine: dict[SocketKey, pd.DataFrame]) -> list[Finding]:
    """Sockets whose own drops rose and that the probe never reported on at all."""
    seen = {drop_key(k.laddr, k.lport, k.sock_ino) for k in mine}
    seen |= {drop_key(m.laddr, m.lport, m.sock_ino) for members in ns.merged.values() for m in members}
    out = []
    for (laddr, lport, ino), n in sorted(ns.drops.items()):
        if n > 0 and (laddr, lport, ino) not in seen:
            out.append(_from_own_drops(run, ns, SocketKey(ns.netns, laddr, lport, ino), None))
    return out


# -- one namespace, the run -------------------------------------------------------------------------


def _not_sampled(run: RunView, inode: int, mine: dict[SocketKey, pd.DataFrame]) -> list[Finding]:
    """Sockets of a namespace the capture did not sample: not judged (no counter, no ss row to hold
    the probe's rows to). Those the probe saw at or over their limit are listed as not checked,
    with the capture that would judge them."""
    out = []
    for key, rows in mine.items():
        deepest = rows[["depth_max", "depth_now"]].max(axis=1)
        if not (deepest >= rows["limit"]).any():
            continue
        ev = {
            "netns": inode,
            "depth_max": int(deepest.max()),
            "limit": int(rows["limit"].iloc[-1]),
            "full_events": int(rows["full_events"].sum()),
            "command": f"make capture NETNS=inode:{inode} PROBES=accept_queue DURATION=60",
        }
        subject = {"netns": inode, "netns_label": run.netns_label(inode), "laddr": key.laddr, "lport": key.lport,
                   "sock_ino": key.sock_ino or None, **socket_owner(run, key)}  # fmt: skip
        out.append(Finding(KIND, "not_checked", subject, chain=[Link("probe", "not_sampled", ev)]))
    return out


def _evaluate(run: RunView) -> list[Finding]:
    rows = run.table("aq_listener")
    labels = {int(ns["inode"]): ns["label"] for ns in run.metadata["netns"]}
    sockets = {SocketKey(int(a), str(b), int(c), int(d)): g for (a, b, c, d), g in rows.groupby(LISTENER_KEY)}
    out: list[Finding] = []
    for inode in sorted(set(labels) | {k.netns for k in sockets}):
        mine = {k: g for k, g in sockets.items() if k.netns == inode}
        if inode not in labels:
            out.extend(_not_sampled(run, inode, mine))
            continue
        ns, judged = namespace(run, inode, mine)
        out.extend(_evaluate_listener(run, key, grp, ns) for key, grp in judged.items())
        out.extend(_unseen_by_probe(run, ns, judged))
        # Overflows counted where neither the probe nor a socket's own counter named one:
        # unattributed, with the reason.
        named = any(f.is_finding and f.subject.get("netns") == inode for f in out)
        if not ns.full_times and ns.overflows.sum() > 0 and not named:
            out.append(_unattributed(run, inode, labels[inode], ns))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
