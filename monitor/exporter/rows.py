"""Probe rows -> objects: which record feeds which family, with what counters, gauges
and score (the score decides which objects get their own series).

A row is a dict of the record's columns (strings, as collector/probe-to-csv --stream
prints them; totals are already per-interval deltas)."""

from __future__ import annotations

from collections.abc import Callable

from analysis.kernel import EADDRNOTAVAIL, ipv4_form

from .objects import Tables
from .stream import Row


def listener(t: Tables, r: Row, now: float, interval: int) -> None:
    ns = int(r["netns"])
    t.ns_seen[ns] = now
    key = (str(ns), r["laddr"], r["lport"], r.get("sock_ino") or "0")
    o = t.fams["listener"].objs.get(key)
    depth_max = int(r["depth_max"])
    if o is not None and o.gauges.get("_fresh"):  # two intervals before one write
        depth_max = max(depth_max, int(o.gauges["listener_queue_depth_max"]))
    full, enqueued = int(r["full_events"]), int(r["enqueues"])
    counters = {
        "listener_queue_full_total": full,
        "listener_enqueued_total": enqueued,
        "listener_accepted_total": int(r["accepted"]),
    }
    gauges = {
        "listener_queue_depth_max": depth_max,
        "listener_queue_depth": int(r["depth_now"]),
        "listener_queue_limit": int(r["limit"]),
        "_fresh": 1,
    }
    t.fams["listener"].add(key, now, counters, 1000.0 * full + enqueued, gauges)


def endpoint(t: Tables, r: Row, now: float, interval: int) -> None:
    ns = int(r["netns"])
    t.ns_seen[ns] = now
    side = "server" if int(r["service_local"]) else "client"
    c = {
        "endpoint_retrans_data_segments_total": int(r["data_segs"]),
        "endpoint_retrans_syn_segments_total": int(r["syn_segs"]),
        "endpoint_retrans_synack_segments_total": int(r["synack_segs"]),
    }
    # The peer as its application sees it: a dual-stack listener's IPv4 client is ::ffff:a.b.c.d
    # to the kernel and a.b.c.d to the client's own series (issue 18).
    key = (str(ns), ipv4_form(r["raddr"]), r["service_port"], side)
    t.fams["endpoint"].add(key, now, c, float(sum(c.values())))


def connect(t: Tables, r: Row, now: float, interval: int) -> None:
    ns = int(r["netns"])
    t.ns_seen[ns] = now
    n = int(r["failures"])
    c = {
        "destination_connect_failures_total": n,
        "destination_eaddrnotavail_total": n if int(r["errno"]) == EADDRNOTAVAIL else 0,
    }
    t.fams["destination"].add((str(ns), ipv4_form(r["raddr"]), r["rport"]), now, c, 100.0 * n)


def close(t: Tables, r: Row, now: float, interval: int) -> None:
    if int(r["service_local"]):
        return  # we are the server: the destination is not ours
    n = int(r["active_closes"])
    if n:
        key = (str(int(r["netns"])), ipv4_form(r["raddr"]), r["service_port"])
        t.fams["destination"].add(key, now, {"destination_active_closes_total": n}, float(n) / 100)


def loop(t: Tables, r: Row, now: float, interval: int) -> None:
    calls, empty, events = int(r["calls"]), int(r["ret_zero"]), int(r["events_sum"])
    woke = calls - empty - int(r["errors"])
    wait_ns = int(r["wait_ns_sum"])
    # The thread's CPU time comes from procfs (threads.py), exact, not from the probe's
    # reading at its sampled calls: the probe names the process to read.
    t.loop_pids[int(r["pid"])] = now
    c = {
        "loop_epoll_calls_total": calls,
        "loop_epoll_events_total": events,
        "loop_epoll_empty_total": empty,
        "loop_blocked_seconds_total": wait_ns / 1e9,
    }
    gauges = {
        "loop_blocked_ratio": min(1.0, wait_ns / (1e9 * interval)),
        "loop_events_per_wakeup": (events / woke) if woke > 0 else 0.0,
        "_fresh": 1,
    }
    key = (r["pid"], r["tid"], r["comm"])
    t.fams["loop"].add(key, now, c, wait_ns / 1e10 + calls / 1e6, gauges)


def flow(t: Tables, r: Row, now: float, interval: int) -> None:
    c = {
        "flow_writes_blocked_total": int(r["writes_blocked"]),
        "flow_writes_rwnd_limited_total": int(r["writes_rwnd_limited"]),
        "flow_writes_sndbuf_limited_total": int(r["writes_sndbuf_limited"]),
        "flow_reads_zero_window_total": int(r["reads_zero_window"]),
    }
    key = (str(int(r["netns"])), r["laddr"], r["lport"], r["raddr"], r["rport"])
    t.fams["flow"].add(key, now, c, float(sum(c.values())))


# The records the exporter turns into metrics; the others (per-flow rt_flow, per-call
# aq_listen, per-process aq_accept, rt_resets) are not kept (probe-to-csv --only).
ROWS_USED: dict[str, Callable[[Tables, Row, float, int], None]] = {
    "aq_listener": listener,
    "rt_endpoint": endpoint,
    "tw_connect": connect,
    "tw_close": close,
    "ep_loop": loop,
    "sb_flow": flow,
}
