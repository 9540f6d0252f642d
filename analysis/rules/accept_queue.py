"""accept_queue_overflow: a listener's accept queue filled and the kernel dropped connections.

Chain: symptom (client connect latency / errors, SYN retransmits)
 -> counter (TcpExt.ListenOverflows delta in the listener's namespace)
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

from ..derived import connects
from ..derived.accept_queue import (
    LISTENER_KEY,
    full_intervals,
    listener_symptoms,
    overflow_samples,
    owner,
    requested_backlog,
    samples_near,
    saturation_model,
    somaxconn,
    ss_full_listeners,
)
from ..derived.counters import recorded, sampled, total_delta
from ..findings import Finding, Link
from ..kernel import SYN_RETRY_US, accept_queue_room
from .base import Rule, RunView

KIND = "accept_queue_overflow"
# capacity: at least this share of the overflowing intervals still had a queue at their end.
CAPACITY_QUEUE_LEFT_SHARE = 2 / 3
# rt_endpoint: SYN retransmits toward a listener from a local client, and its SYN-ACK retransmits.
INPUTS = ("aq_listener", "aq_accept", "aq_listen", "counters", "listeners", "sysctls", "connects", "rt_endpoint")


def _symptom(run: RunView, netns: int, laddr: str | None = None, lport: int | None = None) -> Link:
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
    host = listener_symptoms(run, netns, laddr, lport) if lport is not None else None
    if host is not None:
        ev["syn_retrans_to_listener"] = (
            host["syn_retrans_to_listener"] if run.probe_status("retransmits") == "ok" else None
        )
        ev["synack_retrans_by_listener"] = (
            host["synack_retrans_by_listener"] if run.probe_status("retransmits") == "ok" else None
        )
        ev["ss_recv_q_max"] = host["ss_recv_q_max"]
        ev["ss_send_q"] = host["ss_send_q"]
        ev["ss_samples_full"] = host["ss_samples_full"] if host["ss_samples"] else None
    if sampled(run, netns):
        ev["listen_drops"] = total_delta(run, netns, "ListenDrops")
    if client_ns is None and host is not None and host["client_netns"]:
        # A local client retried SYNs toward this listener: its namespace's TCPSynRetrans.
        client_ns = host["client_netns"][0]
    if client_ns is not None and sampled(run, int(client_ns)):
        ev["syn_retrans_netns"] = run.netns_label(int(client_ns))
        ev["syn_retrans"] = total_delta(run, int(client_ns), "TCPSynRetrans")
    if "attempts" in ev:
        key = "client_connects"
    elif "syn_retrans" in ev:
        key = "local_clients" if host is not None else "syn_retrans_only"
    elif host is not None:
        # No lab log and no local client retried toward it: the client side is not visible here.
        ev["retransmits_probe"] = run.probe_status("retransmits")
        key = "server_side_only"
    else:
        key = "not_captured"
    return Link("symptom", key, ev)


def _classify(rows: pd.DataFrame) -> tuple[str, dict[str, Any]]:
    """Cause class from the listener's intervals (sorted by time)."""
    full_at_end = rows["depth_now"] > rows["limit"]
    nearly_full_at_end = rows["depth_now"] >= rows["limit"]
    stalled = nearly_full_at_end & (rows["accepted"] == 0)
    # Runs of consecutive intervals that overflowed and still had a queue at
    # their end while accepts went on: the accept loop never caught up. After
    # a burst (sizing) the queue drains before the interval ends.
    # "A queue" means at least half the limit: the print lands at some phase of
    # the bursts (and of their SYN retries), so a burst still draining can
    # leave a few. Measured at interval ends with limit 16: sizing runs 0-11
    # (never two ends in a row at >= 8), overload (queue variant) 14-18.
    backlog_left = rows["depth_now"] >= (rows["limit"] // 2).clip(lower=1)
    busy_full = (
        ((nearly_full_at_end | (backlog_left & (rows["full_events"] > 0))) & (rows["accepted"] > 0))
        .astype(int)
        .tolist()
    )
    longest, cur = 0, 0
    for b in busy_full:
        cur = cur + 1 if b else 0
        longest = max(longest, cur)
    # Overload keeps a queue at (nearly) every overflowing interval's end; bursts
    # leave one only when a print happens to land while one drains. Two ends in a
    # row are not enough on their own: the burst period and the print interval
    # drift slowly against each other, so a sizing run can catch two or three
    # draining bursts in a row. Measured (limit 16, share of overflowing intervals
    # ending with >= 8 queued): queue variant 7/9; sizing runs 0/10, 2/10, 3/8
    # (the last one, with ends 14 and 11 in a row, was called capacity by a
    # two-in-a-row rule alone in a CI run).
    overflowing = rows["full_events"] > 0
    left_share = float((backlog_left & overflowing).sum()) / max(1, int(overflowing.sum()))
    ev = {
        "intervals_stalled": int(stalled.sum()),
        "intervals_full_at_end": int(full_at_end.sum()),
        "longest_full_run_with_accepts": longest,
        "overflowing_intervals": int(overflowing.sum()),
        "overflowing_share_with_queue_left": round(left_share, 3),
    }
    if stalled.any():
        return "stall", ev
    if longest >= 2 and left_share >= CAPACITY_QUEUE_LEFT_SHARE:
        return "capacity", ev
    return "sizing", ev


@dataclass
class _Namespace:
    """What one namespace's listeners share: its overflow counter, and who was seen full when it rose."""

    netns: int
    sampled: bool
    overflows: pd.Series  # ListenOverflows delta per counter sample, where it rose
    full_times: dict[tuple[int, str, int], list[float]]  # implicated listeners -> their full intervals
    full_events: dict[tuple[int, str, int], int]
    busy: bool  # more than one listener queued connections in the capture
    counted: bool  # ListenOverflows was captured in this namespace (sampled, and the counter listed)


def _share_evidence(ns: _Namespace, key: tuple[int, str, int], interval: int) -> dict[str, Any]:
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
        ev["others"] = [f"{k[1]}:{k[2]} ({n} full events)" for k, n in ranked if k != key]
    return ev


def _evaluate_listener(run: RunView, key: tuple[int, str, int], rows: pd.DataFrame, ns: _Namespace) -> Finding:
    netns, laddr, lport = int(key[0]), str(key[1]), int(key[2])
    rows = rows.sort_values("time_s")
    interval = int(run.metadata.get("interval_s", 1))
    limit = int(rows["limit"].max())
    full = full_intervals(rows)
    subject = {
        "netns": netns,
        "netns_label": run.netns_label(netns),
        "laddr": laddr,
        "lport": lport,
        **owner(run, netns, lport),
    }
    is_sampled = ns.sampled
    overflows_total = total_delta(run, netns, "ListenOverflows") if is_sampled else None

    probe_ev = {
        "limit": limit,
        "intervals_active": len(rows),
        "intervals_full": len(full),
        "full_events": int(rows["full_events"].sum()),
        "enqueues": int(rows["enqueues"].sum()),
        "depth_max": int(max(rows["depth_max"].max(), rows["depth_now"].max())),
        "accepted": int(rows["accepted"].sum()),
        "interval_s": interval,
    }
    if full.empty:
        # Never seen full: whatever the namespace's counter did, it was not this queue.
        if not is_sampled:
            counter = Link("counter", "not_sampled", {"listen_overflows": None})
        elif overflows_total:
            counter = Link(
                "counter",
                "overflows_not_here",
                {
                    "netns_label": run.netns_label(netns),
                    "listen_overflows": overflows_total,
                    "listeners_seen_full": len(ns.full_times),
                },
            )
        else:
            counter = Link("counter", "no_overflows", {"listen_overflows": overflows_total})
        return Finding(KIND, "absent", subject, chain=[Link("probe", "never_full", probe_ev), counter])

    t0 = float(full["time_s"].min()) - interval
    t1 = float(full["time_s"].max())
    window = {
        "start_s": t0,
        "end_s": t1,
        "start_rel_s": round(t0 - run.start, 1),
        "end_rel_s": round(t1 - run.start, 1),
    }
    # Counter samples land up to one interval after the drops they count.
    in_window = total_delta(run, netns, "ListenOverflows", t0, t1 + interval + 0.5) if is_sampled else None
    counter_ev = {
        "netns_label": run.netns_label(netns),
        "listen_overflows": overflows_total,
        "listen_overflows_in_window": in_window,
        "listen_drops": total_delta(run, netns, "ListenDrops") if is_sampled else None,
        "reqq_full_drop": total_delta(run, netns, "TCPReqQFullDrop") if is_sampled else None,
        "reqq_full_cookies": total_delta(run, netns, "TCPReqQFullDoCookies") if is_sampled else None,
        **(_share_evidence(ns, key, interval) if is_sampled and key in ns.full_times else {}),
    }
    probe_ev["first_full_rel_s"] = window["start_rel_s"] + interval
    probe_ev["last_full_rel_s"] = window["end_rel_s"]

    # Confirmed: the probe saw this queue full and the namespace's counter rose in those intervals.
    # Full while the captured counter did not rise then: no connection was dropped; not implicated.
    # Suspected only when the counter could not say (not captured).
    if key not in ns.full_times:
        return Finding(
            KIND,
            "absent",
            subject,
            window=window,
            chain=[
                Link("probe", "full_no_drops", probe_ev),
                Link("counter", "no_overflows_then", counter_ev),
            ],
        )
    status = "confirmed" if (counter_ev.get("listen_overflows_matched") or 0) > 0 else "suspected"
    cause_class, class_ev = _classify(rows)

    # Requested vs effective backlog, and which knob binds.
    requested = requested_backlog(run, netns, lport)
    somax = somaxconn(run, netns)
    if requested is not None and somax is not None:
        binding = "app_backlog" if requested <= somax else "somaxconn"
        expected = min(requested if requested > 0 else somax, somax)
    else:
        binding, expected = "unknown", None
    active = rows[rows["enqueues"] + rows["accepted"] > 0]
    peak_enqueues = int(rows["enqueues"].max())
    mean_accept = float(active["accepted"].mean()) / interval if not active.empty else 0.0
    pre_full = rows[rows["time_s"] < (full["time_s"].min() if not full.empty else 0)]
    arrival_before = float(pre_full["enqueues"].mean()) / interval if not pre_full.empty else None
    cause_ev: dict[str, Any] = {
        "limit_effective": limit,
        "backlog_requested": requested,
        "somaxconn": somax,
        "limit_expected": expected,
        "limit_matches_min_rule": (expected == limit) if expected is not None else None,
        "binding_knob": binding,
        "peak_enqueues_per_interval": peak_enqueues,
        "accept_rate_per_s": round(mean_accept, 1),
        "accept_rate_min_per_s": round(float(active["accepted"].min()) / interval, 1) if not active.empty else 0.0,
        **class_ev,
    }

    # On a namespace with other busy listeners, PassiveOpens is not this listener's: use its own enqueues.
    own = rows[["time_s", "enqueues"]] if ns.busy else None
    cause_ev["model"] = (
        saturation_model(run, netns, full, cause_class, limit, t0, t1, interval, own) if is_sampled else None
    )

    fix_ev: dict[str, Any] = {"binding_knob": binding, "somaxconn": somax, "limit_effective": limit}
    if cause_class == "sizing":
        # Room for the peak burst seen (admitted + dropped), rounded up to a power of two.
        dropped_peak = int(in_window or 0)
        want = max(peak_enqueues, accept_queue_room(limit)) * 2
        fix_ev["backlog_suggested"] = 2 ** math.ceil(math.log2(want))
        fix_ev["somaxconn_needed"] = (somax is not None) and fix_ev["backlog_suggested"] > somax
        fix_ev["dropped_in_window"] = dropped_peak
    elif cause_class == "stall":
        rate = arrival_before or mean_accept or 1.0
        fix_ev["arrival_rate_before_per_s"] = round(rate, 1)
        fix_ev["seconds_of_arrivals_the_queue_holds"] = round(accept_queue_room(limit) / rate, 2) if rate else None
        fix_ev["stalled_seconds_seen"] = class_ev["intervals_stalled"] * interval
    else:
        fix_ev["accept_rate_per_s"] = round(mean_accept, 1)

    lab = run.lab or {}
    # In a lab the fix is a parameter, so the verification is a concrete re-run.
    if lab.get("command"):
        fixed = {"sizing": f" BACKLOG={fix_ev.get('backlog_suggested')}", "stall": " STALL_FOR=0s"}
        command = lab["command"] + fixed.get(cause_class, "")
    else:
        command = f"make capture NETNS={subject['netns_label']} DURATION=60"
    verify_ev = {
        "command": command,
        "expect_listen_overflows": 0,
        "expect_intervals_full": 0,
        "expect_connect_p99_ms_below": SYN_RETRY_US / 1000,
    }
    return Finding(
        KIND,
        status,
        subject,
        window=window,
        cause_class=cause_class,
        chain=[
            _symptom(run, netns, laddr, lport),
            Link("counter", "listen_overflows" if is_sampled else "not_sampled", counter_ev),
            Link("probe", "queue_full", probe_ev),
            Link("cause", cause_class, cause_ev),
            Link("fix", cause_class, fix_ev),
            Link("verification", "rerun", verify_ev),
        ],
    )


def _unattributed(run: RunView, inode: int, label: str, ns: _Namespace, listeners: pd.DataFrame) -> Finding:
    """Overflows counted in a namespace where the probe saw no listener full: said so, and why,
    never pinned on a listener."""
    interval = int(run.metadata.get("interval_s", 1))
    n = int(ns.overflows.sum())
    t = ns.overflows.index.to_numpy(dtype=float)
    t0, t1 = float(t.min()) - interval, float(t.max())
    status = run.probe_status("accept_queue")
    ss_full = ss_full_listeners(run, inode)
    # Listeners the probe saw one short of full (depth = limit) around the overflows.
    near = listeners[
        (listeners["netns"] == inode)
        & (listeners["time_s"] >= t0 - interval)
        & (listeners["time_s"] <= t1 + interval)
        & (listeners[["depth_max", "depth_now"]].max(axis=1) >= listeners["limit"])
    ]
    near_names = sorted({f"{a}:{int(p)}" for a, p in near[["laddr", "lport"]].itertuples(index=False)})
    if status != "ok":
        reason = "probe_not_run"
    elif ss_full:
        reason = "listener_not_tracked"
    elif near_names or interval > 1:
        reason = "interval_too_coarse"
    else:
        reason = "not_seen"
    probe_ev = {
        "probe_status": status,
        "reason": reason,
        "ss_full_listeners": ss_full,
        "near_full_listeners": near_names,
        "interval_s": interval,
        "listeners_tracked": int(
            listeners.loc[listeners["netns"] == inode, ["laddr", "lport"]].drop_duplicates().shape[0]
        ),
    }
    return Finding(
        KIND,
        "suspected",
        {"netns": inode, "netns_label": label, "laddr": None, "lport": None},
        window={
            "start_s": t0,
            "end_s": t1,
            "start_rel_s": round(t0 - run.start, 1),
            "end_rel_s": round(t1 - run.start, 1),
        },
        cause_class="unattributed",
        chain=[
            _symptom(run, inode),
            Link(
                "counter",
                "listen_overflows",
                {
                    "netns_label": label,
                    "listen_overflows": n,
                    "listen_drops": total_delta(run, inode, "ListenDrops"),
                },
            ),
            Link("probe", "no_full_listener_seen", probe_ev),
            Link("cause", "unattributed", probe_ev),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    rows = run.table("aq_listener")
    labels = {int(ns["inode"]): ns["label"] for ns in run.metadata["netns"]}
    groups = {(int(k[0]), str(k[1]), int(k[2])): g for k, g in rows.groupby(LISTENER_KEY, sort=True)}
    out: list[Finding] = []
    for inode in sorted(set(labels) | {k[0] for k in groups}):
        mine = {k: g for k, g in groups.items() if k[0] == inode}
        full = {k: full_intervals(g) for k, g in mine.items()}
        is_sampled = sampled(run, inode)
        counted = is_sampled and recorded(run, inode, "ListenOverflows")
        overflows = overflow_samples(run, inode) if is_sampled else pd.Series(dtype="int64")
        interval = int(run.metadata.get("interval_s", 1))
        # Implicated: seen full in the intervals where the counter rose (or seen full at all when the
        # counter was not captured: then only suspected).
        implicated = {
            k: f["time_s"].astype(float).tolist()
            for k, f in full.items()
            if not f.empty and (not counted or bool(samples_near(overflows, f["time_s"], interval).any()))
        }
        ns = _Namespace(
            netns=inode,
            sampled=is_sampled,
            overflows=overflows,
            full_times=implicated,
            full_events={k: int(mine[k]["full_events"].sum()) for k in implicated},
            busy=sum(int(g["enqueues"].sum()) > 0 for g in mine.values()) > 1,
            counted=counted,
        )
        for key, grp in mine.items():
            out.append(_evaluate_listener(run, key, grp, ns))
        # Overflows counted where the probe saw no listener full: unattributed, with the reason.
        if not ns.full_times and ns.overflows.sum() > 0:
            out.append(_unattributed(run, inode, labels.get(inode, str(inode)), ns, rows))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
