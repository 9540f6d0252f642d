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
 probe_gap not stall, and a listener holding connections got no row (nor did any
           other listener) for more than two intervals inside its overflow: the probe's
           timer did not run, and a stall then would read as accepts: cause unknown.
"""

from __future__ import annotations

import pandas as pd

from ...derived import interval_s
from ...derived.accept_queue import (
    LISTENER_KEY,
    accept_rates,
    found_empty,
    full_intervals,
    limit_changes,
    limit_in_force,
    listeners_tracked,
    near_full_listeners,
    ss_full_listeners,
)
from ...derived.counters import total_delta
from ...derived.listener_sockets import SocketKey, socket_owner
from ...derived.servers import server_of
from ...findings import Finding, Link
from ..base import Rule, RunView
from .chain import (
    KIND,
    Listener,
    cause_evidence,
    classify,
    counter_evidence,
    counter_never_full,
    finding_status,
    fix_evidence,
    probe_evidence,
    socket_subject,
    symptom_link,
    time_window,
    unattributed_reason,
    unless_probe_gaps,
    verification_link,
)
from .own_drops import from_own_drops, unseen_by_probe
from .sockets import Namespace, namespace

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


# -- one listener, one namespace, the run -----------------------------------------------------------


def _evaluate_listener(run: RunView, key: SocketKey, rows: pd.DataFrame, ns: Namespace) -> Finding:
    """Absent when the queue was never full, or full while the captured counter did not rise then;
    else the whole chain."""
    rows = rows.sort_values("time_s")
    full = full_intervals(rows)
    li = Listener(key, rows, full, limit_in_force(rows, full), interval_s(run), ns)
    subject = socket_subject(run, key, ns)
    probe_ev = probe_evidence(li)
    calls = run.table("aq_listen")
    calls = calls[(calls["netns"] == li.netns) & (calls["lport"] == li.lport)]
    if key.sock_ino or key in ns.merged:  # a group's limit is its members' sum: no call sets it
        calls = calls[calls["sock_ino"] == key.sock_ino]
    if changes := limit_changes(li.rows, run.start, calls):
        probe_ev["limit_changes"] = changes  # the limit in force at the overflow is li.limit
    if key not in ns.full_times and (ns.own_drops(key) or 0) > 0:
        # The probe did not see it full, the kernel's own per-socket counter says it dropped.
        return from_own_drops(run, ns, key, probe_ev, rows)
    if li.full.empty:
        chain = [Link("probe", "never_full", probe_ev), counter_never_full(run, li)]
        return Finding(KIND, "absent", subject, chain=chain)
    window = time_window(run, float(li.full["time_s"].min()) - li.interval, float(li.full["time_s"].max()))
    counter_ev = counter_evidence(run, li, window)
    probe_ev["first_full_rel_s"] = window["start_rel_s"] + li.interval
    probe_ev["last_full_rel_s"] = window["end_rel_s"]
    if key not in ns.full_times:
        # Full while no connection was dropped on it: the captured counter did not rise then, or
        # its own drop counter did not rise at all (the namespace's overflows were a neighbour's).
        counter_key = "own_drops_zero" if ns.own_drops(key) == 0 else "no_overflows_then"
        chain = [Link("probe", "full_no_drops", probe_ev), Link("counter", counter_key, counter_ev)]
        return Finding(KIND, "absent", subject, window=window, chain=chain)
    emptied = None if key in ns.merged else found_empty(run, key, li.rows)
    cause_class, class_ev = unless_probe_gaps(run, li, *classify(li.rows, emptied))
    rates = accept_rates(li.rows, li.full, li.interval)
    cause_ev = cause_evidence(run, li, window, cause_class, class_ev, rates)
    fix_ev = fix_evidence(li, cause_class, cause_ev, rates, counter_ev["listen_overflows_in_window"])
    fix_ev["server"] = server_of(run, li.netns, subject.get("pid"))  # its own knob in the wording
    chain = [
        symptom_link(run, li.netns, key),
        Link("counter", "listen_overflows" if ns.sampled else "not_sampled", counter_ev),
        Link("probe", "queue_full", probe_ev),
        Link("cause", cause_class, cause_ev),
        Link("fix", cause_class, fix_ev),
        verification_link(run, cause_class, fix_ev, subject["netns_label"]),
    ]
    return Finding(KIND, finding_status(counter_ev), subject, window=window, cause_class=cause_class, chain=chain)


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
        "reason": unattributed_reason(status, ss_full, near, interval),
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
        window=time_window(run, t0, t1),
        cause_class="unattributed",
        chain=[
            symptom_link(run, inode),
            Link("counter", "listen_overflows", counter_ev),
            Link("probe", "no_full_listener_seen", probe_ev),
            Link("cause", "unattributed", probe_ev),
        ],
    )


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
        out.extend(unseen_by_probe(run, ns, judged))
        # Overflows counted where neither the probe nor a socket's own counter named one:
        # unattributed, with the reason.
        named = any(f.is_finding and f.subject.get("netns") == inode for f in out)
        if not ns.full_times and ns.overflows.sum() > 0 and not named:
            out.append(_unattributed(run, inode, labels[inode], ns))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
