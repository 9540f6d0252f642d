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

from .. import models
from ..findings import Finding, Link
from ..run import Run

KIND = "accept_queue_overflow"
INPUTS = ("aq_listener", "aq_accept", "aq_listen", "counters", "listeners", "sysctls", "connects")

# A dropped SYN is retried after >= 1 s (initial RTO); a connect that took this
# long almost surely waited for one.
SYN_RETRY_US = 900_000
LISTENER_KEY = ["netns", "laddr", "lport"]


def _total_delta(run: Run, netns: int, counter: str, t0: float | None = None, t1: float | None = None) -> int:
    c = run.table("counters")
    sel = (c["netns"] == netns) & (c["counter"] == counter) & c["delta"].notna()
    if t0 is not None:
        sel &= c["time_s"] >= t0
    if t1 is not None:
        sel &= c["time_s"] <= t1
    return int(c.loc[sel, "delta"].sum())


def _sampled(run: Run, netns: int) -> bool:
    return bool((run.table("counters")["netns"] == netns).any())


def _quantiles_ms(values: pd.Series) -> dict[str, float]:
    if values.empty:
        return {}
    q = values.quantile([0.5, 0.9, 0.99]).astype(float) / 1000.0
    return {
        "p50_ms": round(q[0.5], 2),
        "p90_ms": round(q[0.9], 2),
        "p99_ms": round(q[0.99], 2),
        "max_ms": round(float(values.max()) / 1000.0, 2),
    }


def _symptom(run: Run, netns: int) -> Link:
    lab = run.lab or {}
    client_ns = (lab.get("client") or {}).get("netns_inode")
    ev: dict[str, Any] = {}
    conns = run.table("connects")
    if not conns.empty:
        ok = conns["result"] == "ok"
        ev["attempts"] = len(conns)
        ev["ok"] = int(ok.sum())
        ev["errors"] = {str(k): int(v) for k, v in conns.loc[~ok, "result"].value_counts().items()}
        ev["connect_latency"] = _quantiles_ms(conns["connect_us"].astype("int64"))
        ev["connects_waited_syn_retry"] = int((conns["connect_us"] >= SYN_RETRY_US).sum())
        fb = conns["first_byte_us"].dropna().astype("int64")
        ev["first_byte_latency"] = _quantiles_ms(fb)
    retrans_ns = int(client_ns) if client_ns is not None else netns
    if _sampled(run, retrans_ns):
        ev["syn_retrans_netns"] = run.netns_label(retrans_ns)
        ev["syn_retrans"] = _total_delta(run, retrans_ns, "TCPSynRetrans")
    key = "client_connects" if "attempts" in ev else ("syn_retrans_only" if "syn_retrans" in ev else "not_captured")
    return Link("symptom", key, ev)


def _process(run: Run, netns: int, lport: int) -> dict[str, Any]:
    acc = run.table("aq_accept")
    acc = acc[(acc["netns"] == netns) & (acc["lport"] == lport)]
    if not acc.empty:
        top = acc.groupby(["pid", "comm"])["accepted"].sum().sort_values(ascending=False)
        pid, comm = top.index[0]
        return {"pid": int(pid), "comm": str(comm), "source": "probe accept()"}
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == netns) & (ls["lport"] == lport) & ls["pid"].notna()]
    if not ls.empty:
        return {"pid": int(ls["pid"].iloc[-1]), "comm": str(ls["comm"].iloc[-1]), "source": "ss -p"}
    lis = run.table("aq_listen")
    lis = lis[(lis["netns"] == netns) & (lis["lport"] == lport)]
    if not lis.empty:
        return {"pid": int(lis["pid"].iloc[-1]), "comm": str(lis["comm"].iloc[-1]), "source": "probe listen()"}
    return {"pid": None, "comm": None, "source": None}


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


def _model(
    run: Run,
    netns: int,
    rows: pd.DataFrame,
    full: pd.DataFrame,
    cause_class: str,
    limit: int,
    t0: float,
    t1: float,
    interval: int,
) -> dict[str, Any]:
    """The saturation model's prediction for this listener, with the measured numbers it takes.

    capacity: M/M/1/K with lam = attempts/s (PassiveOpens + ListenOverflows:
    retries included, as the model cannot tell them apart) and mu = accepts/s,
    both over the intervals that overflowed and ended with a queue (the accept
    loop was never idle then). sizing: a burst of B new connections into room for K loses B - K first
    attempts (B = the most passive opens in one interval).
    stall: no model; a stopped server has no service rate.
    """
    if cause_class == "stall":
        return {"kind": "not_applicable"}
    k = models.accept_queue_capacity(limit)
    win = run.counter_deltas(netns, ["PassiveOpens", "ListenOverflows"])
    win = win[(win.index > t0) & (win.index <= t1 + interval + 0.5)]
    overflows, opens = int(win["ListenOverflows"].sum()), int(win["PassiveOpens"].sum())
    attempts = overflows + opens
    measured_pct = round(100 * overflows / attempts, 1) if attempts else None
    if cause_class == "sizing":
        # Every connection is passively opened once, whatever its retries, so
        # the busiest interval's opens bound a burst from below (retries
        # spread the rest of a burst over the following intervals).
        burst = int(win["PassiveOpens"].max()) if len(win) else 0
        lost = max(burst - k, 0)
        return {
            "kind": "burst",
            "burst": burst,
            "capacity_k": k,
            "predicted_pct": round(100 * lost / burst, 1) if burst else None,
            "measured_pct": measured_pct,
        }
    # The accept loop was busy throughout the intervals that overflowed and
    # still ended with a queue: their accept counts are its service rate, and
    # the kernel's counters over the same seconds give the attempt rate and
    # the measured share (the tail of the window, where load fades, would
    # dilute both).
    busy = full[full["depth_now"] > 0]
    if busy.empty:
        busy = full
    mu = float(busy["accepted"].mean()) / interval if not busy.empty else 0.0
    b0, b1 = float(busy["time_s"].min()) - interval, float(busy["time_s"].max())
    steady = win[(win.index > b0) & (win.index <= b1 + 0.5)]
    if len(steady):
        overflows, opens = int(steady["ListenOverflows"].sum()), int(steady["PassiveOpens"].sum())
        attempts = overflows + opens
        measured_pct = round(100 * overflows / attempts, 1) if attempts else None
    seconds = max(float(len(steady) if len(steady) else len(win)) * interval, interval)
    lam = attempts / seconds
    pred = models.mm1k(lam, mu, k)
    return {
        "kind": "mm1k",
        "lam_per_s": round(lam, 1),
        "mu_per_s": round(mu, 1),
        "capacity_k": k,
        "predicted_pct": round(100 * pred.p_block, 1),
        "predicted_wait_ms": round(1000 * pred.wait_s, 1),
        "measured_pct": measured_pct,
    }


def _evaluate_listener(run: Run, key: tuple[int, str, int], rows: pd.DataFrame) -> Finding:
    netns, laddr, lport = int(key[0]), str(key[1]), int(key[2])
    rows = rows.sort_values("time_s")
    interval = int(run.metadata.get("interval_s", 1))
    limit = int(rows["limit"].max())
    full = rows[(rows["full_events"] > 0) | (rows["depth_now"] > rows["limit"])]
    subject = {
        "netns": netns,
        "netns_label": run.netns_label(netns),
        "laddr": laddr,
        "lport": lport,
        **_process(run, netns, lport),
    }
    sampled = _sampled(run, netns)
    overflows_total = _total_delta(run, netns, "ListenOverflows") if sampled else None

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
                Link("counter", "no_overflows" if sampled else "not_sampled", {"listen_overflows": overflows_total}),
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
    in_window = _total_delta(run, netns, "ListenOverflows", t0, t1 + interval + 0.5) if sampled else None
    counter_ev = {
        "netns_label": run.netns_label(netns),
        "listen_overflows": overflows_total,
        "listen_overflows_in_window": in_window,
        "listen_drops": _total_delta(run, netns, "ListenDrops") if sampled else None,
        "reqq_full_drop": _total_delta(run, netns, "TCPReqQFullDrop") if sampled else None,
        "reqq_full_cookies": _total_delta(run, netns, "TCPReqQFullDoCookies") if sampled else None,
    }
    probe_ev["first_full_rel_s"] = window["start_rel_s"] + interval
    probe_ev["last_full_rel_s"] = window["end_rel_s"]

    status = "confirmed" if (not full.empty and (in_window or 0) > 0) else "suspected"
    cause_class, class_ev = _classify(rows)

    # Requested vs effective backlog, and which knob binds.
    lis = run.table("aq_listen")
    lis = lis[(lis["netns"] == netns) & (lis["lport"] == lport) & (lis["ret"] == 0)]
    requested: int | None = int(lis["backlog_requested"].iloc[-1]) if not lis.empty else None
    lab_server = (run.lab or {}).get("server") or {}
    if (
        requested is None
        and lab_server.get("port") == lport
        and lab_server.get("netns_inode") == netns
        and lab_server.get("backlog_requested") is not None
    ):
        requested = int(lab_server["backlog_requested"])
    somax_raw = run.sysctl(netns, "net.core.somaxconn")
    somaxconn = int(somax_raw) if somax_raw is not None else None
    if requested is not None and somaxconn is not None:
        binding = "app_backlog" if requested <= somaxconn else "somaxconn"
        expected = min(requested if requested > 0 else somaxconn, somaxconn)
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
        "somaxconn": somaxconn,
        "limit_expected": expected,
        "limit_matches_min_rule": (expected == limit) if expected is not None else None,
        "binding_knob": binding,
        "peak_enqueues_per_interval": peak_enqueues,
        "accept_rate_per_s": round(mean_accept, 1),
        "accept_rate_min_per_s": round(float(active["accepted"].min()) / interval, 1) if not active.empty else 0.0,
        **class_ev,
    }

    cause_ev["model"] = _model(run, netns, rows, full, cause_class, limit, t0, t1, interval) if sampled else None

    fix_ev: dict[str, Any] = {"binding_knob": binding, "somaxconn": somaxconn, "limit_effective": limit}
    if cause_class == "sizing":
        # Room for the peak burst seen (admitted + dropped), rounded up to a power of two.
        dropped_peak = int(in_window or 0)
        want = max(peak_enqueues, limit + 1) * 2
        fix_ev["backlog_suggested"] = 2 ** math.ceil(math.log2(want))
        fix_ev["somaxconn_needed"] = (somaxconn is not None) and fix_ev["backlog_suggested"] > somaxconn
        fix_ev["dropped_in_window"] = dropped_peak
    elif cause_class == "stall":
        rate = arrival_before or mean_accept or 1.0
        fix_ev["arrival_rate_before_per_s"] = round(rate, 1)
        fix_ev["seconds_of_arrivals_the_queue_holds"] = round((limit + 1) / rate, 2) if rate else None
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
            Link("counter", "listen_overflows" if sampled else "not_sampled", counter_ev),
            Link("probe", "queue_full", probe_ev),
            Link("cause", cause_class, cause_ev),
            Link("fix", cause_class, fix_ev),
            Link("verification", "rerun", verify_ev),
        ],
    )


def evaluate(run: Run) -> list[Finding]:
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
        if inode in seen_netns or not _sampled(run, inode):
            continue
        n = _total_delta(run, inode, "ListenOverflows")
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
