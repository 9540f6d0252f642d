"""accept_queue_overflow: a listener's accept queue filled and the kernel dropped connections.

Chain: symptom (client connect latency / errors, SYN retransmits)
 -> counter (TcpExt.ListenOverflows delta in the listener's namespace)
 -> probe (intervals where depth > limit, max depth vs limit)
 -> cause (requested vs effective backlog and somaxconn; accept vs arrival; class)
 -> fix -> verification.

Cause classes, from the probe's per-interval rows:
 stall     the queue was full at the end of an interval in which the listener
           accepted nothing: the application stopped calling accept().
 capacity  the queue stayed full across consecutive intervals although the
           application kept accepting: arrivals outran the accept path.
 sizing    the queue overflowed within intervals but drained by their end:
           bursts larger than the backlog.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..derived import connects
from ..derived.accept_queue import LISTENER_KEY, full_intervals, owner, requested_backlog, saturation_model, somaxconn
from ..derived.counters import sampled, total_delta
from ..findings import Finding, Link
from ..kernel import SYN_RETRY_US, accept_queue_room
from .base import Rule, RunView

KIND = "accept_queue_overflow"
INPUTS = ("aq_listener", "aq_accept", "aq_listen", "counters", "listeners", "sysctls", "connects")


def _symptom(run: RunView, netns: int) -> Link:
    lab = run.lab or {}
    client_ns = (lab.get("client") or {}).get("netns_inode")
    ev: dict[str, Any] = {}
    client = connects.summary(run)
    if client:
        for k in ("attempts", "ok", "errors", "connect_latency", "connects_waited_syn_retry", "first_byte_latency"):
            ev[k] = client[k]
    retrans_ns = int(client_ns) if client_ns is not None else netns
    if sampled(run, retrans_ns):
        ev["syn_retrans_netns"] = run.netns_label(retrans_ns)
        ev["syn_retrans"] = total_delta(run, retrans_ns, "TCPSynRetrans")
    key = "client_connects" if "attempts" in ev else ("syn_retrans_only" if "syn_retrans" in ev else "not_captured")
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
    ev = {
        "intervals_stalled": int(stalled.sum()),
        "intervals_full_at_end": int(full_at_end.sum()),
        "longest_full_run_with_accepts": longest,
    }
    if stalled.any():
        return "stall", ev
    if longest >= 2:
        return "capacity", ev
    return "sizing", ev


def _evaluate_listener(run: RunView, key: tuple[int, str, int], rows: pd.DataFrame) -> Finding:
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
    is_sampled = sampled(run, netns)
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
    if full.empty and not overflows_total:
        return Finding(
            KIND,
            "absent",
            subject,
            chain=[
                Link("probe", "never_full", probe_ev),
                Link("counter", "no_overflows" if is_sampled else "not_sampled", {"listen_overflows": overflows_total}),
            ],
        )

    if full.empty:
        t0, t1 = run.start, run.end
    else:
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
    }
    probe_ev["first_full_rel_s"] = window["start_rel_s"] + interval
    probe_ev["last_full_rel_s"] = window["end_rel_s"]

    status = "confirmed" if (not full.empty and (in_window or 0) > 0) else "suspected"
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

    cause_ev["model"] = saturation_model(run, netns, full, cause_class, limit, t0, t1, interval) if is_sampled else None

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
            _symptom(run, netns),
            Link("counter", "listen_overflows" if is_sampled else "not_sampled", counter_ev),
            Link("probe", "queue_full", probe_ev),
            Link("cause", cause_class, cause_ev),
            Link("fix", cause_class, fix_ev),
            Link("verification", "rerun", verify_ev),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    rows = run.table("aq_listener")
    out: list[Finding] = []
    seen_netns: set[int] = set()
    for key, grp in rows.groupby(LISTENER_KEY, sort=True):
        f = _evaluate_listener(run, key, grp)
        out.append(f)
        if f.status != "absent":
            seen_netns.add(int(key[0]))
    # Overflows counted in a sampled namespace where the probe saw no full listener
    # (probe not running, or the listener was beyond its 32 slots).
    for ns in run.metadata["netns"]:
        inode = int(ns["inode"])
        if inode in seen_netns or not sampled(run, inode):
            continue
        n = total_delta(run, inode, "ListenOverflows")
        if n > 0:
            out.append(
                Finding(
                    KIND,
                    "suspected",
                    {"netns": inode, "netns_label": ns["label"], "laddr": None, "lport": None},
                    window={
                        "start_s": run.start,
                        "end_s": run.end,
                        "start_rel_s": 0.0,
                        "end_rel_s": round(run.end - run.start, 1),
                    },
                    chain=[
                        _symptom(run, inode),
                        Link("counter", "listen_overflows", {"netns_label": ns["label"], "listen_overflows": n}),
                        Link(
                            "probe",
                            "no_full_listener_seen",
                            {"probe_status": run.metadata["probes"].get("accept_queue", {}).get("status")},
                        ),
                    ],
                )
            )
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
